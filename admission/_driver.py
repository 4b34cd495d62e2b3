"""Plain DBAPI access for the admission hot path: the driver transaction (``DriverTx``), the
advisory-lock ids it takes, this process's SQLite writer queue, and the one-line text a database
error is reported with. ``Store`` (admission/store.py) hands these out; nothing here opens one.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


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


class Rendering(Protocol):
    """What a ``DriverTx`` needs of its store: the dialect, whether constraints are relaxed or
    limits marked, its URL, and
    ``bind`` (a ``:name`` statement and its parameters as the driver's cursor takes them)."""

    dialect: str
    relaxed: bool
    marked: bool  # a SQLite store whose limit-mark triggers are intact (``_upgrade.limit_marks_intact``)
    url: str

    def bind(self, sql: str, params: dict[str, Any]) -> tuple[str, Any]: ...


class DriverTx:
    """Plain DBAPI access for the admission hot path (see ``Store.driver``).

    SQL is written with ``:name`` parameters and rendered once per dialect (``Rendering.bind``).
    """

    def __init__(self, store: Rendering, cursor: Any) -> None:
        self._store = store
        self._cursor = cursor
        self.dialect = store.dialect
        self.relaxed = store.relaxed
        self.marked = store.marked
        self.url = store.url  # whose rows a kept limit read came from

    def row(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        self._cursor.execute(*self._store.bind(sql, params))
        row: tuple[Any, ...] | None = self._cursor.fetchone()
        return row

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        self._cursor.execute(*self._store.bind(sql, params))
        count: int = self._cursor.rowcount
        return count

    def rows(self, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        """Every row of one statement (a bulk read)."""
        self._cursor.execute(*self._store.bind(sql, params))
        return list(self._cursor.fetchall())


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


def first_line(exc: BaseException) -> str:
    """A database error in one line: its driver's class, the first line of its text, and what
    access is missing when that is why it failed."""
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
