"""The tick log: every timer tick, admitted or not, with its nominal and actual time.

Ticks are appended in batches (``TickLog.append``), so a host that is denied on every tick still
makes no durable commit per tick.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from enum import StrEnum

from sqlalchemy import BigInteger, func, insert, select, type_coerce

from . import _schema as s
from ._repository import Repository
from ._types import Frozen, decode_us, from_row, stored
from .errors import CorruptState

MAX_REASON = 200  # the column's width


class TickDecision(StrEnum):
    """What became of a timer tick."""

    ADMITTED = "admitted"
    DENIED = "denied"
    SKIPPED = "skipped"
    ERROR = "error"


class Tick(Frozen):
    """One timer tick: when it was due, when it ran, and what became of it."""

    automation_id: str
    nominal_at: datetime
    actual_at: datetime
    decision: TickDecision
    reason: str
    turn_id: str | None = None
    host: str


class TickLog(Repository):
    def append(self, ticks: list[Tick]) -> None:
        """Write a batch of ticks in one transaction."""
        if not ticks:
            return
        rows = [
            dict(
                automation_id=t.automation_id,
                nominal_us=t.nominal_at,
                actual_us=t.actual_at,
                decision=t.decision,
                reason=t.reason[:MAX_REASON],  # never a batch refused (and retried forever) for one long reason
                turn_id=t.turn_id,
                host=t.host,
            )
            for t in ticks
        ]
        with self.store.write(lock_key=None) as conn:
            conn.execute(insert(s.ticks), rows)

    def recent(self, automation_id: str, limit: int = 20) -> list[Tick]:
        k = s.ticks
        query = select(k).where(k.c.automation_id == automation_id).order_by(k.c.id.desc()).limit(limit)
        with self.store.read() as conn, stored(f"a tick of automation {automation_id!r}"):
            return [from_row(Tick, s.ticks, row, nominal_at=row.nominal_us, actual_at=row.actual_us) for row in conn.execute(query)]

    def admitted_between(self, automation_id: str, start: datetime, end: datetime) -> set[datetime]:
        """The nominal times in ``[start, end]`` a tick of ``automation_id`` was admitted for (one query)."""
        k = s.ticks
        query = select(k.c.nominal_us).where(
            k.c.automation_id == automation_id,
            k.c.decision == TickDecision.ADMITTED.value,
            k.c.nominal_us >= start,
            k.c.nominal_us <= end,
        )
        with self.store.read() as conn, stored(f"a tick of automation {automation_id!r}"):
            return {row[0] for row in conn.execute(query)}

    def last_nominal(self, automation_id: str | None = None) -> dict[str, datetime]:
        """automation id -> the latest nominal time ever ticked (one query; all or one automation)."""
        k = s.ticks
        query = select(k.c.automation_id, func.max(k.c.nominal_us)).group_by(k.c.automation_id)
        if automation_id is not None:
            query = query.where(k.c.automation_id == automation_id)
        with self.store.read() as conn:
            rows = conn.execute(query)
            return {aid: value for aid, value in rows if value is not None}

    def last_nominal_scan(self, automation_ids: Collection[str] | None = None) -> tuple[dict[str, datetime], dict[str, str]]:
        """Like ``last_nominal()`` for every automation (or those named: by the index on automation
        and nominal time, as many rows as named), but an automation whose latest nominal time is
        malformed is reported as ``{automation_id: reason}`` instead of failing the whole read."""
        k = s.ticks
        query = select(k.c.automation_id, func.max(type_coerce(k.c.nominal_us, BigInteger))).group_by(k.c.automation_id)
        if automation_ids is not None:
            query = query.where(k.c.automation_id.in_(sorted(automation_ids)))
        found: dict[str, datetime] = {}
        bad: dict[str, str] = {}
        with self.store.read() as conn:
            rows = list(conn.execute(query))
        for automation_id, value in rows:
            if value is None:
                continue
            try:
                found[automation_id] = decode_us(value)
            except CorruptState as exc:
                bad[automation_id] = f"the tick log of automation {automation_id!r} has a malformed nominal time: {exc}"
        return found, bad

    def counters(self, automation_id: str) -> dict[str, dict[str, int]]:
        """decision -> reason -> count, over all recorded ticks of the automation."""
        k = s.ticks
        query = select(k.c.decision, k.c.reason, func.count()).where(k.c.automation_id == automation_id).group_by(k.c.decision, k.c.reason)
        out: dict[str, dict[str, int]] = {}
        with self.store.read() as conn:
            for decision, reason, count in conn.execute(query):
                out.setdefault(decision, {})[reason] = int(count)
        return out
