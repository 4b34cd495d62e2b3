"""The ``apscheduler`` host: floorgate's own timers, in a live APScheduler 3 scheduler.

These timers are floor-aware (every fire is clamped to the floor and passes admission before a
turn launches), so any RRULE is expressed exactly and the guarantee is ``enforced``. The live
scheduler belongs to a running ``floorgate run`` (``armed_by_runtime``): it arms its jobs from
the store and publishes this adapter's readback; another process asks it through the store.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from apscheduler.triggers.base import BaseTrigger

from ._exact import ExactRrule, exact_capabilities
from .contract import Applied, Observation, ObservationState, Reported, TimerKind, refuse_report
from .errors import HostUnavailable
from .schedule import Schedule


class ScheduleTrigger(BaseTrigger):
    """A pure trigger firing at a schedule's occurrences (no I/O: APScheduler calls it under its lock)."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule

    def get_next_fire_time(self, previous_fire_time, now):  # type: ignore[no-untyped-def]
        after = previous_fire_time if previous_fire_time is not None else now - timedelta(microseconds=1)
        return self.schedule.next_after(after)

    def __str__(self) -> str:
        return f"floorgate[{self.schedule.canonical()!r}]"


class ApschedulerTimer(ExactRrule):
    """The timer host over a live APScheduler scheduler.

    ``job`` is what a fire runs (called with the automation id); without it this adapter can read
    and remove jobs but not arm them (apply raises ``HostUnavailable``).
    """

    kind = TimerKind.APSCHEDULER
    CAPABILITIES = exact_capabilities(
        floorgate_runs_it=True, summary="any RFC 5545 schedule floorgate accepts, clamped to the floor by the running host"
    )

    def __init__(self, scheduler: Any, job: Callable[[str], object] | None = None) -> None:
        self.scheduler = scheduler  # an apscheduler BaseScheduler, or None outside ``floorgate run``
        self.job = job

    def apply(self, automation_id: str, schedule: Schedule, now: datetime) -> Applied:
        form = self.expressed(schedule, now)
        if self.scheduler is None or self.job is None:
            raise HostUnavailable("apscheduler: no live scheduler in this process; a running 'floorgate run' arms it from the store")
        job = self.scheduler.get_job(automation_id)
        armed = getattr(job.trigger, "schedule", None) if job is not None else None
        if isinstance(armed, Schedule) and armed.canonical() == schedule.canonical():
            return Applied(armed=True, host_form=form.text)  # unchanged: the job keeps its next fire
        self.scheduler.add_job(
            self.job, trigger=ScheduleTrigger(schedule), args=(automation_id,), id=automation_id, name=automation_id, replace_existing=True
        )
        return Applied(armed=True, host_form=form.text)

    def read(self, automation_id: str, now: datetime, reported: Reported | None = None) -> Observation:
        refuse_report(self.kind, reported)
        if not getattr(self.scheduler, "running", False):
            return Observation(state=ObservationState.UNAVAILABLE, text=None, read_at=now, detail="the scheduler is not running")
        job = self.scheduler.get_job(automation_id)
        if job is None:
            return Observation(state=ObservationState.ABSENT, text=None, read_at=now, detail="no live job")
        schedule = getattr(job.trigger, "schedule", None)
        if not isinstance(schedule, Schedule):
            return Observation(state=ObservationState.PRESENT, text=str(job.trigger), read_at=now, detail="not a floorgate trigger")
        return Observation(state=ObservationState.PRESENT, text=schedule.canonical(), read_at=now)

    def remove(self, automation_id: str) -> None:
        if self.scheduler is None:
            raise HostUnavailable("apscheduler: no live scheduler in this process; a running 'floorgate run' drops it from the store")
        if self.scheduler.get_job(automation_id) is not None:
            self.scheduler.remove_job(automation_id)
