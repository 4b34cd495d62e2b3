"""The ``apscheduler`` host: floorgate's own timers, read back from the live scheduler's jobs.

These timers are floor-aware (every fire is clamped to the floor and passes admission before a
turn launches), so any RRULE is expressed exactly and the guarantee is ``enforced``.
"""

from __future__ import annotations

from datetime import datetime

from .contract import Capabilities, Observation, same_instants
from .errors import InvalidSchedule
from .schedule import Schedule


class ApschedulerTimer:
    kind = "apscheduler"

    def __init__(self, scheduler) -> None:  # type: ignore[no-untyped-def]
        self.scheduler = scheduler  # a running apscheduler BaseScheduler

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kind=self.kind,
            floor_aware=True,
            launches_through_admission=True,
            pre_model_hook=False,
            min_period=None,
            expresses="any RFC 5545 schedule floorgate accepts",
        )

    def express(self, schedule: Schedule, now: datetime) -> str:
        return schedule.canonical()

    def read(self, automation_id: str, now: datetime) -> Observation:
        if not getattr(self.scheduler, "running", False):
            return Observation(state="unavailable", text=None, read_at=now, detail="the scheduler is not running")
        job = self.scheduler.get_job(automation_id)
        if job is None:
            return Observation(state="absent", text=None, read_at=now, detail="no live job")
        schedule = getattr(job.trigger, "schedule", None)
        if schedule is None:
            return Observation(state="present", text=str(job.trigger), read_at=now, detail="not a floorgate trigger")
        return Observation(state="present", text=schedule.canonical(), read_at=now)

    def matches(self, observation: Observation, schedule: Schedule, now: datetime) -> bool:
        return rrule_matches(observation, schedule, now)


def rrule_matches(observation: Observation, schedule: Schedule, now: datetime) -> bool:
    """An observation given as RRULE text matches when it means the same instants."""
    if observation.state != "present" or not observation.text:
        return False
    try:
        observed = Schedule.parse(observation.text)
    except InvalidSchedule:
        return False
    return same_instants(observed, schedule, now)
