"""Plain values and functions the tests share (not fixtures): the fixed start instant ``T0``, the
PostgreSQL test URL and its schemas, a hand edit's ``raw_sql``, per-worker names, and where the real
agent CLIs live. Tests import these from here; ``conftest.py`` holds only fixtures and imports them too.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from floorgate.admission import Store

PG_URL = os.environ.get("FLOORGATE_TEST_PG_URL")
PG_REQUIRED = os.environ.get("FLOORGATE_TEST_PG_REQUIRED") == "1"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)


def pg_or_skip() -> str:
    if not PG_URL:
        if PG_REQUIRED:
            pytest.fail("FLOORGATE_TEST_PG_URL is not set but FLOORGATE_TEST_PG_REQUIRED=1")
        pytest.skip("FLOORGATE_TEST_PG_URL not set")
    return PG_URL


def pg_schema_url(base: str, schema: str) -> str:
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}options={quote(f'-csearch_path={schema}')}"


def psycopg_dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def store_made(url: str) -> bool:
    """Whether anything of a store exists at ``url``: a SQLite file (or its journal), or a table in
    a PostgreSQL URL's schema."""
    if "://" not in url:
        where = Path(url)
        return any(p.name.startswith(where.name) for p in where.parent.iterdir())
    import psycopg

    with psycopg.connect(psycopg_dsn(url)) as conn:
        query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s"
        row = conn.execute(query, (pg_schema_of(url),)).fetchone()
    return row is not None and row[0] > 0


def pg_schema_of(url: str) -> str:
    options = parse_qs(urlsplit(url).query)["options"][0]
    return options.removeprefix("-csearch_path=")


def replay(url: str, statements: list[tuple[str, Any, bool]]) -> None:
    """Build the migrated schema in ``url``'s (empty) schema: one transaction, few round trips."""
    import psycopg

    # The test's schema needs no durability: not waiting for the WAL flush cuts the commit's cost.
    batch = [f'SET LOCAL search_path TO "{pg_schema_of(url)}"', "SET LOCAL synchronous_commit TO off"]
    with psycopg.connect(psycopg_dsn(url.split("?", 1)[0])) as conn:
        for sql, params, many in statements:
            if params is None:
                batch.append(sql)
                continue
            if batch:
                conn.execute(";\n".join(batch))
                batch = []
            if many:
                conn.cursor().executemany(sql, params)
            else:
                conn.execute(sql, params)
        if batch:
            conn.execute(";\n".join(batch))


def raw_sql(store: Store, sql: str, params: dict | None = None) -> list[tuple]:  # type: ignore[type-arg]
    """Run SQL as a hand edit would (outside floorgate's API), committing it."""
    from sqlalchemy import text

    with store.engine.begin() as conn:
        result = conn.execute(text(sql), params or {})
        return [tuple(r) for r in result] if result.returns_rows else []


DAY = timedelta(days=1)
MS = timedelta(milliseconds=1)


def worker_suffix() -> str:
    """'' alone, '-gw0', '-gw1' ... under pytest-xdist: per-worker names for shared real resources
    (a crontab account), so parallel workers never edit the same one."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    tag = os.environ.get("FLOORGATE_TEST_USER_TAG")  # separate checkouts testing at once on one machine
    return (f"-{tag}" if tag else "") + (f"-{worker}" if worker else "")


AGENT_CACHE = Path(os.environ.get("FLOORGATE_AGENT_CACHE") or Path.home() / ".cache" / "floorgate-agents")
AGENTS_REQUIRED = os.environ.get("FLOORGATE_TEST_AGENTS_REQUIRED") == "1"


def agent_cli(name: str) -> Path:
    """The real CLI ``name`` ('claude' or 'codex') from the cache, or skip (fail when required)."""
    path = AGENT_CACHE / "node_modules" / ".bin" / name
    if not os.access(path, os.X_OK):
        message = f"{name} is not installed in {AGENT_CACHE} (run .ci/agents)"
        if AGENTS_REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return path
