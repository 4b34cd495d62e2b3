"""Retention: what may go from the store once it is older than a limit, in small batches.

What goes: ticks, settled turns, delivered events and served triggers older than the cutoff (a
trigger's id then no longer makes a repeat of it a no-op: a caller's retry comes within the
retention's day at least). What stays whatever
its age (seed 004 section 10): every start record (floors count from the latest start of every
scope, and a confirmed turn id is never admitted again), the latest tick of every automation (its
catch-up reads it), the turn of the latest start of every lane and the latest turn of every
automation (readbacks show it), every turn of a mission that is still open, stuck or awaiting its
owner, every turn not settled, every event with a delivery still pending or given up (``dead``:
the owner may retry it), every trigger not yet served. Missions, asks and dispatches are not pruned.

Each batch is one short write transaction that re-checks every condition in its own statements,
so a prune killed at any instant leaves a consistent store, and it never runs inside an
admission's lock (it takes no agent lock; turns it deletes are settled, so no runner writes them).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import and_, delete, exists, func, not_, or_, select, tuple_

from . import _schema as s
from ._repository import Repository
from .clock import read_clock
from .errors import InvalidInput

MIN_RETENTION = timedelta(days=1)
MAX_RETENTION = timedelta(days=3660)
DEFAULT_BATCH = 500
MAX_BATCH = 10_000

# A mission whose turns are still needed: its bounds count them until it settles.
_LIVE_MISSIONS = ("open", "stuck", "awaiting_owner")


class Kept(StrEnum):
    """The record kinds retention prunes, in the order a pass prunes them."""

    TICKS = "ticks"
    TURNS = "turns"
    EVENTS = "events"
    TRIGGERS = "triggers"


def check_retention(value: timedelta, field: str) -> timedelta:
    """A retention limit: at least a day and at most ten years (one-line ``InvalidInput`` otherwise)."""
    if not MIN_RETENTION <= value <= MAX_RETENTION:
        raise InvalidInput(field, "give a limit between 1d and 3660d, e.g. 90d")
    return value


@dataclass(frozen=True)
class Sizes:
    """Row counts of what retention may shrink (events include their deliveries' rows)."""

    ticks: int
    turns: int
    events: int
    deliveries: int
    starts: int  # never pruned: shown so an owner sees they stay


@dataclass(frozen=True)
class Batch:
    """One committed batch: what it deleted, and the turn logs of the turns it deleted."""

    kind: Kept
    deleted: int
    log_paths: tuple[str, ...] = ()


class Retention(Repository):
    """Count and prune what is older than a cutoff, one short transaction per batch."""

    def cutoff(self, older_than: timedelta) -> datetime:
        """The instant before which records may go."""
        return read_clock(self.clock) - check_retention(older_than, "--older-than")

    def sizes(self) -> Sizes:
        """Row counts now (one read transaction)."""
        with self.store.read() as conn:

            def count(table: Any) -> int:
                return int(conn.execute(select(func.count()).select_from(table)).scalar_one())

            return Sizes(count(s.ticks), count(s.turns), count(s.events), count(s.deliveries), count(s.starts))

    def prunable(self, cutoff: datetime) -> dict[Kept, int]:
        """How many records of each kind a prune at ``cutoff`` would delete (writes nothing)."""
        with self.store.read() as conn:
            return {
                kind: int(conn.execute(select(func.count()).select_from(_candidates(kind, cutoff).subquery())).scalar_one())
                for kind in Kept
            }

    def prunable_logs(self, cutoff: datetime) -> list[str]:
        """The log paths of the turns a prune at ``cutoff`` would delete."""
        t = s.turns
        ids = _candidates(Kept.TURNS, cutoff).subquery()
        with self.store.read() as conn:
            rows = conn.execute(select(t.c.log_path).where(t.c.turn_id.in_(select(ids.c.turn_id)), t.c.log_path.is_not(None)))
            return [r.log_path for r in rows]

    def prune_batch(self, kind: Kept, cutoff: datetime, limit: int = DEFAULT_BATCH) -> Batch:
        """Delete at most ``limit`` records of ``kind`` older than ``cutoff``, in one transaction."""
        if type(limit) is not int or not 1 <= limit <= MAX_BATCH:
            raise InvalidInput("batch", f"give 1..{MAX_BATCH}")
        lock = "deliveries" if kind is Kept.EVENTS else None  # serialized with the delivery claims
        with self.store.write(lock_key=lock) as conn:
            chosen = list(conn.execute(_candidates(kind, cutoff).limit(limit)))
            if not chosen:
                return Batch(kind, 0)
            keys = [row[0] for row in chosen]
            if kind is Kept.TICKS:
                t = s.ticks
                done = conn.execute(delete(t).where(t.c.id.in_(keys), _tick_prunable(cutoff))).rowcount
                return Batch(kind, int(done))
            if kind is Kept.TURNS:
                t = s.turns
                logs = tuple(r.log_path for r in conn.execute(select(t.c.log_path).where(t.c.turn_id.in_(keys))) if r.log_path)
                done = conn.execute(delete(t).where(t.c.turn_id.in_(keys), _turn_prunable(cutoff))).rowcount
                return Batch(kind, int(done), logs)
            if kind is Kept.TRIGGERS:
                tr = s.triggers
                pairs = [(row[0], row[1]) for row in chosen]  # its key is (automation, trigger id)
                done = conn.execute(
                    delete(tr).where(tuple_(tr.c.automation_id, tr.c.trigger_id).in_(pairs), _trigger_prunable(cutoff))
                ).rowcount
                return Batch(kind, int(done))
            e, d = s.events, s.deliveries
            event_ids = [r.event_id for r in conn.execute(select(e.c.event_id).where(e.c.seq.in_(keys), _event_prunable(cutoff)))]
            conn.execute(delete(d).where(d.c.event_id.in_(event_ids)))
            done = conn.execute(delete(e).where(e.c.event_id.in_(event_ids))).rowcount
            return Batch(kind, int(done))


def _candidates(kind: Kept, cutoff: datetime) -> Any:
    """The keys of the records of ``kind`` a prune at ``cutoff`` may delete, oldest first."""
    if kind is Kept.TICKS:
        return select(s.ticks.c.id).where(_tick_prunable(cutoff)).order_by(s.ticks.c.id)
    if kind is Kept.TURNS:
        return select(s.turns.c.turn_id).where(_turn_prunable(cutoff)).order_by(s.turns.c.started_at_us, s.turns.c.turn_id)
    if kind is Kept.TRIGGERS:
        return select(s.triggers.c.automation_id, s.triggers.c.trigger_id).where(_trigger_prunable(cutoff)).order_by(s.triggers.c.at_us)
    return select(s.events.c.seq).where(_event_prunable(cutoff)).order_by(s.events.c.seq)


def _tick_prunable(cutoff: datetime) -> Any:
    t = s.ticks
    later = t.alias("later")
    latest = select(func.max(later.c.nominal_us)).where(later.c.automation_id == t.c.automation_id).scalar_subquery()
    return and_(t.c.actual_us < cutoff, t.c.nominal_us < latest)


def _turn_prunable(cutoff: datetime) -> Any:
    t, st, m = s.turns, s.starts, s.missions
    lane = st.alias("lane")
    newer_turn = t.alias("newer")
    latest_of_lane = exists().where(
        st.c.turn_id == t.c.turn_id,
        st.c.anchor_us
        >= select(func.max(lane.c.anchor_us))
        .where(lane.c.goal_id == st.c.goal_id, lane.c.agent_id == st.c.agent_id, lane.c.automation_id == st.c.automation_id)
        .scalar_subquery(),
    )
    latest_of_automation = not_(
        exists().where(newer_turn.c.automation_id == t.c.automation_id, newer_turn.c.started_at_us > t.c.started_at_us)
    )
    live_mission = exists().where(m.c.mission_id == t.c.mission_id, m.c.status.in_(_LIVE_MISSIONS))
    return and_(
        t.c.phase == "settled",
        t.c.started_at_us < cutoff,
        or_(t.c.settled_at_us.is_(None), t.c.settled_at_us < cutoff),
        not_(latest_of_lane),
        not_(latest_of_automation),
        not_(live_mission),
    )


def _event_prunable(cutoff: datetime) -> Any:
    e, d = s.events, s.deliveries
    return and_(e.c.occurred_at_us < cutoff, not_(exists().where(d.c.event_id == e.c.event_id, d.c.state != "delivered")))


def _trigger_prunable(cutoff: datetime) -> Any:
    tr = s.triggers
    return and_(tr.c.served_at_us.is_not(None), tr.c.served_at_us < cutoff, tr.c.at_us < cutoff)
