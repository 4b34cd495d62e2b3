"""The CLI as a user runs it: a real subprocess, exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def cli(*args: str, db: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess[str]:  # type: ignore[type-arg]
    argv = [sys.executable, "-m", "scheduler"]
    if db is not None:
        argv += ["--db", db]  # before the command: anything after "--" belongs to a host command
    argv += list(args)
    # Run beside the database so per-turn logs (./floorgate-state) land in the test's temp dir.
    cwd = os.path.dirname(db) if db is not None and os.path.isabs(db) else None
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=cwd)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def db(tmp_path) -> str:  # type: ignore[no-untyped-def]
    return str(tmp_path / "cli.db")


def test_policy_admit_confirm_status_round_trip(db: str) -> None:
    r = cli("policy", "set", "inbox/triage", "--min-interval", "24h", "--revision", "0", "--owner-ref", "alice", "--json", db=db)
    assert r.returncode == 0 and json.loads(r.stdout)["revision"] == 1
    r = cli("admit", "--goal", "inbox", "--agent", "triage", "--automation", "am", "--turn", "t1", "--json", db=db)
    first = json.loads(r.stdout)
    assert r.returncode == 0 and first["admitted"] and first["reason"] == "eligible"
    r = cli("confirm", "t1", "--json", db=db)
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "confirmed"
    r = cli("admit", "--goal", "inbox", "--agent", "triage", "--automation", "am", "--turn", "t2", "--json", db=db)
    denied = json.loads(r.stdout)
    assert r.returncode == 3 and denied["reason"] == "interval_wait"
    assert denied["next_eligible_at"] == first["next_eligible_at"]
    r = cli("status", "--goal", "inbox", "--agent", "triage", "--automation", "am", "--json", db=db)
    lane = json.loads(r.stdout)["lanes"][0]
    assert lane["status"] == "interval_wait" and lane["next_eligible_at"] == first["next_eligible_at"]
    assert lane["effective_floor"]["rules"] == [{"scope": "inbox/triage", "scope_kind": "agent", "min_interval": "1d", "revision": 1}]
    r = cli("starts", "--json", db=db)
    assert [s["turn_id"] for s in json.loads(r.stdout)["starts"]] == ["t1"]
    r = cli("policy", "history", "--json", db=db)
    assert json.loads(r.stdout)["history"][0]["after"] == "1d"
    table = cli("status", db=db)
    assert table.returncode == 0 and "inbox/triage/am" in table.stdout and "interval_wait" in table.stdout


def test_exit_codes_and_one_line_errors(db: str) -> None:
    base = ["policy", "set", "g/a", "--owner-ref", "alice"]
    bad = cli(*base, "--min-interval", "5x", "--revision", "0", db=db)
    assert bad.returncode == 2 and "--min-interval" in one_line_error(bad)
    assert cli(*base, "--min-interval", "1d", "--revision", "0", db=db).returncode == 0
    conflict = cli(*base, "--min-interval", "2d", "--revision", "0", db=db)
    assert conflict.returncode == 4 and "--revision 1" in one_line_error(conflict)
    lower = cli(*base, "--min-interval", "1h", "--revision", "1", db=db)
    assert lower.returncode == 2 and "--allow-reduction" in one_line_error(lower)
    assert cli(*base, "--min-interval", "0", "--revision", "1", "--allow-reduction", db=db).returncode == 0
    missing = cli("admit", "--goal", "g", db=db)
    assert missing.returncode == 2 and "--agent" in one_line_error(missing)
    bad_id = cli("admit", "--goal", "g h", "--agent", "a", db=db)
    assert bad_id.returncode == 2 and one_line_error(bad_id).startswith("floorgate: error: goal:")
    naive = cli("admit", "--goal", "g", "--agent", "a", "--trigger-time", "2026-12-01T09:00:00", db=db)
    assert naive.returncode == 2 and "--trigger-time" in one_line_error(naive)


def test_newer_schema_is_a_one_line_store_error(db: str) -> None:
    assert cli("status", db=db).returncode == 0
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE fg_alembic_version SET version_num = '0099'")
    r = cli("status", db=db)
    assert r.returncode == 1 and "newer than this floorgate" in one_line_error(r)


def test_demo_runs_from_an_empty_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = subprocess.run([sys.executable, "-m", "scheduler", "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "(exit 3)" in r.stdout and "eligible at" in r.stdout
    assert (tmp_path / "floorgate-demo.db").exists()
