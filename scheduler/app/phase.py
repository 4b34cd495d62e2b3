"""Whether a lane runs off its schedule's phase: the readback line that tells an owner a late or
manual start has moved every later run (``wait`` under a floor at least the schedule's gap).

Pure: it reads the plan a readback already built and the lane's last start; nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime, timedelta, timezone

from floorgate.admission import StartKind, StartRecord, WhenDenied
from floorgate.admission.clock import ceil_second, iso
from floorgate.admission.intervals import format_interval

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
    *,
    now: datetime | None = None,
) -> str | None:
    """``runs at 23:57 UTC instead of 23:40 since the manual start of ...`` when the next run waits
    for the floor instead of starting on a fire of its schedule, None when it keeps the phase.
    Times are in the schedule's zone, named once; the run's date precedes it when it is not on
    ``now``'s day (the fire's time is a time of day: the phase the run left).

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
    runs, scheduled = ceil_second(next_run).astimezone(zone), fire  # a coming instant: never shown early
    origin = (moved_since(history(last_start)) if history is not None else None) or last_start
    manual = "manual " if origin.kind is StartKind.MANUAL else ""
    today = now.astimezone(zone).date() if now is not None else runs.date()
    ran = f"{_clock(runs, today)} {zone_name(runs)}"
    return f"runs at {ran} instead of {_clock(scheduled)} since the {manual}start of {iso(origin.anchor_at.replace(microsecond=0))}"


def zone_name(at: datetime) -> str:
    """The IANA name of an aware time's zone (``UTC`` for UTC and a fixed offset's own name)."""
    key = getattr(at.tzinfo, "key", None)
    return key if isinstance(key, str) else (at.tzname() or "UTC")


def _clock(at: datetime, day: date | None = None) -> str:
    """``09:00`` (seconds only when set), preceded by the date when ``at`` is not on ``day``."""
    clock = at.strftime("%H:%M:%S" if at.second or at.microsecond else "%H:%M")
    return clock if day is None or at.date() == day else f"{at.date().isoformat()} {clock}"


# Steps a suggested floor is rounded down to, largest first: values an owner would write.
_STEPS = tuple(timedelta(seconds=s) for s in (43_200, 21_600, 3_600, 1_800, 900, 600, 300, 60, 30, 15, 10, 5, 1))


def phase_keeping_floor(gap: timedelta, fires: int = 1) -> timedelta | None:
    """A floor a little shorter than ``fires`` of a schedule's shortest ``gap``, rounded down to a
    value an owner would write (24h -> 23h, 23h -> 22h, 1h -> 55m, 15m -> 14m; two gaps of 1m ->
    1m55s): under ``wait`` each run after a late one comes earlier by the difference until it is
    back on a fire, and under ``skip`` a fire's small lateness skips no fire more. None when no
    whole-second floor lies between ``fires - 1`` gaps and ``fires`` gaps."""
    target = gap * fires - max(gap / 24, timedelta(seconds=1))
    step = next((s for s in _STEPS if s <= gap / 12), _STEPS[-1])
    rounded = target // step * step
    return rounded if rounded > gap * (fires - 1) else None


def phase_warning(floor: timedelta, gap: timedelta, *, lane: str = "") -> str:
    """The one line that warns a floor at least a schedule's shortest gap moves its time of day
    after one late or manual start, and what keeps it; ``lane`` names the automation when the
    line speaks of one among several (``policy set`` on a goal).

    A floor within one gap: ``skip``, or a floor a little shorter than the gap (every fire runs,
    and under ``wait`` the time comes back). A floor over several gaps says the owner wants fewer
    runs than fires: first ``skip``, which keeps that and the time of day, with a floor a little
    under that many gaps where a fire's small lateness would skip one fire more; then, named as
    the change it is, a floor shorter than one gap (every fire runs)."""
    fires = -(-floor // gap)  # the gaps the floor spans, rounded up: every fires-th fire runs
    who = f"{lane}: " if lane else ""
    head = (
        f"{who}the floor ({format_interval(floor)}) is at least this schedule's shortest gap ({format_interval(gap)}): "
        f"one late or manual start moves every later run off the schedule's time of day; to keep it, pass --when-denied skip "
    )
    keep = phase_keeping_floor(gap, fires)
    if fires > 1:
        # A floor close under that many gaps skips one fire more after a fire a moment late.
        under = f" and a floor a little under {fires} gaps (e.g. {format_interval(keep)})" if keep is not None and floor > keep else ""
        one = phase_keeping_floor(gap)
        instead = (
            f"; to run every fire instead, a floor a little shorter than the gap (e.g. {format_interval(one)})" if one is not None else ""
        )
        return f"{head}(a fire inside the floor is skipped for the next one: every {_ordinal(fires)} fire runs){under}{instead}"
    # The floor is the owner's bound: the advice that keeps it comes first.
    shorter = (
        f", or set the floor a little shorter (e.g. {format_interval(keep)}: the time comes back within days)" if keep is not None else ""
    )
    return f"{head}(a fire inside the floor is skipped for the next one){shorter}"


def _ordinal(n: int) -> str:
    """``2nd``, ``3rd``, ``11th``, ``21st``."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
