"""Missions: one run episode of an automation, with durable counters the envelope bounds.

A mission opens with its automation's first turn and stays open across failed turns, retries and
continuations until it settles (succeeded, stuck) or waits for its owner (awaiting_owner).
Counters are durable and keyed by mission id, so a restart or resume never grants a fresh
allowance. Counting is one statement that refuses to pass the bound.

Every method that writes takes ``unit``: the caller's unit of work (``Store.unit``), so a turn's
begin or settlement commits with the rest of its use case.
"""

from __future__ import annotations

import functools
import uuid
from datetime import datetime, timedelta
from enum import StrEnum

from sqlalchemy import Update, bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row, stored
from .clock import read_clock
from .errors import NotFound
from .events import EventKind, record
from .scope import check_key
from .unit import UnitOfWork


class MissionStatus(StrEnum):
    """A mission's lifecycle: open, waiting for an owner's answer, or settled."""

    OPEN = "open"
    AWAITING_OWNER = "awaiting_owner"
    SUCCEEDED = "succeeded"
    STUCK = "stuck"


# The statuses of a mission not yet settled, as stored (a tuple of values: an IN list and two
# equalities are built from it).
_LIVE = (MissionStatus.OPEN.value, MissionStatus.AWAITING_OWNER.value)


_COUNTERS = {"turns": "extra_turns", "tool_calls": "extra_tool_calls", "tokens": "extra_tokens"}

# A turn's begin opens its mission and counts the turn: these statements are built once (building
# and keying them per call was most of a SQLite burst's CPU for all-admitted reservations).
_UNSETTLED = select(s.missions).where(  # two equalities, not IN: an IN list is expanded again at every run
    s.missions.c.automation_id == bindparam("p_automation"),
    (s.missions.c.status == _LIVE[0]) | (s.missions.c.status == _LIVE[1]),
)
_INSERT = insert(s.missions).returning(*s.missions.c)
_NEW_MISSION = {
    "status": MissionStatus.OPEN.value,
    "stop_reason": None,
    "settled_at_us": None,
    "turns": 0,
    "tool_calls": 0,
    "tokens": 0,
    "usage_reports": 0,
    "extra_turns": 0,
    "extra_tool_calls": 0,
    "extra_tokens": 0,
    "extra_wall_seconds": 0,
    "wall_ms": 0,
    "latch": None,
    "problems": None,
}


@functools.cache
def _count_statement(counter: str, capped: bool) -> Update:
    """Count one ``counter`` on an open mission, returning the row; ``capped``: refused at the limit."""
    m = s.missions
    column, extra = m.c[counter], m.c[_COUNTERS[counter]]
    statement = (
        update(m).where(m.c.mission_id == bindparam("p_mission"), m.c.status == MissionStatus.OPEN.value).values({column: column + 1})
    )
    if capped:
        statement = statement.where(column < bindparam("p_limit", type_=column.type) + extra)
    return statement.returning(*m.c)


class Mission(Frozen):
    mission_id: str
    automation_id: str
    goal_id: str
    agent_id: str
    status: MissionStatus
    stop_reason: str | None
    started_at: datetime
    settled_at: datetime | None
    turns: int
    tool_calls: int
    tokens: int
    usage_reports: int
    extra_turns: int
    extra_tool_calls: int
    extra_tokens: int
    extra_wall_seconds: int
    wall_ms: int  # the run time of its turns, not calendar time since it opened
    latch: str | None
    problems: str | None

    @property
    def wall_seconds(self) -> float:
        """Wall-clock seconds its turns have run (what max_wall_seconds bounds)."""
        return self.wall_ms / 1000

    @property
    def usage_known(self) -> bool:
        """False while the host has never reported usage: token counts are unknown, not zero."""
        return self.usage_reports > 0


def _mission(row) -> Mission:  # type: ignore[no-untyped-def]
    with stored(f"mission {row.mission_id!r}"):
        return from_row(Mission, s.missions, row)


