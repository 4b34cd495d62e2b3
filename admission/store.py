"""The durable store: one SQLite file by default, PostgreSQL for several hosts.

``open_store(url)`` creates the engine, applies Alembic migrations under a lock, and refuses a
database whose schema revision this version does not know (written by a newer floorgate).
Services do their reads in ``Store.read()`` and their writes in ``Store.write(lock_key)``;
database errors are translated to ``StoreUnavailable`` here and nowhere else.

Units of work: ``Store.unit()`` opens one transaction (``admission.unit.UnitOfWork``) that
repositories join with ``unit=``: each does its reads and writes in it instead of its own, its lock
taken there once, so several repositories' changes commit once, together, or not at all.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import PoolProxiedConnection

from .errors import FloorgateError, InvalidInput, NoStore, SchemaTooNew, StoreUnavailable
from .unit import UnitOfWork

DEFAULT_URL = "sqlite:///floorgate.db"
ENV_URL = "FLOORGATE_DB"
_MIGRATIONS = Path(__file__).with_name("_migrations")
_VERSION_TABLE = "fg_alembic_version"
_MIGRATION_LOCK = 0x666C6F6F72  # "floor": the advisory lock id that serializes schema upgrades
_BUSY_TIMEOUT_MS = 30_000
# PostgreSQL: how long a statement may wait for a lock (an advisory or row lock held by a stalled
# transaction), and run at all, before it fails and admission denies state_unavailable. Admission
# holds its locks for milliseconds; waiting longer would outlast an agent CLI's hook timeout.
LOCK_TIMEOUT_MS = 5_000
_STATEMENT_TIMEOUT_MS = 30_000
# Each thread keeps one connection for the admission hot path and may borrow one more for other
# work; a host runs up to a few dozen threads, so the pool must hold both without waiting.
_POOL = {"pool_size": 16, "max_overflow": 48}


def resolve_url(url: str | None) -> str:
    """The database URL: the argument, else ``$FLOORGATE_DB``, else ``./floorgate.db``.

    A bare path means a SQLite file; ``postgresql://`` selects the psycopg 3 driver.
    """
    if url is None or url == "":
        url = os.environ.get(ENV_URL) or DEFAULT_URL
    if "://" not in url:
        # A plain path is a path: '%41' or '?' in it are characters of the name, not URL syntax.
        return URL.create("sqlite", database=url).render_as_string(hide_password=False)
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


_URL_PASSWORD = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*://[^:/@?#]*):(.*)@")
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redact_url(url: str) -> str:
    """``url`` fit to print: a password in it (``user:pw@``, or ``?password=``) becomes ``***``.
    Works on text that is not a valid URL too (an error may quote what the user typed)."""
    return _QUERY_PASSWORD.sub(r"\1***", _URL_PASSWORD.sub(r"\1:***@", url))


def absolute_url(url: str | None) -> str:
    """``resolve_url``, with a SQLite path made absolute against the working directory: the form
    to hand to another process (a hook, a crontab line) that may run anywhere."""
    resolved = resolve_url(url)
    try:
        parsed = make_url(resolved)
    except ArgumentError:
        raise InvalidInput("db", f"{redact_url(str(url))!r} is not a database URL; use a file path or postgresql://host/db") from None
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser().resolve()
        return parsed.set(database=str(path)).render_as_string(hide_password=False)
    return resolved


def lock_id(key: str) -> int:
    """A signed 64-bit advisory-lock id for ``key`` (collisions only over-serialize)."""
    found = _LOCK_IDS.get(key)
    if found is None:
        found = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big", signed=True)
        if len(_LOCK_IDS) >= _LOCK_IDS_KEPT:
            _LOCK_IDS.clear()
        _LOCK_IDS[key] = found
    return found


# Every PostgreSQL decision hashes its agent's key: most meet a key hashed before.
_LOCK_IDS: dict[str, int] = {}
_LOCK_IDS_KEPT = 65_536


_NAMED = re.compile(r"(?<![:\w]):(\w+)")


class DriverTx:
    """Plain DBAPI access for the admission hot path (see ``Store.driver``).

    SQL is written with ``:name`` parameters and rendered once per dialect.
    """

    def __init__(self, store: Store, cursor: Any) -> None:
        self._store = store
        self._cursor = cursor
        self.dialect = store.dialect
        self.relaxed = store.relaxed

    def row(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        self._cursor.execute(self._store.render(sql), params)
        row: tuple[Any, ...] | None = self._cursor.fetchone()
        return row

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        self._cursor.execute(self._store.render(sql), params)
        count: int = self._cursor.rowcount
        return count

    def rows(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Every row of one statement (a bulk read)."""
        self._cursor.execute(self._store.render(sql), params)
        return list(self._cursor.fetchall())


