"""The durable store: one SQLite file by default, PostgreSQL for several hosts.

``open_store(url)`` creates the engine, applies Alembic migrations under a lock, and refuses a
database whose schema revision this version does not know (written by a newer floorgate).
Services do their reads in ``Store.read()`` and their writes in ``Store.write(lock_key)``;
database errors are translated to ``StoreUnavailable`` here and nowhere else.

Units of work: ``Store.unit()`` opens one transaction (``admission.unit.UnitOfWork``) that
repositories join with ``unit=``: each does its reads and writes in it instead of its own, its lock
taken there once, so several repositories' changes commit once, together, or not at all.

Its parts live beside it: ``_urls`` (which database a URL names), ``_engines`` (the engines and
the store-file checks), ``_driver`` (the hot path's DBAPI transaction, lock ids, the SQLite writer
queue) and ``_upgrade`` (schema revision and migrations); the names other modules use are
importable from here.
"""

from __future__ import annotations

import contextlib
import operator
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from ._driver import DriverTx, WriterQueue, first_line, lock_id
from ._engines import BUSY_TIMEOUT_MS, LOCK_TIMEOUT_MS, empty_file, foreign_file, pg_engine, require_existing, sqlite_engine
from ._upgrade import MIGRATIONS as _MIGRATIONS
from ._upgrade import VERSION_TABLE as _VERSION_TABLE
from ._upgrade import constraints_relaxed, head_revision, limit_marks_intact, migrate
from ._urls import DEFAULT_URL, ENV_URL, absolute_url, redact_url, resolve_url
from .errors import FloorgateError, InvalidInput, StoreUnavailable
from .unit import UnitOfWork

# Names other modules import from here (the store's public surface and what tests read).
__all__ = [
    "DEFAULT_URL",
    "ENV_URL",
    "LOCK_TIMEOUT_MS",
    "_MIGRATIONS",
    "_VERSION_TABLE",
    "DriverTx",
    "Store",
    "WriterQueue",
    "absolute_url",
    "head_revision",
    "lock_id",
    "open_store",
    "redact_url",
    "resolve_url",
]

_NAMED = re.compile(r"(?<![:\w]):(\w+)")


def _raw_cursor_type() -> Any:
    """psycopg's cursor that sends ``$n`` text as it is (imported only where PostgreSQL is used)."""
    import psycopg

    return psycopg.RawCursor


# An advisory lock taken inside a transaction the caller holds (PostgreSQL).
LOCK_SQL = "SELECT pg_advisory_xact_lock(CAST(:k AS BIGINT))"


