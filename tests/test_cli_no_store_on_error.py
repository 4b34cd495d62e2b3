"""An owner write refused for its input creates no store: a typo in ``--db`` plus a bad flag leaves
no stray store file behind (the authorization reads owners only where a store exists, and the
limits' combination is checked before the store is opened)."""

from __future__ import annotations

from pathlib import Path

import pytest
from basics import store_made

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
    assert result.stderr.startswith(f"floorgate: created a new store at {where}"), result.stderr
    assert result.stderr.endswith("; if you meant an existing one, give its --db (or $FLOORGATE_DB)\n")
    assert result.stderr.count("\n") == 1
    if sqlite:
        assert Path(db_url).exists()
    again = run_cli("policy", "set", "g/b", "--max-starts", "5", "--per", "1d", *OWNER, db=db_url)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    shown = run_cli("policy", "show", "g/a", db=db_url)
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr


def test_automation_add_with_a_bad_schedule_creates_no_store(tmp_path: Path) -> None:
    db = tmp_path / "typo.db"
    result = run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every nope", "--", "true", db=str(db))
    assert result.returncode == 2 and "schedule" in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []
    good = run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "true", db=str(db))
    assert good.returncode == 0, good.stderr
    assert db.exists()


ON_WHAT_A_STORE_HOLDS = [
    pytest.param(("automation", "edit", "nosuch", "--timeout", "5m"), id="automation-edit"),
    pytest.param(("automation", "pause", "nosuch"), id="automation-pause"),
    pytest.param(("automation", "resume", "nosuch"), id="automation-resume"),
    pytest.param(("automation", "remove", "nosuch"), id="automation-remove"),
    pytest.param(("automation", "trigger", "nosuch"), id="automation-trigger"),
    pytest.param(("automation", "backfill", "nosuch", "--from", "2026-12-01T00:00:00Z", "--to", "2026-12-02T00:00:00Z"), id="backfill"),
    pytest.param(("turn", "run", "nosuch"), id="turn-run"),
    pytest.param(("notify", "retry", "7"), id="notify-retry"),
    pytest.param(("notify", "deliver"), id="notify-deliver"),
]


@pytest.mark.parametrize("argv", ON_WHAT_A_STORE_HOLDS)
def test_a_change_to_what_a_store_holds_never_creates_one(db_url: str, argv: tuple[str, ...]) -> None:
    """A mistyped --db with a change to an automation or a webhook says there is no store there, as a
    read does, instead of creating an empty one and then refusing the change."""
    result = run_cli(*argv, db=db_url)
    assert result.returncode == 1, result.stderr
    assert result.stderr.count("\n") == 1 and "no floorgate store at" in result.stderr and "floorgate init --db" in result.stderr
    assert not store_made(db_url), "a change to something no store holds created a store"


FLOOR = '[[floor]]\nscope = "g/a"\nmin_interval = "{interval}"\n'


def test_apply_plans_a_new_path_against_an_empty_store_and_creates_it_only_to_apply(tmp_path: Path) -> None:
    """A dry run, or a refused file, on a path with no store (a typo in --db) creates none; the
    dry run says so; a clean apply creates it."""
    (tmp_path / "ok.toml").write_text(FLOOR.format(interval="1h"))
    (tmp_path / "bad.toml").write_text(FLOOR.format(interval="nope"))
    db = tmp_path / "typo.db"
    dry = run_cli("apply", "-f", "ok.toml", "--dry-run", db=str(db), cwd=tmp_path)
    assert dry.returncode == 0 and "+ floor g/a (create)" in dry.stdout, dry.stderr
    assert f"no store at {db} yet: applying creates it" in dry.stdout
    refused = run_cli("apply", "-f", "bad.toml", "--owner-ref", "alice", db=str(db), cwd=tmp_path)
    assert refused.returncode == 2 and "bad.toml:3: floor g/a: min_interval" in refused.stderr, refused.stderr
    assert not db.exists()
    done = run_cli("apply", "-f", "ok.toml", "--owner-ref", "alice", db=str(db), cwd=tmp_path)
    assert done.returncode == 0 and "applied 1 change(s)" in done.stdout, done.stderr
    again = run_cli("apply", "-f", "ok.toml", "--dry-run", db=str(db), cwd=tmp_path)
    assert "= floor g/a (unchanged)" in again.stdout and "no store at" not in again.stdout


def test_apply_warns_of_a_limit_no_start_can_pass(tmp_path: Path) -> None:
    (tmp_path / "f.toml").write_text('[[floor]]\nscope = "g/b"\nbudget_tokens = "100k"\nbudget_per = "1d"\n')
    done = run_cli("apply", "-f", "f.toml", "--owner-ref", "alice", db=str(tmp_path / "s.db"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "floorgate: warning: g/b: 100k tokens per 1d at g/b:" in done.stderr and "cannot admit: no estimate" in done.stderr
