"""What the hosts that take any schedule as its own RRULE text share (floorgate's APScheduler
timers, an external app's): every ``Feature`` is expressed, as the schedule's canonical text, and
an observation matches when its RRULE text means the same instants.
"""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from .contract import Capabilities, Expressed, Feature, Held, Observation, ObservationState, same_instants
from .errors import InvalidSchedule, UnsupportedSchedule
from .schedule import Schedule


class ExactRrule:
    """The shared part of an RRULE host's ``TimerHost`` contract (see ``hosts.contract``); the
    subclass declares ``CAPABILITIES`` and the rest (apply, read, remove)."""

    CAPABILITIES: ClassVar[Capabilities]

    def capabilities(self) -> Capabilities:
        return self.CAPABILITIES

    @classmethod
    def firing_problem(cls) -> str | None:
        """None: nothing on this machine keeps these timers from firing (floorgate's own timers show
        their liveness in ``floorgate run``'s heartbeats, an app's in its hook's answers)."""
        return None

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


def exact_capabilities(*, floorgate_runs_it: bool, summary: str) -> Capabilities:
    """The capabilities of a host that takes every schedule as its exact RRULE text (every ``Feature``).

    ``floorgate_runs_it``: the timers live in a running ``floorgate run``, which arms and reads them,
    clamps every fire to the floor and launches the turn (every capability); else they live in an
    app that the owner sets and reports from (none: floorgate is handed the exact RRULE, and whether
    the app honours it is what the readback checks).
    """
    return Capabilities(
        can_apply=floorgate_runs_it,
        can_read_back=floorgate_runs_it,
        armed_by_runtime=floorgate_runs_it,
        launches_turns=floorgate_runs_it,
        floor_aware=floorgate_runs_it,
        expresses=frozenset(Feature),
        summary=summary,
    )


def rrule_matches(observation: Observation, schedule: Schedule, now: datetime) -> bool:
    """An observation given as RRULE text matches when it means the same instants."""
    if observation.state != ObservationState.PRESENT or not observation.text:
        return False
    try:
        observed = Schedule.parse(observation.text)
    except InvalidSchedule:
        return False
    return same_instants(observed, schedule, now)
