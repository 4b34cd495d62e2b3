"""A unit of work: one transaction of a use case that several repositories join.

``Store.unit()`` opens one; repository and service methods take ``unit=`` and do their reads and
writes in it instead of in a transaction of their own, so a use case's changes commit once,
together, or not at all. What a bare connection cannot carry, the unit does:

- **The locks it holds.** A repository joining the unit asks for its key (``lock``); a key the unit
  holds already is not taken again (one advisory-lock statement per key and unit on PostgreSQL).
  A savepoint rolled back releases the keys taken inside it (PostgreSQL does), and the unit forgets
  them with it.
- **A fixed order for admission's locks.** The keys that serialize admission (a goal's, then each
  agent's: ``_locks.goal`` / ``_locks.agent``) are taken in one order within a unit: every goal key
  before any agent key, and keys of one kind in ascending order. A key that would break that order
  is refused (``LockOrderRefused``, nothing taken) rather than waited for, since two units waiting
  on each other's keys in opposite orders would deadlock. This holds where keys are real locks
  (PostgreSQL); on SQLite the unit holds the file's single write lock from its first statement, so
  no order can deadlock and none is refused.
- **What runs after the commit.** ``after_commit(fn)`` runs ``fn`` once the unit's commit returned
  (the change is durable), in the order registered, outside the transaction and its locks: waking a
  host, delivering a notification. Nothing registered runs when the unit rolls back, nor what was
  registered inside a savepoint that rolled back.

A unit opened with ``write=False`` is one read transaction: it never commits, and a write joining
it is refused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Connection, NestedTransaction

from .errors import FloorgateError

# The admission keys' order within a unit: by kind (goal keys before agent keys), then by key.
_ORDERED_KINDS = ("goal/", "agent/")


class LockOrderRefused(FloorgateError):
    """A unit asked for an admission lock out of the fixed order (see ``admission.unit``): a bug in
    the caller, refused before waiting so that it cannot deadlock. Nothing was locked."""


class UnitClosed(FloorgateError):
    """A unit of work was used after it ended, or written through while it is read-only."""


def _rank(key: str) -> tuple[int, str] | None:
    for i, prefix in enumerate(_ORDERED_KINDS):
        if key.startswith(prefix):
            return (i, key)
    return None


class Savepoint:
    """A savepoint inside a unit (``UnitOfWork.begin_nested``): ``commit()`` keeps what was done in
    it; ``rollback()`` undoes it, with the locks taken and the callbacks registered inside it."""

    def __init__(self, unit: UnitOfWork, nested: NestedTransaction) -> None:
        self._unit = unit
        self._nested = nested
        self._held = set(unit._held)
        self._callbacks = len(unit._callbacks)

    def commit(self) -> None:
        """Release the savepoint: its work stays part of the unit."""
        self._nested.commit()

    def rollback(self) -> None:
        """Roll back to the savepoint: its writes, its locks and its after-commit callbacks go."""
        self._nested.rollback()
        self._unit._held = self._held
        del self._unit._callbacks[self._callbacks :]


class UnitOfWork:
    """One open transaction of a use case (see the module docstring); made by ``Store.unit()``.

    ``connection`` is the transaction's SQLAlchemy connection, for a repository's own statements.
    ``ordered_locks``: whether lock keys are real per-key locks here (PostgreSQL), so that
    admission's lock order is enforced. ``take`` runs the statement that takes one key's lock.
    """

    def __init__(self, connection: Connection, *, write: bool, ordered_locks: bool, take: Callable[[Connection, str], None]) -> None:
        self.connection = connection
        self.write = write
        self._ordered = ordered_locks
        self._take = take
        self._held: set[str] = set()
        self._callbacks: list[Callable[[], None]] = []
        self._open = True

    @property
    def held(self) -> frozenset[str]:
        """The lock keys this unit holds."""
        return frozenset(self._held)

    def joined(self, *, write: bool) -> Connection:
        """The connection for a repository joining the unit (``write``: it will write)."""
        if not self._open:
            raise UnitClosed("this unit of work has ended: open a new one with Store.unit()")
        if write and not self.write:
            raise UnitClosed("this unit of work is read-only: open it with Store.unit() to write in it")
        return self.connection

    def lock(self, key: str | None) -> None:
        """Hold ``key``'s lock in this unit: taken once (a key held already costs nothing), in
        admission's fixed order (``LockOrderRefused`` out of it). None: no key to lock."""
        if key is None or key in self._held:
            return
        self.joined(write=True)
        self.check_order(key)
        self._take(self.connection, key)
        self._held.add(key)

    def record_lock(self, key: str) -> None:
        """Note that a statement of the caller's (a server function) took ``key``'s lock in this
        unit, so that no repository takes it again."""
        self.check_order(key)
        self._held.add(key)

    def created(self, key: str) -> None:
        """Note that this unit inserted the row ``key`` guards, under a new id: no other transaction
        sees that row before this unit commits, so none can write it meanwhile and the unit writes it
        again without taking ``key``'s lock (one lock statement fewer). Not for admission's keys."""
        if _rank(key) is not None:
            raise ValueError(f"{key!r} orders admission: take it with lock()")
        self._held.add(key)

    def in_order(self, key: str) -> bool:
        """Whether taking ``key`` now keeps admission's lock order (``check_order`` would not refuse)."""
        try:
            self.check_order(key)
        except LockOrderRefused:
            return False
        return True

    def check_order(self, key: str) -> None:
        """``LockOrderRefused`` if taking ``key`` now would break admission's lock order (for a
        caller whose own statement takes it: checked before it is sent)."""
        rank = _rank(key)
        if not self._ordered or rank is None:
            return
        after = sorted(h for h in self._held if (r := _rank(h)) is not None and r > rank)
        if after:
            raise LockOrderRefused(
                f"lock {key!r} asked for after {after[0]!r} in one unit of work: admission's locks are taken "
                "goal before agent, each kind in ascending key order (nothing was locked)"
            )

    def after_commit(self, callback: Callable[[], None]) -> None:
        """Run ``callback`` once this unit has committed (never if it rolls back)."""
        self.joined(write=False)
        self._callbacks.append(callback)

    def begin_nested(self) -> Savepoint:
        """A savepoint: work in it can be rolled back without ending the unit."""
        self.joined(write=False)
        return Savepoint(self, self.connection.begin_nested())

    @contextmanager
    def savepoint(self) -> Iterator[Savepoint]:
        """``begin_nested`` as a block: released when it ends, rolled back on an error."""
        point = self.begin_nested()
        try:
            yield point
        except BaseException:
            point.rollback()
            raise
        point.commit()

    def end(self, *, committed: bool) -> None:
        """The unit's transaction ended (``Store.unit`` calls this): run the callbacks if it
        committed (each one, in order; the first error among them is raised once all have run:
        the change is committed either way). The unit cannot be joined any more."""
        self._open = False
        callbacks, self._callbacks, self._held = self._callbacks, [], set()
        if not committed:
            return
        failed: BaseException | None = None
        for callback in callbacks:
            try:
                callback()
            except Exception as exc:
                failed = failed or exc
        if failed is not None:
            raise failed
