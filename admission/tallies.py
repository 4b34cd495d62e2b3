"""Counts over the store for metrics and the console's timeline: every host reading the same store
reports the same numbers, because nothing here is counted in a process's memory.

Labels are bounded: free-text reasons that are not short snake_case words fold into ``other``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import BigInteger, func, select, type_coerce

from . import _schema as s
from ._repository import Repository
from ._types import Frozen, decode_us
from .clock import to_us

_WORD = re.compile(r"[a-z][a-z0-9_]{0,39}")


def bounded(value: object) -> str:
    """A label value from a closed-looking word, else ``other`` (never an id or a sentence)."""
    return value if isinstance(value, str) and _WORD.fullmatch(value) else "other"


class TickMark(Frozen):
    """One tick on the timeline: when it was due and what became of it."""

    automation_id: str
    nominal_at: datetime
    actual_at: datetime
    decision: str


class SlotCount(Frozen):
    """How many ticks of one kind fell into one slot of a time axis, and the first and last of them."""

    slot: int
    kind: str  # "fire" (by when it was due) or "denied" (by when it was decided)
    count: int
    first_at: datetime
    last_at: datetime


class Tallies(Repository):
    """Aggregates read in a few grouped queries."""

    def _grouped(self, query) -> dict[tuple[str, ...], int]:  # type: ignore[no-untyped-def]
        out: dict[tuple[str, ...], int] = {}
        with self.store.read() as conn:
            for *key, count in conn.execute(query):
                label = tuple(bounded(k) if k is not None else "none" for k in key)
                out[label] = out.get(label, 0) + int(count)
        return out

    def automations(self) -> dict[tuple[str, ...], int]:
        """(state,) -> automations in that stored state."""
        a = s.automations
        return self._grouped(select(a.c.state, func.count()).group_by(a.c.state))

    def ticks(self) -> dict[tuple[str, ...], int]:
        """(decision, reason) -> ticks recorded by timer hosts."""
        k = s.ticks
        return self._grouped(select(k.c.decision, k.c.reason, func.count()).group_by(k.c.decision, k.c.reason))

    def starts(self) -> dict[tuple[str, ...], int]:
        """(kind,) -> admitted starts (every start record, reserved or confirmed)."""
        t = s.starts
        return self._grouped(select(t.c.kind, func.count()).group_by(t.c.kind))

    def turns(self) -> dict[tuple[str, ...], int]:
        """(status, failure_category) -> settled turns."""
        t = s.turns
        query = (
            select(t.c.status, t.c.failure_category, func.count()).where(t.c.status.is_not(None)).group_by(t.c.status, t.c.failure_category)
        )
        return self._grouped(query)

    def in_flight(self) -> dict[str, int]:
        """phase -> turns not settled yet: ``journaled`` (admitted, its host not started: waiting
        for a worker, or left by a crash), ``confirmed`` and ``launched`` (running). Every phase present."""
        t = s.turns
        found = self._grouped(select(t.c.phase, func.count()).where(t.c.phase != "settled").group_by(t.c.phase))
        return {phase: found.get((phase,), 0) for phase in ("journaled", "confirmed", "launched")}

    def exhausted(self) -> dict[tuple[str, ...], int]:
        """(bound,) -> turns an envelope bound stopped."""
        t = s.turns
        return self._grouped(select(t.c.stop_bound, func.count()).where(t.c.stop_bound.is_not(None)).group_by(t.c.stop_bound))

    def pending_asks(self) -> int:
        a = s.approvals
        with self.store.read() as conn:
            return int(conn.execute(select(func.count()).select_from(a).where(a.c.state == "pending")).scalar_one())

    def last_admitted(self, automation_ids: Iterable[str]) -> dict[str, TickMark]:
        """automation id -> its latest admitted tick (for launch skew: nominal fire -> start)."""
        k = s.ticks
        ids = list(automation_ids)
        if not ids:
            return {}
        latest = (
            select(func.max(k.c.id))
            .where(k.c.decision == "admitted", k.c.automation_id.in_(ids))
            .group_by(k.c.automation_id)
            .scalar_subquery()
        )
        with self.store.read() as conn:
            rows = conn.execute(select(k).where(k.c.id.in_(latest))).all()
        return {
            r.automation_id: TickMark(automation_id=r.automation_id, nominal_at=r.nominal_us, actual_at=r.actual_us, decision=r.decision)
            for r in rows
        }

    def slot_counts(self, automation_id: str, since: datetime, width: timedelta, slots: int) -> list[SlotCount]:
        """The automation's ticks from ``since`` on, counted per slot of ``width`` (``slots`` of
        them): fires by when they were due, denials by when they were decided. Counted by the
        store, so a week of an every-minute lane is a few hundred rows, not ten thousand."""
        k = s.ticks
        start, step = to_us(since), max(1, int(width.total_seconds() * 1_000_000))
        out: list[SlotCount] = []
        with self.store.read() as conn:
            for kind, column, extra in (("fire", k.c.nominal_us, None), ("denied", k.c.actual_us, k.c.decision == "denied")):
                raw = type_coerce(column, BigInteger)
                slot = ((raw - start) // step).label("slot")
                query = select(slot, func.count(), func.min(raw), func.max(raw)).where(
                    k.c.automation_id == automation_id, raw >= start, raw < start + step * slots
                )
                if extra is not None:
                    query = query.where(extra)
                for row in conn.execute(query.group_by(slot)):
                    out.append(
                        SlotCount(
                            slot=int(row[0]), kind=kind, count=int(row[1]), first_at=decode_us(int(row[2])), last_at=decode_us(int(row[3]))
                        )
                    )
        return out
