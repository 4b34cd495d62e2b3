"""An owner write refused for its input creates no store: a typo in ``--db`` plus a bad flag leaves
no stray store file behind (the authorization reads owners only where a store exists, and the
limits' combination is checked before the store is opened)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import run_cli

OWNER = ("--revision", "0", "--owner-ref", "alice")

REFUSED = [
    pytest.param(("policy", "set", "g/a", "--budget-usd", "NaN", "--per", "1d", *OWNER), "--budget-usd", id="usd-nan"),
    pytest.param(("policy", "set", "g/a", "--max-starts", "5", *OWNER), "--per", id="count-without-window"),
    pytest.param(("policy", "set", "g/a", "--per", "1d", *OWNER), "--per", id="window-without-limit"),
    pytest.param(("policy", "set", "g/a", "--across", "agents", *OWNER), "--across", id="across-on-an-agent"),
    pytest.param(("policy", "set", "g/a", "--min-interval", "nope", *OWNER), "--min-interval", id="bad-interval"),
    pytest.param(("policy", "price", "m1", "--usd-per-mtok", "-3", *OWNER), "--usd-per-mtok", id="negative-price"),
]


@pytest.mark.parametrize(("argv", "field"), REFUSED)
def test_a_refused_owner_write_creates_no_store(tmp_path: Path, argv: tuple[str, ...], field: str) -> None:
    db = tmp_path / "typo.db"
    result = run_cli(*argv, db=str(db))
    assert result.returncode == 2, result.stderr
    assert field in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "a refused write left a store behind"


def test_a_valid_owner_write_creates_its_store_and_says_so(db_url: str) -> None:
    """A mistyped --db would otherwise keep the floor where nothing reads it: the write that created
    the store says where (a SQLite file's path; PostgreSQL: a database, here a schema, with no
    floorgate tables yet), once; a later write to it, and a read, say nothing of it."""
    sqlite = "://" not in db_url
    result = run_cli("policy", "set", "g/a", "--max-starts", "5", "--per", "1d", *OWNER, db=db_url)
    assert result.returncode == 0, result.stderr
    where = db_url if sqlite else "postgresql+psycopg://"
    assert result.stderr.startswith(f"floorgate: created a new, empty store at {where}"), result.stderr
    assert result.stderr.endswith("; if you meant an existing one, give its --db (or $FLOORGATE_DB)\n")
    assert result.stderr.count("\n") == 1
    if sqlite:
        assert Path(db_url).exists()
    again = run_cli("policy", "set", "g/b", "--max-starts", "5", "--per", "1d", *OWNER, db=db_url)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    shown = run_cli("policy", "show", "g/a", db=db_url)
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
