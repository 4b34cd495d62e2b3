"""The turn journal: one record per host attempt, written before the host runs, settled after.

Phases: ``journaled`` (the attempt is durable; nothing spawned yet), ``launched`` (the host process
exists and its pid is recorded), ``settled`` (the verdict is written; settlement is final).
No host output is stored here: only ids, times, pids and the verdict.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict
from sqlalchemy import insert, select, update

from . import _schema as s
from .clock import Clock, SystemClock, from_us, read_clock, to_us
from .errors import InvalidInput, NotFound
from .store import Store

Status = Literal["succeeded", "failed", "timed_out", "denied", "stuck"]
Category = Literal["infra", "task", "policy", "none"]
TurnPhase = Literal["journaled", "launched", "settled"]


class Verdict(BaseModel):
    """How a turn ended (seed 003): retryable infra failures are told apart from task failures."""

    model_config = ConfigDict(frozen=True)

    status: Status
    stop_reason: str
    retryable: bool
    failure_category: Category
    exit_code: int | None = None


class TurnRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    turn_id: str
    automation_id: str
    goal_id: str
    agent_id: str
    attempt: int
    kind: str
    manual_reason: str | None
    runner_host: str
    runner_pid: int
    child_pid: int | None
    started_at: datetime
    deadline: datetime
    phase: TurnPhase
    verdict: Verdict | None
    settled_at: datetime | None
    log_path: str | None
    mission_id: str | None = None


def _record(row) -> TurnRecord:  # type: ignore[no-untyped-def]
    verdict = None
    if row.status is not None:
        verdict = Verdict(
            status=row.status,
            stop_reason=row.stop_reason,
            retryable=bool(row.retryable),
            failure_category=row.failure_category,
            exit_code=row.exit_code,
        )
    return TurnRecord(
        turn_id=row.turn_id,
        automation_id=row.automation_id,
        goal_id=row.goal_id,
        agent_id=row.agent_id,
        attempt=row.attempt,
        kind=row.kind,
        manual_reason=row.manual_reason,
        runner_host=row.runner_host,
        runner_pid=row.runner_pid,
        child_pid=row.child_pid,
        started_at=from_us(row.started_at_us),
        deadline=from_us(row.deadline_us),
        phase=row.phase,
        verdict=verdict,
        settled_at=from_us(row.settled_at_us) if row.settled_at_us is not None else None,
        log_path=row.log_path,
        mission_id=row.mission_id,
    )


class Journal:
    """Durable attempts and settlements of managed turns."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()

    def begin(
        self,
        *,
        turn_id: str,
        automation_id: str,
        goal_id: str,
        agent_id: str,
        attempt: int,
        kind: str,
        manual_reason: str | None,
        runner_host: str,
        runner_pid: int,
        deadline: datetime,
        log_path: str | None,
        mission_id: str | None = None,
    ) -> TurnRecord:
        """Journal an attempt (idempotent: an existing record for ``turn_id`` is returned as is)."""
        t = s.turns
        now = to_us(read_clock(self.clock))
        with self.store.write(lock_key=f"turn/{turn_id}") as conn:
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).first()
            if row is not None:
                return _record(row)
            conn.execute(
                insert(t).values(
                    turn_id=turn_id,
                    automation_id=automation_id,
                    goal_id=goal_id,
                    agent_id=agent_id,
                    attempt=attempt,
                    kind=kind,
                    manual_reason=manual_reason,
                    runner_host=runner_host,
                    runner_pid=runner_pid,
                    child_pid=None,
                    started_at_us=now,
                    deadline_us=to_us(deadline),
                    phase="journaled",
                    log_path=log_path,
                    mission_id=mission_id,
                )
            )
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).one()
        return _record(row)

    def launched(self, turn_id: str, child_pid: int) -> None:
        t = s.turns
        with self.store.write(lock_key=f"turn/{turn_id}") as conn:
            done = conn.execute(
                update(t).where(t.c.turn_id == turn_id, t.c.phase == "journaled").values(phase="launched", child_pid=child_pid)
            )
            if done.rowcount != 1:
                raise InvalidInput("turn_id", f"turn {turn_id!r} is not journaled and unlaunched")

    def settle(self, turn_id: str, verdict: Verdict) -> TurnRecord:
        """Write the verdict once; a second settlement returns the first (settlement is final)."""
        t = s.turns
        now = to_us(read_clock(self.clock))
        with self.store.write(lock_key=f"turn/{turn_id}") as conn:
            conn.execute(
                update(t)
                .where(t.c.turn_id == turn_id, t.c.phase != "settled")
                .values(
                    phase="settled",
                    status=verdict.status,
                    stop_reason=verdict.stop_reason,
                    retryable=verdict.retryable,
                    failure_category=verdict.failure_category,
                    exit_code=verdict.exit_code,
                    settled_at_us=now,
                )
            )
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).first()
        if row is None:
            raise NotFound(f"turn {turn_id!r} was never journaled")
        return _record(row)

    def get(self, turn_id: str) -> TurnRecord | None:
        t = s.turns
        with self.store.read() as conn:
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).first()
        return _record(row) if row is not None else None

    def unsettled(self, automation_id: str | None = None) -> list[TurnRecord]:
        t = s.turns
        query = select(t).where(t.c.phase != "settled").order_by(t.c.started_at_us)
        if automation_id is not None:
            query = query.where(t.c.automation_id == automation_id)
        with self.store.read() as conn:
            return [_record(row) for row in conn.execute(query)]

    def recent(self, automation_id: str, limit: int = 10) -> list[TurnRecord]:
        t = s.turns
        query = select(t).where(t.c.automation_id == automation_id).order_by(t.c.started_at_us.desc()).limit(limit)
        with self.store.read() as conn:
            return [_record(row) for row in conn.execute(query)]

    def attempts(self, automation_id: str) -> int:
        """How many attempts the automation has journaled (the next attempt number minus one)."""
        from sqlalchemy import func

        t = s.turns
        with self.store.read() as conn:
            return int(conn.execute(select(func.count()).where(t.c.automation_id == automation_id)).scalar_one())