class Missions(Repository):
    def get(self, mission_id: str, *, unit: UnitOfWork | None = None) -> Mission:
        """The mission ``mission_id`` (``NotFound`` when none); ``unit``: read in the caller's unit."""
        check_key(mission_id, "mission_id")
        with self.store.read(unit=unit) as conn:
            return _read(conn, mission_id)

    def current(self, automation_id: str) -> Mission | None:
        """The automation's unsettled mission (open or awaiting its owner), if any."""
        check_key(automation_id, "automation")
        m = s.missions
        with self.store.read() as conn:
            row = conn.execute(
                select(m).where(m.c.automation_id == automation_id, m.c.status.in_(_LIVE)).order_by(m.c.started_at_us.desc())
            ).first()
        return _mission(row) if row is not None else None

    def latest_many(self) -> dict[str, Mission]:
        """Per automation, what ``current(a) or recent(a, 1)`` gives, in one read: its unsettled
        mission, else its latest one."""
        m = s.missions
        latest = select(m.c.automation_id.label("aid"), func.max(m.c.started_at_us).label("at")).group_by(m.c.automation_id).subquery()
        query = select(m).where(
            m.c.status.in_(_LIVE)
            | m.c.mission_id.in_(
                select(m.c.mission_id).join(latest, (m.c.automation_id == latest.c.aid) & (m.c.started_at_us == latest.c.at))
            )
        )
        with self.store.read() as conn:
            rows = [_mission(row) for row in conn.execute(query.order_by(m.c.started_at_us))]
        out: dict[str, Mission] = {}
        for mission in rows:  # oldest first: the latest wins, an unsettled one over any settled one
            held = out.get(mission.automation_id)
            if held is None or held.status not in _LIVE or mission.status in _LIVE:
                out[mission.automation_id] = mission
        return out

    def recent(self, automation_id: str | None = None, limit: int = 20) -> list[Mission]:
        m = s.missions
        query = select(m).order_by(m.c.started_at_us.desc()).limit(limit)
        if automation_id is not None:
            query = query.where(m.c.automation_id == automation_id)
        with self.store.read() as conn:
            return [_mission(row) for row in conn.execute(query)]

    def open(self, automation_id: str, goal_id: str, agent_id: str, *, unit: UnitOfWork | None = None) -> Mission:
        """The automation's unsettled mission, or a new one (one per automation at a time)."""
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.automation(automation_id), unit=unit) as conn:
            row = conn.execute(_UNSETTLED, {"p_automation": automation_id}).first()
            if row is None:
                mission_id = f"mis-{uuid.uuid4().hex[:16]}"
                values = dict(_NEW_MISSION, mission_id=mission_id, automation_id=automation_id, goal_id=goal_id, agent_id=agent_id)
                row = conn.execute(_INSERT, dict(values, started_at_us=now)).one()  # the new row as stored, in the same statement
                if unit is not None:  # its turn is counted next, in this unit
                    unit.created(locks.mission(mission_id))
        return _mission(row)

    def count(self, mission_id: str, counter: str, limit: int, *, enforce: bool, unit: UnitOfWork | None = None) -> tuple[bool, Mission]:
        """Count one turn or tool call. With a limit in enforce, the count that would pass
        ``limit`` (plus approved extensions) is refused and nothing changes: one statement."""
        if counter not in ("turns", "tool_calls"):
            raise ValueError(counter)
        m = s.missions
        capped = bool(limit and enforce)
        params = {"p_mission": mission_id, "p_limit": limit} if capped else {"p_mission": mission_id}
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            row = conn.execute(_count_statement(counter, capped), params).first()  # counted: the row as counted, in one statement
            counted = row is not None
            if row is None:  # refused (or not open): nothing changed, the row as it stands
                row = conn.execute(select(m).where(m.c.mission_id == mission_id)).first()
        if row is None:
            raise NotFound(f"mission {mission_id!r} does not exist")
        return counted, _mission(row)

    def settle(self, mission_id: str, status: MissionStatus, reason: str | None, *, unit: UnitOfWork | None = None) -> Mission:
        m = s.missions
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            values: dict[str, object] = {"status": status.value, "stop_reason": reason}
            if status.value not in _LIVE:
                values["settled_at_us"] = now
            done = conn.execute(update(m).where(m.c.mission_id == mission_id, m.c.status.in_(_LIVE)).values(**values))
            if done.rowcount == 1 and status == MissionStatus.STUCK:
                record(conn, EventKind.MISSION_STUCK, mission_id, {"mission_id": mission_id, "reason": reason}, now)
            return _read(conn, mission_id)

    def add_wall(self, mission_id: str, ran: timedelta, *, unit: UnitOfWork | None = None) -> Mission:
        """Count one turn's run time against the mission's wall clock (a clock stepped back
        counts nothing, never a refund)."""
        ran_ms = max(0, round(ran.total_seconds() * 1000))
        m = s.missions
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            conn.execute(update(m).where(m.c.mission_id == mission_id).values(wall_ms=m.c.wall_ms + ran_ms))
            return _read(conn, mission_id)

    def set_latch(self, mission_id: str, reason: str | None, *, unit: UnitOfWork | None = None) -> None:
        m = s.missions
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            before = conn.execute(select(m.c.latch).where(m.c.mission_id == mission_id)).first()
            conn.execute(update(m).where(m.c.mission_id == mission_id).values(latch=reason))
            if reason is not None and before is not None and before.latch != reason:
                record(conn, EventKind.LATCH_SET, mission_id, {"mission_id": mission_id, "reason": reason}, read_clock(self.clock))

    def report_overshoot(self, mission_id: str, problem: str, data: dict[str, object], *, unit: UnitOfWork | None = None) -> None:
        """Record that a turn which succeeded went past a bound: the problem on the mission and a
        ``bound_overshot`` event, in one unit (or the caller's)."""
        m = s.missions
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            conn.execute(update(m).where(m.c.mission_id == mission_id).values(problems=problem[:2000]))
            record(conn, EventKind.BOUND_OVERSHOT, mission_id, {"mission_id": mission_id, **data}, read_clock(self.clock))

    def report_problem(self, mission_id: str, problem: str, *, unit: UnitOfWork | None = None) -> None:
        m = s.missions
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            conn.execute(update(m).where(m.c.mission_id == mission_id).values(problems=problem[:2000]))


def _read(conn: Connection, mission_id: str) -> Mission:
    m = s.missions
    row = conn.execute(select(m).where(m.c.mission_id == mission_id)).first()
    if row is None:
        raise NotFound(f"mission {mission_id!r} does not exist")
    return _mission(row)
