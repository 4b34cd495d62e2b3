"""Whether a lane runs off its schedule's phase: the readback line that tells an owner a late or
manual start has moved every later run (``wait`` under a floor at least the schedule's gap).

Pure: it reads the plan a readback already built and the lane's last start; nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone

from floorgate.admission import StartKind, StartRecord, WhenDenied
from floorgate.admission.clock import iso

from .preview import FloorMeeting, PlanInputs

# A start reserved this long after the fire it stands for ran off its fire's time (a run that
# waited for a floor); an automatic start on time is reserved within milliseconds of its fire.
ON_TIME = timedelta(minutes=1)


def moved_since(starts: Sequence[StartRecord]) -> StartRecord | None:
    """Of a lane's starts, newest first: the start that moved it off its phase, the oldest of the
    latest run of starts that were manual or waited for a floor (None: the newest ran on time)."""
    origin = None
    for start in starts:
        if start.kind is not StartKind.MANUAL and start.anchor_at - start.trigger_time < ON_TIME:
            break
        origin = start
    return origin


def off_phase(
    plan: PlanInputs | None,
    next_run: datetime | None,
    last_start: StartRecord | None,
    history: Callable[[StartRecord], Sequence[StartRecord]] | None = None,
) -> str | None:
    """``runs at 23:57 instead of 23:40 since the manual start of ...`` when the next run waits
    for the floor instead of starting on a fire of its schedule, None when it keeps the phase.

    Only floorgate's own timer under ``wait`` moves a run to the floor's end (a crontab fire waits
    at most a short launch bound; ``skip`` keeps the fires' times). ``history``: the starts of
    the last start's lane, newest first, read only when the lane is off its phase, to name the
    start that moved it (``moved_since``) rather than the latest of its consequences.
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
    origin = (moved_since(history(last_start)) if history is not None else None) or last_start
    manual = "manual " if origin.kind is StartKind.MANUAL else ""
    return f"runs at {_clock(runs)} instead of {_clock(scheduled)} since the {manual}start of {iso(origin.anchor_at)}"


def _clock(at: datetime) -> str:
    return at.strftime("%H:%M:%S" if at.second or at.microsecond else "%H:%M")
