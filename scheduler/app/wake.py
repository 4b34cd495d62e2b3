"""When an automation wakes next: its schedule, its adaptive backoff, and never before the floor.

The floor lives in admission; this module only reads ``next_eligible_at``. A backoff reset (after a
failed turn) shortens the wake cadence, and a trigger (new work) wakes it after its debounce;
neither ever comes before the floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from floorgate.admission import AutomationSpec, CatchUp, Debounce, HostPolicy, PendingTrigger, WakeState, WhenDenied, failure_wait
from floorgate.hosts import Schedule


@dataclass(frozen=True)
class BackoffPolicy:
    """Reset to ``initial`` after a failure, doubling up to ``cap`` until a success."""

    initial: timedelta = timedelta(minutes=3)
    cap: timedelta = timedelta(minutes=60)

    def delay(self, step: int) -> timedelta:
        """The wait before wake number ``step`` (1-based) of a backoff chain."""
        if step < 1:
            raise ValueError("backoff steps start at 1")
        return min(self.initial * (2 ** min(step - 1, 30)), self.cap)

    def reset(self, automation_id: str, now: datetime) -> WakeState:
        return WakeState(automation_id=automation_id, backoff_step=1, backoff_wake_at=now + self.delay(1))

    def advance(self, state: WakeState, now: datetime) -> WakeState:
        step = state.backoff_step + 1
        return state.model_copy(update={"backoff_step": step, "backoff_wake_at": now + self.delay(step)})

    def clear(self, state: WakeState) -> WakeState:
        return state.model_copy(update={"backoff_step": 0, "backoff_wake_at": None})


def next_wake(
    schedule: Schedule,
    *,
    previous: datetime | None,
    now: datetime,
    wake: WakeState,
    next_eligible_at: datetime | None,
    last_ticked: datetime | None,
    catch_up: timedelta,
    since: datetime | None,
    when_denied: WhenDenied = WhenDenied.WAIT,
    trigger_at: datetime | None = None,
) -> datetime | None:
    """The next time the timer should fire (None: the schedule has ended and no backoff is due).

    ``previous`` is the fire time the timer last used (None when it is being armed: at host start,
    after an edit, a trigger or a restart). When arming, the latest due occurrence that was never
    ticked and is at most ``catch_up`` old fires once, at once: after any downtime, at most one
    catch-up tick. That occurrence is never earlier than ``since`` (the automation's last change:
    its creation, an edit, a pause, a resume): a fire the automation did not exist, was paused or
    had another schedule for is not a missed fire. The result is never earlier than
    ``next_eligible_at``: under ``WhenDenied.WAIT`` a wake inside the floor moves to its end;
    under ``WhenDenied.SKIP`` a scheduled fire inside the floor is skipped for the first
    occurrence at or after its end (``first_fire_admitted``), so the time of day is kept. Under
    either, it is never earlier than the failure streak's wait (``failure_wait``).

    ``trigger_at``: when pending triggers are due (``trigger_due``). A triggered wake fires then,
    never before the floor; once fired (``previous`` at or after it) it comes back only while a
    floor denied it (``next_eligible_at`` after ``previous``): re-armed at the floor's end.
    """

    # The schedule's own wake (floor, backoff, catch-up) before triggers: a function for its early returns.
    def scheduled() -> datetime | None:
        if when_denied is WhenDenied.SKIP and next_eligible_at is not None and next_eligible_at > now:
            # Every scheduled fire before the floor's end (a missed one too) would be denied: skipped.
            # A backoff wake is no scheduled fire: it still waits for the floor.
            skipped = [t for t in (first_fire_admitted(schedule, next_eligible_at), _backoff_wake(wake, previous)) if t is not None]
            return _after_failing(max(min(skipped), next_eligible_at), wake) if skipped else None
        if previous is None and catch_up and next_eligible_at is not None and next_eligible_at > now:
            # The floor has not elapsed: a due catch-up fire would wait for it, so it can change the
            # answer only when nothing else comes before the floor opens. Most timers at a host's
            # start are in that state: one schedule query each, no catch-up search.
            soonest = [t for t in (schedule.next_after(now), _backoff_wake(wake, None)) if t is not None]
            if soonest and min(soonest) <= next_eligible_at:
                return _after_failing(next_eligible_at, wake)
        if previous is None:
            # Only an occurrence inside the catch-up window can be due; usually there is none.
            first = schedule.next_after(now - catch_up - timedelta(microseconds=1)) if catch_up else None
            due = schedule.last_at_or_before(now) if first is not None and first <= now else None
            if due is not None and catch_up_due(due, last_ticked=last_ticked, since=since):
                base: datetime | None = due
            else:
                base = first if first is not None and first > now else schedule.next_after(now)
        else:
            base = schedule.next_after(previous)
        candidates = [t for t in (base, _backoff_wake(wake, previous)) if t is not None]
        if not candidates:
            return None
        wake_at = min(candidates)
        if next_eligible_at is not None and wake_at < next_eligible_at:
            wake_at = next_eligible_at
        return _after_failing(wake_at, wake)

    planned = scheduled()
    if trigger_at is None:
        return planned
    if previous is not None and trigger_at <= previous and (next_eligible_at is None or next_eligible_at <= previous):
        return planned  # fired already and not denied by a floor: a start serves it, or the next re-arm
    triggered = trigger_wake(trigger_at, next_eligible_at=next_eligible_at, wake=wake)
    return triggered if planned is None or (triggered is not None and triggered < planned) else planned


def trigger_due(debounce: Debounce | None, pending: PendingTrigger | None) -> datetime | None:
    """When pending triggers wake the automation (before floors): their debounce's due time, at
    once without one; None when no trigger is pending."""
    if pending is None:
        return None
    return debounce.due(pending.first_at, pending.last_at) if debounce is not None else pending.last_at


def trigger_wake(due: datetime | None, *, next_eligible_at: datetime | None, wake: WakeState) -> datetime | None:
    """When a triggered wake fires: its due time, never before the floor or the failure streak's wait."""
    if due is None:
        return None
    at = max(due, next_eligible_at) if next_eligible_at is not None else due
    return _after_failing(at, wake)


