"""An ``external`` host: an agent app that keeps its own timer (for example a desktop app's
automations) and that floorgate can neither write nor read by itself.

Apply only states the desired schedule: the owner sets it in the app (``Applied.armed`` is False).
Readback is what the owner reports from the app with each read, as a neutral RRULE; an explicit
"unavailable" clears earlier facts, no report keeps them (``read`` returns None). floorgate never
fills a missing observation from anything else. The app wakes the model itself, so the guarantee
is ``schedule-only`` unless a pre-model hook has been seen answering for the automation.
"""

from __future__ import annotations

from datetime import datetime

from ._exact import ExactRrule, exact_capabilities
from .contract import Applied, Observation, ObservationState, Reported, TimerKind
from .errors import InvalidSchedule
from .schedule import Schedule


class ExternalTimer(ExactRrule):
    """The timer host of an external app, through its owner."""

    kind = TimerKind.EXTERNAL
    CAPABILITIES = exact_capabilities(
        floorgate_runs_it=False, summary="RRULE schedules, set by the owner in the app and reported back by the owner"
    )

    def apply(self, automation_id: str, schedule: Schedule, now: datetime) -> Applied:
        form = self.expressed(schedule, now)
        return Applied(
            armed=False,
            host_form=form.text,
            detail=f"set this schedule for {automation_id} in the app, then acknowledge it with the app's current schedule",
        )

    def read(self, automation_id: str, now: datetime, reported: Reported | None = None) -> Observation | None:
        if reported is None:
            return None
        if reported.unavailable:
            return Observation(state=ObservationState.UNAVAILABLE, text=None, read_at=now, detail="reported unavailable")
        if reported.current_rrule is None:
            return None
        try:
            text = Schedule.parse(reported.current_rrule).canonical()
        except InvalidSchedule as exc:
            raise InvalidSchedule(f"--current-rrule: {exc}") from None
        return Observation(state=ObservationState.PRESENT, text=text, read_at=now)

    def observation(self, current_rrule: str | None, unavailable: bool, now: datetime) -> Observation | None:
        """``read`` with the report given as its two parts (None: nothing was reported)."""
        return self.read("", now, Reported(current_rrule=current_rrule, unavailable=unavailable))

    def remove(self, automation_id: str) -> None:
        """Nothing floorgate can remove: the owner deletes the app's automation (``can_apply`` False)."""
