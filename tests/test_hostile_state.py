"""Damaged state never admits: a row missing a value the schema requires (a table rebuilt by hand
without its constraints), an empty database file. Each case denies ``state_unavailable`` and
readback says ``unavailable``, on both backends."""

from __future__ import annotations

import re
import sqlite3
from datetime import timedelta

import pytest
from basics import T0, raw_sql

from floorgate.admission import Admission, FixedClock, Store, open_store
from floorgate.admission.decisions import Reason
from floorgate.admission.errors import StoreUnavailable

from cli import run_cli
from helpers import floor


def relax(store: Store, table: str, column: str) -> Store:
    """Drop ``column``'s NOT NULL as a hand rebuild of ``table`` would; return the store reopened."""
    if store.dialect == "postgresql":
        raw_sql(store, f"ALTER TABLE {table} ALTER COLUMN {column} DROP NOT NULL")
    else:
        conn = sqlite3.connect(store.engine.url.database, isolation_level=None)
        conn.execute("PRAGMA writable_schema=ON")
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        relaxed = re.sub(rf"({column} \w+(\(\d+\))?) NOT NULL", r"\1", sql)
        assert relaxed != sql
        (version,) = conn.execute("PRAGMA schema_version").fetchone()
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (relaxed, table))
        conn.execute(f"PRAGMA schema_version={version + 1}")
        conn.execute("PRAGMA writable_schema=OFF")
        conn.close()
    url = store.url
    store.close()
    return open_store(url)


NULL_CASES = [
    ("fg_rules", "min_interval_us", "agent_id = 'a'"),
    ("fg_rules", "revision", "agent_id = 'a'"),
    ("fg_rules", "automation_id", "agent_id = 'a'"),
    ("fg_rules", "agent_id", "agent_id = 'a'"),
    ("fg_starts", "anchor_us", "turn_id = 't1'"),
    ("fg_starts", "agent_id", "turn_id = 't1'"),
    ("fg_starts", "goal_id", "turn_id = 't1'"),
    ("fg_starts", "automation_id", "turn_id = 't1'"),
    ("fg_starts", "trigger_us", "turn_id = 't1'"),
]


@pytest.mark.parametrize(("table", "column", "where"), NULL_CASES, ids=[f"{t}.{c}" for t, c, _ in NULL_CASES])
def test_a_null_where_the_schema_requires_a_value_denies(store: Store, table: str, column: str, where: str) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a/x", timedelta(hours=1))
    first = Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0)
    assert first.admitted
    Admission(store, clock).confirm("t1")
    if store.dialect == "postgresql" and table == "fg_rules" and column.endswith("_id"):
        with pytest.raises(Exception, match="primary key"):  # PostgreSQL keys can never be NULL
            raw_sql(store, f"ALTER TABLE {table} ALTER COLUMN {column} DROP NOT NULL")
        return
    store = relax(store, table, column)
    try:
        raw_sql(store, f"UPDATE {table} SET {column} = NULL WHERE {where}")
        clock.advance(timedelta(minutes=1))
        admission = Admission(store, clock)
        readback = admission.eligibility("g", "a", "x")
        assert (readback.status, readback.reason) == ("unavailable", Reason.STATE_UNAVAILABLE)
        decision = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=T0 + timedelta(minutes=1))
        assert (decision.admitted, decision.reason) == (False, Reason.STATE_UNAVAILABLE)
        manual = admission.reserve(goal="g", agent="a", automation="x", turn_id="t3", trigger_time=T0, manual_reason="owner asked")
        assert (manual.admitted, manual.reason) == (False, Reason.STATE_UNAVAILABLE)
    finally:
        store.close()


def test_an_intact_store_is_not_relaxed(store: Store) -> None:
    assert store.relaxed is False


@pytest.mark.parametrize(
    "command",
    [["policy", "show", "g/a"], ["policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o"], ["status"]],
)
def test_an_empty_database_file_is_refused_not_made_a_fresh_store(tmp_path, command: list[str]) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "floorgate.db"
    path.touch()
    result = run_cli(*command, db=str(path))
    assert result.returncode == 1, result
    assert "empty file" in result.stderr and "floorgate init" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert path.stat().st_size == 0  # nothing was written
    with pytest.raises(StoreUnavailable, match="empty file"):
        open_store(str(path))


def test_init_starts_a_store_on_an_empty_file_and_a_write_still_creates_a_new_path(tmp_path) -> None:  # type: ignore[no-untyped-def]
    empty = tmp_path / "empty.db"
    empty.touch()
    assert run_cli("init", db=str(empty)).returncode == 0
    assert run_cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", db=str(empty)).returncode == 0
    assert run_cli("init", db=str(empty)).returncode == 0  # an existing store is kept
    assert "1h" in run_cli("policy", "show", "g/a", db=str(empty)).stdout
    fresh = tmp_path / "fresh.db"
    assert run_cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", db=str(fresh)).returncode == 0