def _after_failing(wake_at: datetime, wake: WakeState) -> datetime:
    """``wake_at``, or the failure streak's wait when later: a streak slows every automatic start,
    scheduled ones too."""
    failing = failure_wait(wake)
    return failing if failing is not None and wake_at < failing else wake_at


def catch_up_window(spec: AutomationSpec, policy: HostPolicy) -> timedelta:
    """How old a fire missed while no host ran may be to fire once at the next host start: the
    automation's own setting over the deployment's (``skip``: none; ``latest`` without a window of
    its own or the deployment's: the default window)."""
    if spec.catch_up is CatchUp.SKIP:
        return timedelta(0)
    window = spec.catch_up_window if spec.catch_up_window is not None else policy.catch_up
    if spec.catch_up is CatchUp.LATEST and not window:
        return HostPolicy().catch_up
    return window


_TICK = timedelta(microseconds=1)


def first_fire_admitted(schedule: Schedule, next_eligible_at: datetime) -> datetime | None:
    """The first scheduled fire at or after ``next_eligible_at`` (the one ``skip`` runs)."""
    return schedule.next_after(next_eligible_at - _TICK)


def catch_up_due(occurrence: datetime, *, last_ticked: datetime | None, since: datetime | None) -> bool:
    """Whether a missed ``occurrence`` inside the catch-up window may still fire: never ticked,
    and not before the automation's last change ``since``."""
    return (last_ticked is None or occurrence > last_ticked) and (since is None or occurrence >= since)


def _backoff_wake(wake: WakeState, previous: datetime | None) -> datetime | None:
    if wake.backoff_step < 1 or wake.backoff_wake_at is None:
        return None
    if previous is not None and wake.backoff_wake_at <= previous:
        return None  # already fired
    return wake.backoff_wake_at


def nominal_time(schedule: Schedule, wake: WakeState, fired_at: datetime, trigger_at: datetime | None = None) -> datetime:
    """The trigger time a tick at ``fired_at`` stands for: the latest schedule occurrence,
    backoff wake or due triggered wake (``trigger_at``) at or before it. Every host computes the same value, so duplicate ticks from
    several hosts are recognised by admission as one trigger."""
    points = [schedule.last_at_or_before(fired_at)]
    if wake.backoff_step > 0 and wake.backoff_wake_at is not None and wake.backoff_wake_at <= fired_at:
        points.append(wake.backoff_wake_at)
    if trigger_at is not None and trigger_at <= fired_at:
        points.append(trigger_at)
    present = [p for p in points if p is not None]
    return max(present) if present else fired_at
