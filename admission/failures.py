"""An automation's failure streak: consecutive failed turns, written with the turn's verdict.

``note_settled`` runs on the connection that settles a managed turn's verdict, so the streak, its
events and a failing hold commit with the verdict or not at all:

- a succeeded turn ends the streak (``failures`` 0);
- a failed or timed-out turn (task or infra) adds one, and records ``turn_failed`` or
  ``turn_timed_out``; the second consecutive one records ``automation_failing`` (once per streak:
  from then on the automation's automatic starts slow down, see ``failure_wait``);
- the ``hold_after``-th consecutive one holds the automation (``hold_kind`` failing, an
  ``automation_held`` event) until its owner resumes it.

Denials (nothing ran) and stuck missions (held by their own rule) leave the streak as it is.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import insert, or_, select, update
from sqlalchemy.engine import Connection

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._turns import TurnStatus, Verdict
from .automations import Automation, AutomationState, HoldKind, WakeState
from .clock import iso, read_clock
from .events import EventKind, record
from .unit import UnitOfWork

_FAILED = {TurnStatus.FAILED: EventKind.TURN_FAILED, TurnStatus.TIMED_OUT: EventKind.TURN_TIMED_OUT}


def failing_note(failures: int, automation_id: str) -> str:
    """The readable note of a failing hold, naming how to clear it."""
    return f"{failures} consecutive turns failed; 'floorgate automation resume {automation_id}' after fixing the cause"


def failure_delay(failures: int, initial: timedelta, cap: timedelta) -> timedelta | None:
    """How long after the ``failures``-th consecutive failure the next automatic start waits at
    least: ``initial x 2^(k-1)`` (at most ``cap``) from the second on; None after a first failure
    (its early retry is the backoff's)."""
    if failures < 2:
        return None
    wait: timedelta = initial * (2 ** min(failures - 1, 30))
    return min(wait, cap)


def failure_wait(wake: WakeState) -> datetime | None:
    """The earliest automatic start ``wake``'s failure streak allows (None: no slowdown)."""
    return wake.failing_until if wake.failures >= 2 else None


def _backoff(conn: Connection) -> tuple[timedelta, timedelta]:
    """The deployment's backoff (initial, cap), read on ``conn``: the defaults when never set."""
    from .host_policy import HostPolicy, _from_json  # the policy's one decoder

    row = conn.execute(select(s.settings.c.value_json).where(s.settings.c.key == "host_policy")).first()
    policy = _from_json(row[0]) if row is not None else HostPolicy()
    return policy.backoff_initial, policy.backoff_cap


def note_settled(conn: Connection, automation: Automation, turn_id: str, verdict: Verdict, at: datetime) -> int:
    """Move ``automation``'s failure streak by the verdict of its turn ``turn_id`` settled at ``at``,
    on ``conn`` (the verdict's own transaction, holding the automation's lock); returns the streak."""
    status = TurnStatus(verdict.status)
    if status is not TurnStatus.SUCCEEDED and status not in _FAILED:
        return -1  # nothing ran (denied) or the mission's own rule holds it (stuck): unchanged
    w, a = s.wake_state, s.automations
    automation_id = automation.automation_id
    row = conn.execute(select(w.c.failures).where(w.c.automation_id == automation_id)).first()
    current = row[0] if row is not None and type(row[0]) is int and row[0] >= 0 else 0
    if status is TurnStatus.SUCCEEDED:
        if current:
            conn.execute(update(w).where(w.c.automation_id == automation_id).values(failures=0, failed_at_us=None, failing_until_us=None))
        return 0
    failures = current + 1
    delay = failure_delay(failures, *_backoff(conn))
    streak = dict(failures=failures, failed_at_us=at, failing_until_us=at + delay if delay is not None else None)
    if row is None:
        values = dict(backoff_step=0, backoff_wake_us=None, updated_at_us=at)
        conn.execute(insert(w).values(automation_id=automation_id, **streak, **values))
    else:
        conn.execute(update(w).where(w.c.automation_id == automation_id).values(**streak))
    data = {
        "automation_id": automation_id,
        "turn_id": turn_id,
        "stop_reason": verdict.stop_reason,
        "failure_category": str(verdict.failure_category),
        "exit_code": verdict.exit_code,
        "consecutive_failures": failures,
        "next_automatic_start_after": iso(at + delay) if delay is not None else None,
    }
    record(conn, _FAILED[status], automation_id, data, at)
    if failures == 2:
        record(conn, EventKind.AUTOMATION_FAILING, automation_id, {**data, "since": "the second consecutive failure"}, at)
    hold_after = automation.spec.holds_after
    if hold_after and failures >= hold_after:
        state = conn.execute(select(a.c.state).where(a.c.automation_id == automation_id)).scalar()
        if state == AutomationState.ACTIVE.value:
            note = failing_note(failures, automation_id)
            conn.execute(
                update(a)
                .where(a.c.automation_id == automation_id)
                .values(
                    state=AutomationState.HELD.value,
                    hold_kind=HoldKind.FAILING.value,
                    state_note=note,
                    revision=a.c.revision + 1,
                    updated_at_us=at,
                )
            )
            held = {"automation_id": automation_id, "hold_kind": HoldKind.FAILING.value, "note": note}
            record(conn, EventKind.AUTOMATION_HELD, automation_id, held, at)
    return failures


class FailureStreaks(Repository):
    """The failure streak of managed turns, moved in the transaction that settles each verdict."""

    def note(self, automation: Automation, turn_id: str, verdict: Verdict, *, unit: UnitOfWork | None = None) -> int:
        """``note_settled`` under the automation's lock (not taken again when ``unit`` holds it
        already: ``lock``), in ``unit`` when given (the verdict's unit of work)."""
        with self.store.write(lock_key=locks.automation(automation.automation_id), unit=unit) as conn:
            return note_settled(conn, automation, turn_id, verdict, read_clock(self.clock))

    def lock(self, automation_id: str, *, unit: UnitOfWork) -> None:
        """Take the automation's lock in ``unit`` before anything else of a settlement: its
        begin takes it before the mission's and the turn's, so a settlement must too (PostgreSQL)."""
        with self.store.write(lock_key=locks.automation(automation_id), unit=unit):
            pass

    def failing(self) -> list[tuple[str, str, str, str, int]]:
        """Every automation with a failure streak running: (goal, agent, automation, stored state,
        consecutive failures), in that order (one indexed read: ``/metrics``' lanes in trouble)."""
        w, a = s.wake_state, s.automations
        query = (
            select(a.c.goal_id, a.c.agent_id, a.c.automation_id, a.c.state, w.c.failures)
            .join(w, w.c.automation_id == a.c.automation_id)
            .where(w.c.failures > 0)
            .order_by(a.c.goal_id, a.c.agent_id, a.c.automation_id)
        )
        with self.store.read() as conn:
            return [(r[0], r[1], r[2], r[3], int(r[4])) for r in conn.execute(query)]

    def clear(self, automation_id: str, *, unit: UnitOfWork | None = None) -> None:
        """End the streak and its backoff chain (the owner resumed the automation: no early retry
        of the failed turns is due, and the next failure is a first one again, retried after the
        backoff's first wait, not after the chain's longest)."""
        w = s.wake_state
        with self.store.write(lock_key=locks.automation(automation_id), unit=unit) as conn:
            conn.execute(
                update(w)
                .where(w.c.automation_id == automation_id, or_(w.c.failures > 0, w.c.backoff_step > 0))
                .values(failures=0, failed_at_us=None, failing_until_us=None, backoff_step=0, backoff_wake_us=None)
            )
