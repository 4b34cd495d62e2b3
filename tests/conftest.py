"""Shared fixtures: every store test runs on SQLite and on PostgreSQL.

PostgreSQL tests read FLOORGATE_TEST_PG_URL and skip without it on a developer's machine; with
FLOORGATE_TEST_PG_REQUIRED=1 (set by .ci/run) a missing or unreachable server fails the test.
Each PostgreSQL test gets its own schema, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from urllib.parse import quote

import pytest

from admission import Admission, FixedClock, Policies, Store, open_store

PG_URL = os.environ.get("FLOORGATE_TEST_PG_URL")
PG_REQUIRED = os.environ.get("FLOORGATE_TEST_PG_REQUIRED") == "1"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def _pg_or_skip() -> str:
    if not PG_URL:
        if PG_REQUIRED:
            pytest.fail("FLOORGATE_TEST_PG_URL is not set but FLOORGATE_TEST_PG_REQUIRED=1")
        pytest.skip("FLOORGATE_TEST_PG_URL not set")
    return PG_URL


def _pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


def _psycopg_dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """A URL for an empty database on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "floorgate.db")
        return
    base = _pg_or_skip()
    import psycopg

    schema = f"fgt_{uuid.uuid4().hex[:12]}"
    try:
        with psycopg.connect(_psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
    except psycopg.OperationalError as exc:
        if PG_REQUIRED:
            pytest.fail(f"PostgreSQL at {base} is unreachable: {exc}")
        pytest.skip(f"PostgreSQL unreachable: {exc}")
    try:
        yield _pg_schema_url(base, schema)
    finally:
        with psycopg.connect(_psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    s = open_store(db_url)
    try:
        yield s
    finally:
        s.close()


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


@pytest.fixture
def policies(store: Store, clock: FixedClock) -> Policies:
    return Policies(store, clock)


@pytest.fixture
def admission(store: Store, clock: FixedClock) -> Admission:
    return Admission(store, clock)


def raw_sql(store: Store, sql: str, params: dict | None = None) -> list[tuple]:  # type: ignore[type-arg]
    """Run SQL as a hand edit would (outside floorgate's API), committing it."""
    from sqlalchemy import text

    with store.engine.begin() as conn:
        result = conn.execute(text(sql), params or {})
        return [tuple(r) for r in result] if result.returns_rows else []


DAY = timedelta(days=1)
MS = timedelta(milliseconds=1)
