"""Backfill: run the fires of a past range one after another, each an automatic start that passes
admission (floors, the automation's state, its failure streak, its envelope) as a timer's fire
would, with the fire's time as its trigger.

The dry run writes nothing. It asks admission's own plain read (``Admission.denial``) of each fire
until one would be admitted; from then on, the fires after it run right after that start, so the
lane's floor (if any) denies them until it elapses, exactly as the real run's reservations would.
Each fire is recorded in the tick log (host ``backfill``) as a timer's tick is; a fire with an
admitted tick already (a timer ran it, or an earlier backfill) is left out, and admission denies a
trigger older than the lane's latest start as stale: running a range twice never runs a fire twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from floorgate.admission import Admission, Automation, Automations, InvalidInput, Store, Tick, TickLog
from floorgate.admission.clock import Clock, iso, read_clock
from floorgate.hosts.schedule import parse_canonical

from .start_refusals import failing_refusal, state_refusal

MAX_FIRES = 1000  # fires one backfill may run (a larger range is refused: narrow it)


@dataclass(frozen=True)
class BackfillRow:
    """One fire of the range: what admission decided (or would), and for a real run the verdict."""

    fire_at: datetime
    admitted: bool
    reason: str  # admission's reason, or the refusal's stop reason (automation_paused, failing, ...)
    detail: str
    turn_id: str | None = None
    status: str | None = None  # the turn's verdict (real run of an admitted fire)


@dataclass(frozen=True)
class BackfillReport:
    automation_id: str
    start: datetime
    end: datetime
    dry_run: bool
    rows: list[BackfillRow]


class BackfillService:
    """Backfills of one store's automations; ``make_executor`` builds a managed-turn executor."""

    def __init__(self, store: Store, clock: Clock, make_executor: Callable[[], object]) -> None:
        self.store = store
        self.clock = clock
        self.make_executor = make_executor
        self.automations = Automations(store, clock)
        self.admission = Admission(store, clock)
        self.ticks = TickLog(store)

    def fires(self, automation: Automation, start: datetime, end: datetime) -> list[datetime]:
        """The schedule's fires in ``[start, end]``, a past range (``InvalidInput`` naming the flag)."""
        now = read_clock(self.clock)
        if end < start:
            raise InvalidInput("--to", f"{iso(end)} is before --from {iso(start)}; give --from T1 --to T2 with T1 <= T2")
        if end > now:
            raise InvalidInput("--to", f"{iso(end)} is in the future; backfill runs past fires only (the timer runs the rest)")
        if automation.spec.host is None:
            raise InvalidInput("automation", f"{automation.automation_id} has an external timer: its app launches it")
        schedule = parse_canonical(automation.spec.schedule)
        found = schedule.occurrences(MAX_FIRES + 1, after=start - timedelta(microseconds=1))
        inside = [at for at in found if at <= end]
        if len(inside) > MAX_FIRES:
            raise InvalidInput("--from", f"the range holds more than {MAX_FIRES} fires; narrow --from/--to")
        return inside

    def run(self, automation_id: str, start: datetime, end: datetime, *, dry_run: bool) -> BackfillReport:
        """Run (or with ``dry_run`` only judge) each fire of the range, oldest first."""
        automation = self.automations.get(automation_id)
        fires = self.fires(automation, start, end)
        ran = self.ticks.admitted_between(automation.automation_id, start, end)
        todo = [at for at in fires if at not in ran]
        done = {at: BackfillRow(at, False, "already_ran", "an admitted tick of this fire is recorded") for at in fires if at in ran}
        judged = self._judge(automation, todo) if dry_run else self._run(automation, todo)
        rows = sorted([*judged, *done.values()], key=lambda r: r.fire_at)
        return BackfillReport(automation_id, start, end, dry_run, rows)

    def _judge(self, automation: Automation, fires: list[datetime]) -> list[BackfillRow]:
        now = read_clock(self.clock)
        refused = state_refusal(automation, manual=False) or failing_refusal(
            automation, self.automations.wake_state(automation.automation_id), now
        )
        if refused is not None:
            verdict, detail = refused
            return [BackfillRow(at, False, verdict.stop_reason, detail) for at in fires]
        spec = automation.spec
        rows: list[BackfillRow] = []
        started_at: datetime | None = None  # the dry run's first admitted start (at ``now``)
        floor: timedelta | None = None
        for at in fires:
            if started_at is None:
                denied = self.admission.denial(
                    goal=spec.goal_id, agent=spec.agent_id, automation=automation.automation_id, turn_id="backfill-dry-run", trigger_time=at
                )
                if denied is not None:
                    rows.append(BackfillRow(at, False, denied.reason.value, denied.detail))
                    continue
                started_at = now
                eligibility = self.admission.eligibility(spec.goal_id, spec.agent_id, automation.automation_id)
                floor = eligibility.floor.floor if eligibility.floor is not None else None
                rows.append(BackfillRow(at, True, "eligible", "would start now"))
            elif floor:
                opens = started_at + floor
                rows.append(
                    BackfillRow(
                        at, False, "interval_wait", f"the floor of {floor} after the backfill's first start: eligible at {iso(opens)}"
                    )
                )
            else:
                rows.append(BackfillRow(at, True, "no_rule", "would start now (no floor)"))
        return rows

    def _run(self, automation: Automation, fires: list[datetime]) -> list[BackfillRow]:
        executor = self.make_executor()
        rows: list[BackfillRow] = []
        try:
            for at in fires:
                current = self.automations.get(automation.automation_id)  # a failure may have held it
                outcome = executor.run(current, nominal=at)  # type: ignore[attr-defined]
                decision, verdict = outcome.decision, outcome.verdict
                if decision is not None and decision.admitted:
                    row = BackfillRow(at, True, decision.reason.value, outcome.detail, outcome.turn_id, verdict.status)
                elif decision is not None:
                    row = BackfillRow(at, False, decision.reason.value, decision.detail)
                else:
                    row = BackfillRow(at, False, verdict.stop_reason, outcome.detail or verdict.stop_reason)
                rows.append(row)
                decided = "admitted" if row.admitted else "denied"
                tick = Tick(
                    automation_id=current.automation_id,
                    nominal_at=at,
                    actual_at=read_clock(self.clock),
                    decision=decided,  # type: ignore[arg-type]
                    reason=row.status if row.admitted and row.status else row.reason,
                    turn_id=outcome.turn_id or None,
                    host="backfill",
                )
                self.ticks.append([tick])
        finally:
            executor.close()  # type: ignore[attr-defined]
        return rows
