"""What the hosts that take any schedule as its own RRULE text share (floorgate's APScheduler
timers, an external app's): every ``Feature`` is expressed, as the schedule's canonical text, and
an observation matches when its RRULE text means the same instants.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from .contract import Capabilities, Expressed, Held, Observation, ObservationState, same_instants
from .errors import InvalidSchedule, UnsupportedSchedule
from .schedule import Schedule


class ExactRrule:
    """The shared part of an RRULE host's ``TimerHost`` contract (see ``hosts.contract``); the
    subclass declares ``CAPABILITIES`` and the rest (apply, read, remove)."""

    CAPABILITIES: ClassVar[Capabilities]

    def capabilities(self) -> Capabilities:
        return self.CAPABILITIES

    def express(self, schedule: Schedule, now: datetime) -> Expressed | Held:
        return Expressed(schedule.canonical())

    def expressed(self, schedule: Schedule, now: datetime) -> Expressed:
        """``express``, for ``apply``: a schedule this host cannot express raises ``UnsupportedSchedule``."""
        form = self.express(schedule, now)
        if isinstance(form, Held):
            raise UnsupportedSchedule(form.reason)
        return form

    def matches(self, observation: Observation, schedule: Schedule, now: datetime) -> bool:
        return rrule_matches(observation, schedule, now)


def rrule_matches(observation: Observation, schedule: Schedule, now: datetime) -> bool:
    """An observation given as RRULE text matches when it means the same instants."""
    if observation.state != ObservationState.PRESENT or not observation.text:
        return False
    try:
        observed = Schedule.parse(observation.text)
    except InvalidSchedule:
        return False
    return same_instants(observed, schedule, now)