class _Autocommit(DriverTx):
    """``DriverTx`` for single autocommitted statements (``Store.autocommit``): each call runs one
    statement on this thread's hot connection, its own transaction, with no context to enter."""

    def __init__(self, store: Store) -> None:  # no cursor of its own: the store keeps one per hot connection
        self._store = store
        self.dialect = store.dialect
        self.relaxed = store.relaxed

    def row(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        return self._store._one(sql, params, fetch=True)  # type: ignore[return-value]

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        return self._store._one(sql, params, fetch=False)  # type: ignore[return-value]


class WriterQueue:
    """This process's SQLite writers, one at a time (re-entrant on a thread); a thread inside
    ``first()`` takes it before any other thread waiting without that mark."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._owner: int | None = None
        self._depth = 0
        self._urgent = 0  # marked threads waiting
        self._marked = threading.local()

    @contextmanager
    def first(self) -> Iterator[None]:
        self._marked.on = getattr(self._marked, "on", 0) + 1
        try:
            yield
        finally:
            self._marked.on -= 1

    def acquire(self, timeout: float) -> bool:
        """Take it within ``timeout`` seconds; False when that passed (the caller goes on unqueued)."""
        me = threading.get_ident()
        urgent = getattr(self._marked, "on", 0) > 0
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._owner == me:
                self._depth += 1
                return True
            self._urgent += urgent
            try:
                while self._owner is not None or (not urgent and self._urgent):
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    self._cond.wait(left)
                self._owner, self._depth = me, 1
                return True
            finally:
                self._urgent -= urgent

    def release(self) -> None:
        with self._cond:
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                self._cond.notify_all()


class Store:
    """An open floorgate database. Share one per process; it is safe across threads."""

    def __init__(self, engine: Engine, url: str) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.url = url
        self._rendered: dict[str, str] = {}
        self._dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
        self._local = threading.local()
        self._hot: list[PoolProxiedConnection] = []
        self._hot_lock = threading.Lock()
        # Whether a NOT NULL constraint admission relies on is missing (a hand rebuild): then the
        # facts read also looks for the rows such a constraint would have refused. Set at open.
        self.relaxed = False
        self._auto: _Autocommit | None = None
        # SQLite has one writer per file, and a writer that finds it busy sleeps in growing steps
        # (up to 100 ms) before it looks again: in a burst, this process's own writers queue here
        # instead and take the lock the moment it is free. Bounded like the busy timeout, after
        # which a writer goes on to BEGIN IMMEDIATE as before (a re-entrant lock: a nested write
        # on one thread is no new deadlock).
        # Writers in a ``first()`` block (a host's admissions) go before the others waiting.
        self._writers = WriterQueue()

    def render(self, sql: str) -> str:
        """``sql`` with ``:name`` parameters in this driver's paramstyle (cached)."""
        done = self._rendered.get(sql)
        if done is None:
            done = sql if self.dialect == "sqlite" else _NAMED.sub(r"%(\1)s", sql)
            self._rendered[sql] = done
        return done

    @property
    def autocommit(self) -> DriverTx:
        """The hot path's single statements, each autocommitted (a denial's one read, confirm's
        one update): ``driver(write=False)`` without entering a context per decision."""
        auto = self._auto
        if auto is None or auto.relaxed != self.relaxed:
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
            cursor.execute(self.render(sql), params)
            result: tuple[Any, ...] | int | None = cursor.fetchone() if fetch else cursor.rowcount
        except self._dbapi_error as exc:
            self._drop_hot_connection()
            raise StoreUnavailable(f"store {self.safe_url} failed: {_first_line(exc)}") from exc
        return result

    def _hot_connection(self) -> PoolProxiedConnection:
        """This thread's dedicated DBAPI connection, in autocommit mode (transactions are explicit)."""
        raw: PoolProxiedConnection | None = getattr(self._local, "raw", None)
        if raw is None:
            try:
                # The pool raises the driver's own error when connecting fails (it is not wrapped).
                raw = self.engine.raw_connection()
                if self.dialect == "postgresql":
                    driver: Any = raw.driver_connection  # a psycopg connection
                    driver.autocommit = True
            except (SQLAlchemyError, self._dbapi_error) as exc:
                raise StoreUnavailable(f"store {self.safe_url} failed: {_first_line(exc)}") from exc
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
        queued = write and self.dialect == "sqlite" and self._writers.acquire(_BUSY_TIMEOUT_MS / 1000)
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
                raise StoreUnavailable(f"store {self.safe_url} failed: {_first_line(exc)}") from exc
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
        cursor = unit.joined(write=True).connection.cursor()
        try:
            yield DriverTx(self, cursor)
        except self._dbapi_error as exc:
            raise StoreUnavailable(f"store {self.safe_url} failed: {_first_line(exc)}") from exc
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
        queued = self.dialect == "sqlite" and self._writers.acquire(_BUSY_TIMEOUT_MS / 1000)
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
            raise StoreUnavailable(f"store {self.safe_url} failed: {_first_line(exc)}") from exc

    def close(self) -> None:
        with self._hot_lock:
            hot, self._hot = self._hot, []
        for raw in hot:
            with contextlib.suppress(Exception):  # pragma: no cover - closing a broken connection
                raw.close()
        self._local = threading.local()
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _first_line(exc: BaseException) -> str:
    orig = getattr(exc, "orig", None) or exc
    lines = str(orig).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{type(orig).__name__}: {first}{_access_hint(type(orig).__name__, first)}"


def _access_hint(kind: str, message: str) -> str:
    """What access a write lacks, when the database says it was refused for want of it."""
    if kind == "InsufficientPrivilege":
        return " (this command writes: the store's PostgreSQL user needs SELECT, INSERT, UPDATE and DELETE on the fg_* tables)"
    if kind in ("LockNotAvailable", "QueryCanceled"):
        return " (another transaction held a lock this needs for too long: denied rather than waiting; see pg_stat_activity)"
    if "readonly database" in message or "read-only" in message:
        return " (this command writes: it needs write access to the SQLite file and its directory)"
    return ""


def _sqlite_engine(url: str) -> Engine:
    engine = create_engine(url, connect_args={"timeout": _BUSY_TIMEOUT_MS / 1000}, **_POOL)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        # Take transaction control from the sqlite3 module so BEGIN IMMEDIATE is ours to emit.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
        cur.execute("PRAGMA journal_mode=WAL")
        # FULL: a commit is on disk when it returns, so an admitted start survives a crash.
        cur.execute("PRAGMA synchronous=FULL")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("fg_immediate") else "BEGIN")

    return engine


