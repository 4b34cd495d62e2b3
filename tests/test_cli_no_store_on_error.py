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


def test_a_valid_owner_write_creates_its_store(tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    result = run_cli("policy", "set", "g/a", "--max-starts", "5", "--per", "1d", *OWNER, db=str(db))
    assert result.returncode == 0, result.stderr
    assert db.exists()
    assert run_cli("policy", "show", "g/a", db=str(db)).returncode == 0


def test_automation_add_with_a_bad_schedule_creates_no_store(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    result = run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every nope", "--", "true", db=str(db))
    assert result.returncode == 2 and "schedule" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []
    good = run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "true", db=str(db))
    assert good.returncode == 0, good.stderr
    assert db.exists()
