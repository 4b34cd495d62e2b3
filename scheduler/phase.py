"""Whether a lane runs off its schedule's phase: the readback line that tells an owner a late or
manual start has moved every later run (``wait`` under a floor at least the schedule's gap).

Pure: it reads the plan a readback already built and the lane's last start; nothing is stored.
"""

from __future__ import annotations

from datetime import datetime, timezone

from floorgate.admission import StartRecord, WhenDenied
from floorgate.admission.clock import iso

from .preview import FloorMeeting, PlanInputs


def off_phase(plan: PlanInputs | None, next_run: datetime | None, last_start: StartRecord | None) -> str | None:
    """``runs at 23:57 instead of 23:40 since the manual start of ...`` when the next run waits
    for the floor instead of starting on a fire of its schedule, None when it keeps the phase.

    Only floorgate's own timer under ``wait`` moves a run to the floor's end (a crontab fire waits
    at most a short launch bound; ``skip`` keeps the fires' times).
    """
    if plan is None or next_run is None or last_start is None or plan.meeting is not FloorMeeting.COALESCE:
        return None
    if plan.when_denied is not WhenDenied.WAIT or plan.next_eligible_at is None or next_run != plan.next_eligible_at:
        return None
    fire = plan.schedule.last_at_or_before(next_run)
    if fire is None or fire.astimezone(timezone.utc) == next_run.astimezone(timezone.utc):
        return None  # the floor opens exactly on a fire: on phase
    zone = fire.tzinfo
    runs, scheduled = next_run.astimezone(zone), fire
    manual = "manual " if last_start.manual_reason is not None else ""
    return f"runs at {_clock(runs)} instead of {_clock(scheduled)} since the {manual}start of {iso(last_start.anchor_at)}"


def _clock(at: datetime) -> str:
    return at.strftime("%H:%M:%S" if at.second or at.microsecond else "%H:%M")
