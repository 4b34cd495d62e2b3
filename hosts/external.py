"""An ``external`` host: an agent app that keeps its own timer (for example a desktop app's
automations) and that floorgate cannot read by itself.

Its adapter takes the app's current schedule as a neutral RRULE argument supplied with each
readback; an explicit "unavailable" clears earlier facts, no argument keeps them. floorgate never
fills a missing observation from anything else. The app wakes the model itself, so the guarantee
is ``schedule-only`` unless a pre-model hook has been seen answering for the automation.
"""

from __future__ import annotations

from datetime import datetime

from .apscheduler_timer import rrule_matches
from .contract import Capabilities, Observation
from .errors import InvalidSchedule
from .schedule import Schedule


class ExternalTimer:
    kind = "external"

    def capabilities(self) -> Capabilities:
        return Capabilities(
            kind=self.kind,
            floor_aware=False,
            launches_through_admission=False,
            pre_model_hook=False,
            min_period=None,
            expresses="RRULE schedules, applied by the owner in the app",
        )

    def express(self, schedule: Schedule, now: datetime) -> str:
        return schedule.canonical()

    def observation(self, current_rrule: str | None, unavailable: bool, now: datetime) -> Observation | None:
        """Turn the supplied argument into an observation (None: nothing was supplied)."""
        if unavailable:
            return Observation(state="unavailable", text=None, read_at=now, detail="reported unavailable")
        if current_rrule is None:
            return None
        try:
            text = Schedule.parse(current_rrule).canonical()
        except InvalidSchedule as exc:
            raise InvalidSchedule(f"--current-rrule: {exc}") from None
        return Observation(state="present", text=text, read_at=now)

    def matches(self, observation: Observation, schedule: Schedule, now: datetime) -> bool:
        return rrule_matches(observation, schedule, now)
