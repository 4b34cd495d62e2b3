"""Which host fires run: one simulation under every surface (status, show, preview).

Pure: it takes the schedule the host really arms, the lane's floor and next eligible time, and
how the host meets a floor, and says for each coming fire when it runs, or why not. Nothing is
read or written here. The simulation assumes every admitted fire starts on time, so an owner sees
before saving that a 15-minute schedule under a daily floor runs once a day, and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from typing import Protocol

from floorgate.admission import WakeState, WhenDenied
from floorgate.admission.decide import next_eligible_at
from floorgate.hosts import Schedule

from .wake import catch_up_due, first_fire_admitted


class FloorMeeting(StrEnum):
    """How a host meets a floor that has not elapsed when its timer fires."""

    COALESCE = "coalesce"  # floorgate's own timer never wakes inside the floor: due fires wait for it
    WAIT = "wait"  # the fire asks admission and waits up to a bound for the floor (crontab lines)
    DENY = "deny"  # the fire asks admission and is denied inside the floor (an app's hook)


@dataclass(frozen=True)
class PreviewRow:
    """One host fire: when the timer fires, whether a turn starts, and when."""

    fire_at: datetime  # aware, in the schedule's zone
    admitted: bool
    runs_at: datetime | None  # when the turn starts (a coalesced or waiting fire starts at the floor)
    eligible_at: datetime | None  # when denied: the floor's next eligible time at that fire
    waited_for_floor: bool = False  # it runs later than it fires because the floor opens then
    # What denies it when the floor does not: a count or budget (count_exhausted, budget_exhausted),
    # or a failure streak's slowdown (failing: no automatic start before ``PlanInputs.failing_until``).
    denied_by: str | None = None
    retry: bool = False  # floorgate's own timer's early retry after a failure: a wake, not a schedule fire

    @property
    def runs_late(self) -> bool:
        """Whether the turn starts later than the fire. Compared in UTC: Python never calls two aware
        times of different zones equal inside a repeated hour (a fall-back night's fires)."""
        return self.runs_at is not None and self.runs_at.astimezone(timezone.utc) != self.fire_at.astimezone(timezone.utc)


@dataclass(frozen=True)
class PlanInputs:
    """Everything the simulation needs, read once by the caller."""

    schedule: Schedule  # what the host arms (floored for crontab and external timers)
    meeting: FloorMeeting
    floor: timedelta | None
    next_eligible_at: datetime | None
    wait: timedelta = timedelta(0)  # FloorMeeting.WAIT: how long a fire may wait for the floor
    wake: WakeState | None = None  # backoff chain, for floorgate's own timer
    last_ticked: datetime | None = None
    catch_up: timedelta = timedelta(hours=1)
    since: datetime | None = None  # the automation's last change: no catch-up fire from before it
    when_denied: WhenDenied = WhenDenied.WAIT  # COALESCE: a fire inside the floor waits for it, or is skipped
    trigger_at: datetime | None = None  # COALESCE: when pending triggers are due (before floors)
    limits: LimitCheck | None = None  # counts and budgets at each start (a preview's; None: not checked)
    failing_until: datetime | None = None  # a failure streak's slowdown (``next_eligible_at`` already waits for it)


class LimitCheck(Protocol):
    """Whether the lane's counts and budgets let a start at ``at`` through, after the simulated
    starts ``ran`` (earlier rows of the same preview): None, or (reason, when it frees or None)."""

    def __call__(self, at: datetime, ran: list[datetime]) -> tuple[str, datetime | None] | None: ...


def simulate(inputs: PlanInputs, *, count: int, now: datetime) -> list[PreviewRow]:
    """The next ``count`` host fires after ``now`` and what becomes of each."""
    if inputs.meeting is FloorMeeting.COALESCE:
        return _coalesced(inputs, count, now)
    rows: list[PreviewRow] = []
    ran: list[datetime] = []
    next_eligible = inputs.next_eligible_at
    for fire in inputs.schedule.occurrences(count, after=now):
        fire_utc = fire.astimezone(timezone.utc)  # floors are elapsed time, not wall-clock time
        wait = inputs.wait if inputs.meeting is FloorMeeting.WAIT else timedelta(0)
        if next_eligible is None or fire_utc >= next_eligible:
            runs = fire_utc
        elif fire_utc + wait >= next_eligible:
            runs = next_eligible
        else:
            rows.append(PreviewRow(fire, False, None, next_eligible, denied_by=_failing(inputs, fire_utc, next_eligible)))
            continue
        if (denied := _limited(inputs, fire, runs, ran)) is not None:
            rows.append(denied)
            continue
        rows.append(PreviewRow(fire, True, runs, None, waited_for_floor=runs > fire_utc))
        if inputs.floor:
            next_eligible = next_eligible_at(runs, inputs.floor)
    return rows


def _coalesced(inputs: PlanInputs, count: int, now: datetime) -> list[PreviewRow]:
    # floorgate's own timer never wakes inside the floor: the fires due there wait for it, and
    # the last of them runs once at next_eligible_at (the trigger's planning, ``next_wake``).
    schedule = inputs.schedule
    points = list(schedule.occurrences(count + 1, after=now))  # one more: is the last row the last before the floor?
    due = _catch_up_fire(inputs, now)
    if due is not None:
        points.append(due)  # one catch-up fire, at once
    wake = inputs.wake
    backoff = None
    if wake is not None and wake.backoff_step > 0 and wake.backoff_wake_at is not None:
        points.append(backoff := wake.backoff_wake_at)
    skips = inputs.when_denied is WhenDenied.SKIP
    # Elapsed time is UTC arithmetic: in one ZoneInfo, Python adds and compares wall-clock times.
    now_utc = now.astimezone(timezone.utc)
    at = sorted({max(p.astimezone(timezone.utc), now_utc): p for p in points}.items())  # wake -> the fire it stands for
    rows: list[PreviewRow] = []
    ran: list[datetime] = []
    next_eligible = inputs.next_eligible_at
    for i, (effective, fire) in enumerate(at):
        if len(rows) == count:
            break
        following = at[i + 1][0] if i + 1 < len(at) else None
        waited = False
        if next_eligible is None or effective >= next_eligible:
            runs: datetime | None = effective
        elif skips and fire is not backoff:
            if fire.astimezone(timezone.utc) >= now_utc:  # skipped: the next admitted fire runs
                rows.append(PreviewRow(fire, False, None, next_eligible, denied_by=_failing(inputs, effective, next_eligible)))
            continue
        elif following is None or following > next_eligible:
            runs, waited = next_eligible, True  # the last fire before the floor opens: it runs when it does
        elif fire.astimezone(timezone.utc) < now_utc:
            continue  # a missed fire coalesced into a later wake: nothing fires for it, it is no 'next fire'
        else:  # coalesced into a later wake
            rows.append(
                PreviewRow(fire, False, None, next_eligible, denied_by=_failing(inputs, effective, next_eligible), retry=fire is backoff)
            )
            continue
        if runs is not None and (denied := _limited(inputs, fire, runs, ran)) is not None:
            rows.append(denied)
            continue
        rows.append(PreviewRow(fire, True, runs, None, waited_for_floor=waited, retry=fire is backoff))
        if inputs.floor and runs is not None:
            next_eligible = next_eligible_at(runs, inputs.floor)
    return rows


def _failing(inputs: PlanInputs, at: datetime, next_eligible: datetime) -> str | None:
    """``failing`` when a failure streak's slowdown is what keeps a start at ``at`` (UTC) from
    running: it lasts past ``at`` and no floor opens later (None: the floor binds)."""
    until = inputs.failing_until
    return "failing" if until is not None and at < until and next_eligible <= until else None


def _limited(inputs: PlanInputs, fire: datetime, runs: datetime, ran: list[datetime]) -> PreviewRow | None:
    """The denied row when a count or budget stops the start at ``runs`` (the floor does not move:
    nothing started); else None, and the start is counted for the rows after it."""
    if inputs.limits is None:
        return None
    denied = inputs.limits(runs, ran)
    if denied is None:
        ran.append(runs)
        return None
    return PreviewRow(fire, False, None, denied[1], denied_by=denied[0])


def first_run(rows: list[PreviewRow]) -> datetime | None:
    """When the next turn starts according to ``rows`` (None: none of them runs)."""
    return next((r.runs_at for r in rows if r.admitted), None)


class ScheduleQueries:
    """A schedule's ``next_after`` and ``last_at_or_before``, each answer computed once: a readback
    of many automations asks the same ones at the same instant of every automation that shares a
    schedule (``parse_canonical`` gives them one object). A query that raises is never kept."""

    def __init__(self) -> None:
        self._answers: dict[tuple[int, bool, datetime], tuple[Schedule, datetime | None]] = {}

    def next_after(self, schedule: Schedule, after: datetime) -> datetime | None:
        """``schedule.next_after(after)``."""
        return self._ask(schedule, True, after)

    def last_at_or_before(self, schedule: Schedule, at: datetime) -> datetime | None:
        """``schedule.last_at_or_before(at)``."""
        return self._ask(schedule, False, at)

    def _ask(self, schedule: Schedule, following: bool, at: datetime) -> datetime | None:
        key = (id(schedule), following, at)
        known = self._answers.get(key)
        if known is not None and known[0] is schedule:  # the schedule is kept: its id is never reused
            return known[1]
        answer = schedule.next_after(at) if following else schedule.last_at_or_before(at)
        self._answers[key] = (schedule, answer)
        return answer


class _Asked(ScheduleQueries):
    """Every query asked of the schedule itself (one plan)."""

    def _ask(self, schedule: Schedule, following: bool, at: datetime) -> datetime | None:
        return schedule.next_after(at) if following else schedule.last_at_or_before(at)


_ASKED = _Asked()


def first_run_at(inputs: PlanInputs, *, now: datetime, queries: ScheduleQueries = _ASKED) -> datetime | None:
    """``first_run(simulate(inputs, ...))`` over every coming fire, from at most three schedule
    queries instead of one simulated row per fire (``status`` asks this of every automation).

    Under a floor that has not elapsed, the fires before it are denied or coalesced into one run
    at ``next_eligible_at``, so only the first fire at or after it matters; the catch-up fire is
    looked for only when it could be the first run. ``queries``: where a readback of many keeps
    the schedules' answers.
    """
    schedule, next_eligible = inputs.schedule, inputs.next_eligible_at
    now_utc = now.astimezone(timezone.utc)
    if inputs.meeting is not FloorMeeting.COALESCE:
        wait = inputs.wait if inputs.meeting is FloorMeeting.WAIT else timedelta(0)
        after = now
        if next_eligible is not None and next_eligible - wait > now_utc:
            after = next_eligible - wait - timedelta(microseconds=1)  # the first fire that may run
        fire = queries.next_after(schedule, after)
        if fire is None:
            return None
        fire_utc = fire.astimezone(timezone.utc)
        return fire_utc if next_eligible is None or fire_utc >= next_eligible else next_eligible
    # floorgate's own timer: every wake (a fire, the catch-up fire, the backoff wake) at ``now`` or
    # later; the earliest runs, or, when it lies inside the floor, one run when the floor opens
    # (under ``skip``, the first fire the floor admits).
    wakes = []
    skips = inputs.when_denied is WhenDenied.SKIP and next_eligible is not None and next_eligible > now_utc
    following = first_fire_admitted(schedule, next_eligible) if skips and next_eligible else queries.next_after(schedule, now)
    if following is not None:
        wakes.append(max(following.astimezone(timezone.utc), now_utc))
    wake = inputs.wake
    if wake is not None and wake.backoff_step > 0 and wake.backoff_wake_at is not None:
        wakes.append(max(wake.backoff_wake_at.astimezone(timezone.utc), now_utc))
    if inputs.trigger_at is not None:
        wakes.append(max(inputs.trigger_at.astimezone(timezone.utc), now_utc))
    inside = next_eligible is not None and any(w < next_eligible for w in wakes)
    if not inside and not skips and _catch_up_fire(inputs, now, queries) is not None:
        wakes.append(now_utc)
    if not wakes:
        return None
    earliest = min(wakes)
    return earliest if next_eligible is None or earliest >= next_eligible else next_eligible


def _catch_up_fire(inputs: PlanInputs, now: datetime, queries: ScheduleQueries = _ASKED) -> datetime | None:
    """The missed occurrence that arming at ``now`` fires once, at once (None: there is none)."""
    if not inputs.catch_up:
        return None
    schedule = inputs.schedule
    first = queries.next_after(schedule, now - inputs.catch_up - timedelta(microseconds=1))
    due = queries.last_at_or_before(schedule, now) if first is not None and first <= now else None
    return due if due is not None and catch_up_due(due, last_ticked=inputs.last_ticked, since=inputs.since) else None