def _pg_engine(url: str, lock_timeout_ms: int) -> Engine:
    engine = create_engine(url, pool_pre_ping=False, **_POOL)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record) -> None:  # type: ignore[no-untyped-def]
        autocommit = dbapi_conn.autocommit
        dbapi_conn.autocommit = True  # a SET outside any transaction lasts for the session
        dbapi_conn.execute(f"SET lock_timeout = {int(lock_timeout_ms)}; SET statement_timeout = {_STATEMENT_TIMEOUT_MS}")
        dbapi_conn.autocommit = autocommit

    return engine


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
        _require_existing(resolved)
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
        if _foreign_file(path):
            raise InvalidInput(
                "db", f"{path} is not a SQLite database (nor a floorgate store): point --db at your store, or at a new path to create one"
            )
        if not initialize and _empty_file(path):
            raise StoreUnavailable(
                f"{path} is an empty file, not a floorgate store (a failed copy or restore?): restore it from a backup, "
                f"or run 'floorgate init --db {path}' to start an empty store there (no floor or start survives)"
            )
        new_file = None if path.exists() else path
        # The URL handed on (to a managed turn's hooks, a crontab line) must name this file from
        # any working directory, so a relative path is made absolute here, once.
        resolved = parsed.set(database=str(path)).render_as_string(hide_password=False)
        engine = _sqlite_engine(resolved)
    elif backend == "postgresql":
        if parsed.get_driver_name() != "psycopg":
            raise InvalidInput("db", "use the psycopg 3 driver: postgresql+psycopg://user@host/db")
        engine = _pg_engine(resolved, LOCK_TIMEOUT_MS if lock_timeout_ms is None else lock_timeout_ms)
    else:
        raise InvalidInput("db", f"backend {backend!r} is not supported; use a SQLite file path or postgresql://")
    store = Store(engine, resolved)
    try:
        with store._translate():
            _migrate(store, create=create)
            store.relaxed = _constraints_relaxed(store)
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


