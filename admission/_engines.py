"""The store's engines and the files they open: SQLite (one file, WAL, durable commits) and
PostgreSQL (psycopg 3, bounded lock waits), and the checks that refuse a file that is not a store
(foreign, empty) or absent where a command must not create one.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError

from .errors import NoStore

BUSY_TIMEOUT_MS = 30_000
# PostgreSQL: how long a statement may wait for a lock (an advisory or row lock held by a stalled
# transaction), and run at all, before it fails and admission denies state_unavailable. Admission
# holds its locks for milliseconds; waiting longer would outlast an agent CLI's hook timeout.
LOCK_TIMEOUT_MS = 5_000
_STATEMENT_TIMEOUT_MS = 30_000
# Each thread keeps one connection for the admission hot path and may borrow one more for other
# work; a host runs up to a few dozen threads, so the pool must hold both without waiting.
_POOL = {"pool_size": 16, "max_overflow": 48}


def sqlite_engine(url: str) -> Engine:
    """An engine on the SQLite file at ``url``: WAL, FULL sync, a busy timeout, and BEGIN IMMEDIATE
    for a write transaction (the ``fg_immediate`` execution option)."""
    engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000}, **_POOL)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        # Take transaction control from the sqlite3 module so BEGIN IMMEDIATE is ours to emit.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk when it returns, so an admitted start survives a crash.
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("fg_immediate") else "BEGIN")

    return engine


def pg_engine(url: str, lock_timeout_ms: int) -> Engine:
    """An engine on the PostgreSQL database at ``url`` whose sessions wait at most
    ``lock_timeout_ms`` for a lock (and a bounded time for any statement)."""
    engine = create_engine(url, pool_pre_ping=False, **_POOL)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        autocommit = dbapi_conn.autocommit
        dbapi_conn.autocommit = True  # a SET outside any transaction lasts for the session
        dbapi_conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}; SET statement_timeout = {_STATEMENT_TIMEOUT_MS}")
        dbapi_conn.autocommit = autocommit

    return engine


_SQLITE_HEADER = b"SQLite format 3\x00"


def foreign_file(path: Path) -> bool:
    """A non-empty file that does not begin with SQLite's header (a text file, a typo'd path):
    connecting would fail with 'file is not a database', or worse, be taken for a new store."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError:
        return False  # absent or unreadable: connecting names the problem
    return bool(head) and head != _SQLITE_HEADER


def empty_file(path: Path) -> bool:
    """A zero-byte file with no write-ahead log to recover from (SQLite would call it a new database)."""
    try:
        if path.stat().st_size != 0:
            return False
    except FileNotFoundError:
        return False
    except OSError:
        return False  # connecting names the problem
    wal = path.with_name(path.name + "-wal")
    return not (wal.exists() and wal.stat().st_size > 0)


def no_store(where: str, missing_dir: str | None = None) -> NoStore:
    """The error for a read or a host pointed where no store exists (``where``: a path or URL;
    ``missing_dir``: its directory, when that does not exist either: init would not make it)."""
    create = f"floorgate init --db {shlex.quote(where)}"
    if missing_dir is not None:
        create = f"mkdir -p {shlex.quote(missing_dir)} && {create}"
    error = NoStore(
        f"no floorgate store at {where}{' (its directory does not exist)' if missing_dir is not None else ''}: point at "
        f"yours with --db URL or $FLOORGATE_DB, or create it with '{create}' (only a command that adds something creates one)"
    )
    error.where = where  # for a caller that says so in its own words
    return error


def require_existing(resolved: str) -> None:
    """Refuse a SQLite path where no file exists (connecting would create one)."""
    try:
        parsed = make_url(resolved)
    except ArgumentError:
        return  # open_store names the bad URL
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser().resolve()
        if not path.exists():
            raise no_store(str(path), None if path.parent.is_dir() else str(path.parent))
