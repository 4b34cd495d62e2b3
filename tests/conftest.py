"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests read FLOORGATE_TEST_PG_URL and skip without it on a developer's machine; with
FLOORGATE_TEST_PG_REQUIRED=1 (set by .ci/run) a missing or unreachable server fails the test.
Each PostgreSQL test gets its own schema, so tests never see each other's rows.

Migrating a store per test is what made the suite slow, so ``store`` starts from a migrated template
made once per session: on SQLite a file copied into the test's directory, on PostgreSQL the statements
that migrating the template schema executed, replayed into the test's own schema in one round trip
(measured: ~0.15 s per Alembic run against ~0.03 s per copy or replay). Both templates are the real
migrations' output, so a new migration is picked up without touching this file; ``db_url`` alone is
still an empty database, for tests of migrating and reopening.
"""

from __future__ import annotations

import json
import shutil
import uuid
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
from basics import PG_REQUIRED, T0, agent_cli, pg_or_skip, pg_schema_url, psycopg_dsn, replay

from floorgate.admission import Admission, FixedClock, Policies, Store, open_store
from floorgate.admission import _limit_read as limit_read


@pytest.fixture(autouse=True)
def _no_lane_known_limited() -> None:
    """Each test starts with no lane known to have counts or budgets: that cache is the process's,
    keyed by lane, and tests give lanes the same names on stores of their own (a lane learnt on
    another test's store costs the next one the limited path's statements, and its counts)."""
    limit_read.forget_all()


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to head once per session (copied, never opened, by each test)."""
    path = tmp_path_factory.mktemp("template") / "floorgate.db"
    open_store(str(path)).close()
    leftovers = [p.name for p in path.parent.iterdir() if p != path]
    if leftovers:  # the copy must be the whole database: closing checkpoints the WAL
        pytest.fail(f"the SQLite template left {leftovers} beside the database file after close")
    return path


@pytest.fixture(scope="session")
def _pg_template() -> list[tuple[str, Any, bool]]:
    """The statements (and parameters) migrating an empty PostgreSQL schema executes, reads left out."""
    import psycopg
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    base = pg_or_skip()
    schema = f"fgt_tmpl_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    captured: list[tuple[str, Any, bool]] = []

    def capture(_conn, _cursor, statement: str, parameters: Any, _context, executemany: bool) -> None:  # type: ignore[no-untyped-def]
        # Reads (Alembic's version and reflection queries, the advisory lock) change nothing.
        if statement.lstrip().split(None, 1)[0].upper() not in ("SELECT", "SHOW"):
            captured.append((statement, parameters if parameters else None, executemany))

    event.listen(Engine, "before_cursor_execute", capture)
    try:
        open_store(pg_schema_url(base, schema)).close()
    finally:
        event.remove(Engine, "before_cursor_execute", capture)
        with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    if not captured:
        pytest.fail("migrating the PostgreSQL template executed no DDL")
    return captured


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A URL for an empty database on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "floorgate.db")
        return
    base = pg_or_skip()
    import psycopg

    schema = f"fgt_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except psycopg.OperationalError as exc:
        if PG_REQUIRED:
            pytest.fail(f"PostgreSQL at {base} is unreachable: {exc}")
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    try:
        yield pg_schema_url(base, schema)
    finally:
        with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
            conn.execute("SET synchronous_commit TO off")
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def store(db_url: str, request: pytest.FixtureRequest) -> Iterator[Store]:
    """An open store at ``db_url``, migrated to head (from the session's template)."""
    if "://" in db_url:
        replay(db_url, request.getfixturevalue("_pg_template"))
    else:
        shutil.copy(request.getfixturevalue("_sqlite_template"), db_url)
    s = open_store(db_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def sqlite_db(tmp_path: Path, _sqlite_template: Path) -> str:
    """The path of a migrated SQLite file in the test's directory (for CLI and process tests)."""
    path = tmp_path / "cli.db"
    shutil.copy(_sqlite_template, path)
    return str(path)


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def wall_clock() -> FixedClock:
    """A fixed clock set to the system's time when the test starts, whole seconds: for a test whose
    ``floorgate`` subprocesses read the system clock while the test's own services read this one
    (a clock fixed at T0 drifts a day behind them each day after T0)."""
    return FixedClock(datetime.now(timezone.utc).replace(microsecond=0))


@pytest.fixture
def policies(store: Store, clock: FixedClock) -> Policies:
    return Policies(store, clock)


@pytest.fixture
def admission(store: Store, clock: FixedClock) -> Admission:
    return Admission(store, clock)


# -- the real agent CLIs (tests/agents/, the qualification suite; ``basics.agent_cli``) -----------


@pytest.fixture
def claude_cli() -> Path:
    return agent_cli("claude")


@pytest.fixture
def codex_cli() -> Path:
    return agent_cli("codex")


@pytest.fixture
def cron_running(tmp_path: Path):  # type: ignore[no-untyped-def]
    """The machine looks like it runs a cron daemon for the test (see ``helpers.fake_cron_daemon``)."""
    from floorgate.hosts.crontab import cron_daemon_running

    from helpers import fake_cron_daemon, wait_for

    proc = fake_cron_daemon(tmp_path)
    try:
        wait_for(cron_daemon_running, what="the stand-in cron process")
        yield proc
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def bench_row(record_property):  # type: ignore[no-untyped-def]
    """Record a counted figure (round trips, commits) as a row of ``bench/all.py``'s table: a
    property in pytest's JUnit XML report, read back by that script (the test still asserts it)."""

    def record(measure: str, now: str, goal: str, met: bool) -> None:
        record_property("bench_row", json.dumps({"measure": measure, "backend": "", "now": now, "goal": goal, "met": met}))

    return record