_SQLITE_HEADER = b"SQLite format 3\x00"


def _foreign_file(path: Path) -> bool:
    """A non-empty file that does not begin with SQLite's header (a text file, a typo'd path):
    connecting would fail with 'file is not a database', or worse, be taken for a new store."""
    try:
        with open(path, "rb") as f:
            head = f.read(len(_SQLITE_HEADER))
    except OSError:
        return False  # absent or unreadable: connecting names the problem
    return bool(head) and head != _SQLITE_HEADER


def _empty_file(path: Path) -> bool:
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


def _no_store(where: str) -> NoStore:
    return NoStore(
        f"no floorgate store at {where}: point at yours with --db URL or $FLOORGATE_DB, "
        f"or create it with 'floorgate init --db {where}' (a read or a host never creates one)"
    )


def _require_existing(resolved: str) -> None:
    """Refuse a SQLite path where no file exists (connecting would create one)."""
    try:
        parsed = make_url(resolved)
    except ArgumentError:
        return  # open_store names the bad URL
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser().resolve()
        if not path.exists():
            raise _no_store(str(path))


_REVISION_LINE = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(?:\"([^\"]*)\"|'([^']*)'|None)", re.MULTILINE)


def head_revision(folder: Path = _MIGRATIONS) -> str | None:
    """The schema head as Alembic would name it, read from the migration files' ``revision`` and
    ``down_revision`` lines without importing Alembic (a store at the head never needs it).
    None when the files do not name exactly one head: the caller then asks Alembic."""
    revisions: set[str] = set()
    parents: set[str] = set()
    try:
        files = [f for f in folder.iterdir() if f.suffix == ".py" and not f.name.startswith("_")]
        for f in files:
            found = {m.group(1): m.group(2) or m.group(3) for m in _REVISION_LINE.finditer(f.read_text(encoding="utf-8"))}
            if "revision" not in found or found["revision"] is None:
                return None
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(str(found["down_revision"]))
    except (OSError, UnicodeDecodeError):
        return None
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _at_head(store: Store) -> bool:
    """Whether the store's recorded revision is the head, read with one plain SELECT (no Alembic),
    and on PostgreSQL whether its decision functions are this floorgate's rendering (by hash).
    False whenever that cannot be told (no version table yet, a fresh file): Alembic decides."""
    head = head_revision()
    if head is None:
        return False
    pg = store.dialect == "postgresql"
    # On PostgreSQL the installed hash rides on the same SELECT: every hook and command opens a
    # store, and a second query would be a second round trip at each start.
    columns = "version_num"
    if pg:
        from .decide import render  # the decision's modules import this one

        columns += f", ({render.INSTALLED_SQL})"
    try:
        with store.read() as conn:
            rows = conn.execute(text(f"SELECT {columns} FROM {_VERSION_TABLE}")).fetchall()
            if [r[0] for r in rows] != [head]:
                return False
            return not pg or rows[0][1] == render.functions_hash()
    except (SQLAlchemyError, FloorgateError):
        return False  # Alembic's own read names the problem