class _Autocommit(DriverTx):
    """``DriverTx`` for single autocommitted statements (``Store.autocommit``): each call runs one
    statement on this thread's hot connection, its own transaction, with no context to enter."""

    def __init__(self, store: Store) -> None:  # no cursor of its own: the store keeps one per hot connection
        self._store = self._owner = store
        self.dialect = store.dialect
        self.relaxed = store.relaxed
        self.marked = store.marked
        self.url = store.url

    def row(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        return self._owner._one(sql, params, fetch=True)  # type: ignore[return-value]

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        return self._owner._one(sql, params, fetch=False)  # type: ignore[return-value]


class _Locked:
    """``Store.locked``: one statement run after advisory locks, in one transaction, sent with
    them as one pipeline (PostgreSQL)."""

    def __init__(self, store: Store, keys: tuple[str, ...]) -> None:
        self._owner = store
        self._keys = keys
        self.relaxed = store.relaxed

    def row(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        return self._owner._locked_row(self._keys, sql, params)


def _values_in_order(names: tuple[str, ...]) -> Callable[[dict[str, Any]], tuple[Any, ...]]:
    """A statement's parameter values in ``names``' order, as one C call (``itemgetter``) per decision."""
    if len(names) > 1:
        return operator.itemgetter(*names)
    if names:
        one = names[0]
        return lambda params: (params[one],)
    return lambda _params: ()


class Store:
    """An open floorgate database. Share one per process; it is safe across threads."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.url = url
        self._native: dict[str, tuple[str, Callable[[dict[str, Any]], tuple[Any, ...]]]] = {}
        self._dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._local = threading.local()
        self._hot: list[PoolProxiedConnection] = []
        self._hot_lock = threading.Lock()
        # Whether a NOT NULL constraint admission relies on is missing (a hand rebuild): then the
        # facts read also looks for the rows such a constraint would have refused. Set at open.
        self.relaxed = False
        # Whether this SQLite store's limit-mark triggers are all there (``_upgrade.limit_marks_intact``):
        # only then does a limited lane's decision reuse its last limit read while the mark holds. Set at open.
        self.marked = False
        self._auto: _Autocommit | None = None
        # Whether opening created this store (the database held no schema): a command that writes
        # says so, since a mistyped --db would otherwise keep a floor where nothing reads it.
        self.created = False
        # SQLite has one writer per file, and a writer that finds it busy sleeps in growing steps
        # (up to 100 ms) before it looks again: in a burst, this process's own writers queue here
        # instead and take the lock the moment it is free. Bounded like the busy timeout, after
        # which a writer goes on to BEGIN IMMEDIATE as before (a re-entrant lock: a nested write
        # on one thread is no new deadlock).
        # Writers in a ``first()`` block (a host's admissions) go before the others waiting.
        self._writers = WriterQueue()

    def bind(self, sql: str, params: dict[str, Any]) -> tuple[str, Any]:
        """``sql`` (``:name`` parameters) and ``params`` as this store's hot cursors take them: the
        database's own numbered text (``?n`` on SQLite, ``$n`` on PostgreSQL), rendered once per
        statement, and the values in its order. psycopg's named form would be parsed again at
        every call once a statement is longer than its cache takes (4 KiB: a limited lane's one
        read is), which costs more than the server's part of a denial; sqlite3's named form makes
        a string of each parameter's name to look it up, at every call."""
        native = self._native.get(sql)
        if native is None:
            names: dict[str, int] = {}
            mark = "?" if self.dialect == "sqlite" else "$"

            def numbered(found: re.Match[str]) -> str:
                return f"{mark}{names.setdefault(found.group(1), len(names) + 1)}"

            text = _NAMED.sub(numbered, sql)
            native = self._native[sql] = (text, _values_in_order(tuple(names)))
        text, values = native
        return text, values(params)

    def _unit_cursor(self, raw: PoolProxiedConnection) -> Any:
        """A cursor on a unit's connection that takes ``bind``'s form (PostgreSQL: psycopg's raw
        cursor; the connection's own cursors stay SQLAlchemy's)."""
        if self.dialect == "postgresql":
            return _raw_cursor_type()(raw.driver_connection)
        return raw.cursor()

    @property
    def autocommit(self) -> DriverTx:
        """The hot path's single statements, each autocommitted (a denial's one read, confirm's
        one update): ``driver(write=False)`` without entering a context per decision."""
        auto = self._auto
        if auto is None or auto.relaxed != self.relaxed or auto.marked != self.marked:
            auto = self._auto = _Autocommit(self)
        return auto

    def _one(self, sql: str, params: dict[str, Any], *, fetch: bool) -> tuple[Any, ...] | int | None:
        raw = self._hot_connection()
        try:
            # One cursor per hot connection, kept: each statement reuses it rather than opening and
            # closing one (a single-row read is reset once fetched, so the cursor holds no snapshot).
            held = getattr(self._local, "cursor", None)
            if held is None or held[0] is not raw:
                held = self._local.cursor = (raw, raw.cursor())
            cursor = held[1]
            cursor.execute(*self.bind(sql, params))
            result: tuple[Any, ...] | int | None = cursor.fetchone() if fetch else cursor.rowcount
        except self._dbapi_error as exc:
            self._drop_hot_connection()
            raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc
        return result

    def locked(self, keys: tuple[str, ...]) -> _Locked:
        """PostgreSQL: where a statement runs after the advisory locks on ``keys`` (taken in this
        order), in one transaction with them: the locks and the statement are sent as one pipeline
        (one wait, no BEGIN or COMMIT message: the pipeline's implicit transaction), so the
        statement's snapshot is taken once the locks are held. Its ``row`` commits durably when it
        returns, and rolls back on any database error (``StoreUnavailable``)."""
        return _Locked(self, keys)

    def _locked_row(self, keys: tuple[str, ...], sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        raw = self._hot_connection()
        driver: Any = raw.driver_connection  # a psycopg connection (``_hot_connection``)
        try:
            with driver.pipeline():
                locks = raw.cursor()
                for key in keys:
                    locks.execute(*self.bind(LOCK_SQL, {"k": lock_id(key)}))
                cursor = raw.cursor()
                cursor.execute(*self.bind(sql, params))
            # Fetched once the block has sent its Sync and read every result: a fetch inside it
            # would first send a Flush and wait for the rows, a second wait (about 100 us here).
            row: tuple[Any, ...] | None = cursor.fetchone()
        except self._dbapi_error as exc:
            self._drop_hot_connection()
            raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc
        return row

    def _hot_connection(self) -> PoolProxiedConnection:
        """This thread's dedicated DBAPI connection, in autocommit mode (transactions are explicit)."""
        raw: PoolProxiedConnection | None = getattr(self._local, "raw", None)
        if raw is None:
            try:
                # The pool raises the driver's own error when connecting fails (it is not wrapped).
                raw = self.engine.raw_connection()
            except (SQLAlchemyError, self._dbapi_error) as exc:
                raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc
            if self.dialect == "postgresql":
                try:
                    driver: Any = raw.driver_connection  # a psycopg connection
                    driver.autocommit = True
                    driver.cursor_factory = _raw_cursor_type()  # ``bind``'s form; this connection is only ever the hot path's
                except BaseException as exc:
                    raw.invalidate()  # half set up: never back to the pool in the hot path's session
                    if not isinstance(exc, Exception):
                        raise
                    raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc
            self._local.raw = raw
            with self._hot_lock:
                self._hot.append(raw)
        return raw

    def _drop_hot_connection(self) -> None:
        raw = getattr(self._local, "raw", None)
        self._local.raw = None
        self._local.cursor = None
        if raw is not None:
            with self._hot_lock:
                if raw in self._hot:
                    self._hot.remove(raw)
            with contextlib.suppress(Exception):  # pragma: no cover - already broken
                raw.invalidate()

    @contextmanager
    def driver(self, *, write: bool, lock_key: str | None = None, unit: UnitOfWork | None = None) -> Iterator[DriverTx]:
        """A DBAPI cursor for the admission hot path, where SQLAlchemy's per-statement cost would
        dominate a decision (the benchmarks compare against bare driver loops).

        ``write=False``: autocommit, so each statement is its own consistent read and a denial
        opens no transaction and writes nothing. ``write=True``: one transaction serialized like
        ``write()`` (BEGIN IMMEDIATE on SQLite, an advisory lock on ``lock_key`` on PostgreSQL),
        committed durably on success and rolled back on any error.

        ``unit``: run on the DBAPI connection of the caller's unit of work instead (its lock taken
        there, once; the unit commits), so hot-path statements join it.
        """
        if unit is not None:
            yield from self._joined_driver(unit, lock_key)
            return
        raw = self._hot_connection()
        cursor = None
        queued = write and self.dialect == "sqlite" and self._writers.acquire(BUSY_TIMEOUT_MS / 1000)
        try:
            cursor = raw.cursor()
            if write:
                if self.dialect == "postgresql":
                    # No parameters: one simple-protocol round trip for both statements.
                    lock = f"; SELECT pg_advisory_xact_lock({lock_id(lock_key)})" if lock_key is not None else ""
                    cursor.execute("BEGIN" + lock)
                else:
                    cursor.execute("BEGIN IMMEDIATE")
            yield DriverTx(self, cursor)
            if write:
                cursor.execute("COMMIT")
        except BaseException as exc:
            try:
                if write and cursor is not None:
                    cursor.execute("ROLLBACK")
            except Exception:
                self._drop_hot_connection()
            if isinstance(exc, self._dbapi_error):
                self._drop_hot_connection()
                raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc
            raise
        finally:
            if cursor is not None:
                with contextlib.suppress(Exception):  # pragma: no cover - the connection is gone
                    cursor.close()
            if queued:
                self._writers.release()

    def _joined_driver(self, unit: UnitOfWork, lock_key: str | None) -> Iterator[DriverTx]:
        with self._translate():
            unit.lock(lock_key)
        cursor = self._unit_cursor(unit.joined(write=True).connection)
        try:
            yield DriverTx(self, cursor)
        except self._dbapi_error as exc:
            raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc
        finally:
            with contextlib.suppress(Exception):  # pragma: no cover - the connection is gone
                cursor.close()

    def _lock(self, conn: Connection, lock_key: str | None) -> None:
        if self.dialect == "postgresql" and lock_key is not None:
            # Transaction-scoped and re-entrant: taking a key the transaction holds is free.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": lock_id(lock_key)})

    @property
    def safe_url(self) -> str:
        return redact_url(self.url)

    @contextmanager
    def read(self, *, unit: UnitOfWork | None = None) -> Iterator[Connection]:
        """A read-only transaction; it never commits anything. ``unit``: read in the caller's unit
        of work (seeing its uncommitted writes)."""
        if unit is not None:
            with self._translate():
                yield unit.joined(write=False)
            return
        with self._translate(), self.engine.connect() as conn:
            try:
                yield conn
            finally:
                conn.rollback()

    @contextmanager
    def write(self, lock_key: str | None = None, *, unit: UnitOfWork | None = None) -> Iterator[Connection]:
        """A write transaction serialized in the database, committed durably on success.

        SQLite takes its write lock at BEGIN IMMEDIATE (one writer per file); PostgreSQL takes a
        transaction-scoped advisory lock on ``lock_key``, so writers to different keys run in parallel.

        ``unit``: join the caller's unit of work instead (the lock is taken in it unless it holds
        it already, and nothing commits here). On SQLite a unit must not wait on another
        connection's write while it is open: it holds the file's write lock until it ends.
        """
        if unit is not None:
            with self._translate():
                unit.lock(lock_key)
                yield unit.joined(write=True)
            return
        with self._translate(), self.engine.connect() as conn, self._queued():
            if self.dialect == "sqlite":
                conn = conn.execution_options(fg_immediate=True)
            with conn.begin():
                self._lock(conn, lock_key)
                yield conn

    @contextmanager
    def _queued(self) -> Iterator[None]:
        """Hold this process's SQLite writer queue (see ``_writers``) for one write transaction."""
        queued = self.dialect == "sqlite" and self._writers.acquire(BUSY_TIMEOUT_MS / 1000)
        try:
            yield
        finally:
            if queued:
                self._writers.release()

    @contextmanager
    def first(self) -> Iterator[None]:
        """This thread's write transactions in the block go before this process's other writers
        waiting for SQLite's write lock (a host's admissions before its turns' bookkeeping)."""
        with self._writers.first():
            yield

    @contextmanager
    def unit(self, *, write: bool = True) -> Iterator[UnitOfWork]:
        """A unit of work (``admission.unit``): one write transaction that repositories join with
        ``unit=`` (each key locked in it once), committed once when the block ends, rolled back on
        any error; its after-commit callbacks run once the commit returned. ``write=False``: one
        read transaction (nothing commits, a write joining it is refused)."""
        opened = self.write(lock_key=None) if write else self.read()
        unit: UnitOfWork | None = None
        try:
            with opened as conn:
                unit = UnitOfWork(conn, write=write, ordered_locks=self.dialect == "postgresql", take=self._lock)
                yield unit
        except BaseException:
            if unit is not None:
                unit.end(committed=False)  # rolled back, or its commit failed: no callback runs
            raise
        if unit is not None:
            unit.end(committed=write)

    @contextmanager
    def _translate(self) -> Iterator[None]:
        try:
            yield
        except FloorgateError:
            raise
        except SQLAlchemyError as exc:
            raise StoreUnavailable(f"store {self.safe_url} failed: {first_line(exc)}") from exc

    def close(self) -> None:
        with self._hot_lock:
            hot, self._hot = self._hot, []
        for raw in hot:
            with contextlib.suppress(Exception):  # pragma: no cover - closing a broken connection
                raw.invalidate()  # never back to the pool: its session is the hot path's (autocommit, raw cursors)
        self._local = threading.local()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_store(url: str | None = None, *, create: bool = True, initialize: bool = False, lock_timeout_ms: int | None = None) -> Store:
    """Open (creating and migrating if needed) the store at ``url``; see ``resolve_url``.
    ``create=False`` (what read commands use) refuses with ``NoStore`` where no store exists.

    An existing empty SQLite file (a failed copy or restore) is refused with ``StoreUnavailable``,
    never migrated into a fresh store that has forgotten every floor and start, unless the owner
    asks for that with ``initialize=True`` (``floorgate init``). A new path is still created.

    ``lock_timeout_ms`` (PostgreSQL; default ``LOCK_TIMEOUT_MS``): how long a statement waits for
    a lock before failing, so a stalled lock holder yields a prompt ``state_unavailable`` denial."""
    resolved = resolve_url(url)
    if not create:
        require_existing(resolved)
    try:
        parsed = make_url(resolved)
    except ArgumentError:
        raise InvalidInput("db", f"{redact_url(str(url))!r} is not a database URL; use a file path or postgresql://host/db") from None
    backend = parsed.get_backend_name()
    new_file: Path | None = None
    if backend == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:"):
            raise InvalidInput("db", "an in-memory SQLite database cannot hold durable admission; give a file path")
        path = Path(database).expanduser().resolve()
        if not path.parent.is_dir():
            raise InvalidInput("db", f"directory {path.parent} does not exist; create it or choose another path")
        if path.is_dir():
            raise InvalidInput("db", f"{path} is a directory, not a store file: give --db a file path such as {path / 'floorgate.db'}")
        if foreign_file(path):
            raise InvalidInput(
                "db", f"{path} is not a SQLite database (nor a floorgate store): point --db at your store, or at a new path to create one"
            )
        if not initialize and empty_file(path):
            raise StoreUnavailable(
                f"{path} is an empty file, not a floorgate store (a failed copy or restore?): restore it from a backup, "
                f"or run 'floorgate init --db {path}' to start an empty store there (no floor or start survives)"
            )
        new_file = None if path.exists() else path
        # The URL handed on (to a managed turn's hooks, a crontab line) must name this file from
        # any working directory, so a relative path is made absolute here, once.
        resolved = parsed.set(database=str(path)).render_as_string(hide_password=False)
        engine = sqlite_engine(resolved)
    elif backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            raise InvalidInput("db", "use the psycopg 3 driver: postgresql+psycopg://user@host/db")
        engine = pg_engine(resolved, LOCK_TIMEOUT_MS if lock_timeout_ms is None else lock_timeout_ms)
    else:
        raise InvalidInput("db", f"backend {backend!r} is not supported; use a SQLite file path or postgresql://")
    store = Store(engine, resolved)
    try:
        with store._translate():
            store.created = migrate(store, create=create)
            store.relaxed = constraints_relaxed(store)
            store.marked = limit_marks_intact(store)
    except BaseException:
        engine.dispose()
        raise
    if new_file is not None:
        # A store this call created is owner-only (0600), with its -wal and -shm files: it holds
        # every floor, start and turn (an empty file is refused above, so it is not made first).
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.chmod(f"{new_file}{suffix}", 0o600)
    return store
