"""Event triggers: new work for an automation, kept apart from its wake state.

A trigger is one row, written in one statement and idempotent by the caller's trigger id (the
same id twice is one trigger), pending until a turn of the automation starts: the host marks every
pending trigger up to that start as served by compare-and-set (``serve``), in the start's own
transaction when it has one. A turn's settlement never touches these rows, so a trigger that
arrives while a turn runs stays pending and wakes the automation after it. However many are
pending, they make one wake (``PendingTrigger``): the automation's debounce turns the burst into one
due time, and admission decides that wake like any automatic start.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import BigInteger, func, insert, select, type_coerce, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.expression import Executable

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import decode_us
from .clock import iso, read_clock
from .errors import CorruptState, NotFound
from .events import EventKind, record
from .scope import check_id, check_text
from .unit import UnitOfWork

MAX_KEY = 200


@dataclass(frozen=True, slots=True)
class PendingTrigger:
    """The triggers of one automation no turn has started for yet: one wake, however many."""

    first_at: datetime
    last_at: datetime
    count: int


@dataclass(frozen=True)
class Triggered:
    """The answer to one trigger: ``new`` False when its id was already recorded (nothing written)."""

    automation_id: str
    trigger_id: str
    key: str | None
    at: datetime
    new: bool
    pending: PendingTrigger | None


class Triggers(Repository):
    """The triggers in the store."""

    def trigger(self, automation_id: str, *, key: str | None = None, trigger_id: str | None = None) -> Triggered:
        """Record new work for ``automation_id`` and an ``automation_triggered`` event with it, in one
        commit; a ``trigger_id`` already recorded for it writes nothing (``new`` False). An unknown
        automation is ``NotFound`` naming it."""
        check_id(automation_id, "automation")
        if key is not None:
            check_text(key, "--key", max_len=MAX_KEY)
        minted = trigger_id is None
        tid = uuid.uuid4().hex if trigger_id is None else check_text(trigger_id, "--id", max_len=128)
        now = read_clock(self.clock)
        a, t = s.automations, s.triggers
        with self.store.write(lock_key=locks.automation(automation_id)) as conn:
            if conn.execute(select(a.c.automation_id).where(a.c.automation_id == automation_id)).first() is None:
                raise NotFound(f"automation {automation_id!r} does not exist (see 'floorgate automation list')")
            values = dict(automation_id=automation_id, trigger_id=tid, trigger_key=key, at_us=now)
            new = conn.execute(_insert_new(self.store.dialect, values)).first() is not None
            if new:
                data = {"automation_id": automation_id, "trigger_id": tid if not minted else None, "key": key, "at": iso(now)}
                record(
                    conn, EventKind.AUTOMATION_TRIGGERED, automation_id, data, now, dedup_key=f"automation_triggered:{automation_id}:{tid}"
                )
                at = now
            else:
                row = conn.execute(
                    select(t.c.at_us, t.c.trigger_key).where(t.c.automation_id == automation_id, t.c.trigger_id == tid)
                ).one()
                at, key = row.at_us, row.trigger_key
            pending = _pending(conn, [automation_id]).get(automation_id)
        return Triggered(automation_id, tid, key, at, new, pending)

    def pending(self, automation_id: str) -> PendingTrigger | None:
        """The automation's pending triggers as one wake (None: none pending)."""
        with self.store.read() as conn:
            return _pending(conn, [automation_id]).get(automation_id)

    def pending_scan(self, automation_ids: Collection[str] | None = None) -> dict[str, PendingTrigger]:
        """The pending triggers of every automation (or those named), in one read."""
        with self.store.read() as conn:
            return _pending(conn, automation_ids)

    def serve(self, automation_id: str, turn_id: str, *, unit: UnitOfWork | None = None) -> int:
        """A turn of the automation starts now: every trigger pending until now is served by it
        (compare-and-set: a trigger another start served already stays that start's). Returns how
        many this start served. ``unit``: in the start's own unit of work."""
        now = read_clock(self.clock)
        t = s.triggers
        served = (
            update(t)
            .where(t.c.automation_id == automation_id, t.c.served_at_us.is_(None), t.c.at_us <= now)
            .values(served_at_us=now, served_turn_id=turn_id)
        )
        with self.store.write(unit=unit) as conn:
            return int(conn.execute(served).rowcount)


def _insert_new(dialect: str, values: dict) -> Executable:  # type: ignore[type-arg]
    """An insert that writes nothing when the (automation, trigger id) row exists: one statement,
    answering a row only when it wrote one (a rowcount is not reliable across drivers here)."""
    t = s.triggers
    if dialect == "postgresql":
        return postgresql.insert(t).values(**values).on_conflict_do_nothing(index_elements=_KEY).returning(t.c.trigger_id)
    if dialect == "sqlite":
        return sqlite.insert(t).values(**values).on_conflict_do_nothing(index_elements=_KEY).returning(t.c.trigger_id)
    return insert(t).values(**values).returning(t.c.trigger_id)  # pragma: no cover - the two backends above are the supported ones


_KEY = ["automation_id", "trigger_id"]


def _pending(conn: Connection, automation_ids: Collection[str] | None) -> dict[str, PendingTrigger]:
    t = s.triggers
    at = type_coerce(t.c.at_us, BigInteger)  # raw microseconds, decoded (and checked) below
    query = (
        select(t.c.automation_id, func.min(at), func.max(at), func.count()).where(t.c.served_at_us.is_(None)).group_by(t.c.automation_id)
    )
    if automation_ids is not None:
        ids = list(automation_ids)
        if not ids:
            return {}
        query = query.where(t.c.automation_id.in_(ids))
    found: dict[str, PendingTrigger] = {}
    for automation_id, first, last, count in conn.execute(query):
        try:
            found[str(automation_id)] = PendingTrigger(decode_us(first), decode_us(last), int(count))
        except CorruptState as exc:
            raise CorruptState(f"the triggers of automation {automation_id!r} are malformed in the store: {exc}") from None
    return found