def _migrate(store: Store, *, create: bool = True) -> None:
    if _at_head(store):
        return
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from .decide import render  # the decision's modules import this one

    script = ScriptDirectory(str(_MIGRATIONS), version_locations=[str(_MIGRATIONS)])
    head = script.get_current_head()

    def current(conn: Connection) -> str | None:
        ctx = MigrationContext.configure(conn, opts={"version_table": _VERSION_TABLE})
        rev = ctx.get_current_revision()
        if rev is not None:
            try:
                known = script.get_revision(rev)
            except Exception:
                known = None
            if known is None:
                raise SchemaTooNew(
                    f"store {store.safe_url} has schema revision {rev!r}, newer than this floorgate "
                    f"(it knows up to {head!r}); upgrade floorgate. Nothing was written."
                )
        return rev

    pg = store.dialect == "postgresql"
    with store.read() as conn:
        found = current(conn)
        # PostgreSQL's decision functions are installed after the migrations whenever their
        # rendered text changed (decide.render): a repeatable step, keyed by the text's hash.
        if found == head and (not pg or render.installed_hash(conn) == render.functions_hash()):
            return
        if found is None and not create:
            raise _no_store(store.safe_url)
    with store.write(lock_key=None) as conn:
        if store.dialect == "postgresql":
            # Another host may be migrating, and DDL on a large table takes its time: wait for both.
            conn.execute(text("SET LOCAL lock_timeout = 0"))
            conn.execute(text("SET LOCAL statement_timeout = 0"))
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        rev = current(conn)
        if rev == head:
            if pg:
                render.install(conn)
            return
        cfg = Config()
        cfg.set_main_option("script_location", str(_MIGRATIONS))

        def upgrade(_rev, _context):  # type: ignore[no-untyped-def]
            return script._upgrade_revs(head, rev)  # type: ignore[arg-type]  # rev None: a fresh database

        with EnvironmentContext(cfg, script, fn=upgrade, destination_rev=head) as env:
            env.configure(connection=conn, version_table=_VERSION_TABLE, transactional_ddl=True)
            env.run_migrations()
        if pg:
            render.install(conn)


# The columns admission's facts read that the schema declares NOT NULL.
_REQUIRED = {
    "fg_starts": ("turn_id", "goal_id", "agent_id", "automation_id", "trigger_us", "anchor_us"),
    "fg_rules": ("goal_id", "agent_id", "automation_id", "min_interval_us", "revision"),
}


def _constraints_relaxed(store: Store) -> bool:
    """Whether any column in ``_REQUIRED`` accepts NULL in this database (a table rebuilt by hand
    without its constraints); read once at open, in one query over every table, so a rebuild
    takes effect when the store reopens."""
    with store.read() as conn:
        if store.dialect == "sqlite":
            # One statement over the tables (names from _REQUIRED, not input); a SQLite key may
            # hold NULL without "notnull", so only the flag counts.
            sql = " UNION ALL ".join(
                f"SELECT '{table}', name FROM pragma_table_info('{table}') WHERE \"notnull\" = 0" for table in _REQUIRED
            )
            rows = conn.exec_driver_sql(sql).fetchall()
        else:
            rows = conn.execute(
                text(
                    "SELECT table_name, column_name FROM information_schema.columns WHERE table_name = ANY(:t) "
                    "AND table_schema = current_schema() AND is_nullable = 'YES'"
                ),
                {"t": list(_REQUIRED)},
            ).fetchall()
    nullable = {(r[0], r[1]) for r in rows}
    return any((table, column) in nullable for table, columns in _REQUIRED.items() for column in columns)
