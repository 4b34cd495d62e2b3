"""Floor-compatible desired schedules: raised when the host can express it exactly, else held.

A schedule whose occurrences come closer than the floor is never silently shortened or
approximated. Simple interval rules (FREQ with INTERVAL only) are raised to the smallest multiple
of their period that is at least the floor: a subset of the owner's fire times, at the same phase.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from ._rrule import FIXED_PERIOD, Recur
from .contract import HORIZON
from .schedule import Schedule

_SAMPLE = 20_000


@dataclass(frozen=True)
class Desired:
    """The schedule a host should arm, or why it is held. ``raised`` tells that it differs from
    the owner's schedule because of the floor."""

    schedule: Schedule | None
    raised: bool
    hold_reason: str | None


def min_gap(schedule: Schedule, now: datetime, horizon: timedelta = HORIZON) -> tuple[timedelta, datetime] | None:
    """The smallest start-to-start gap over the horizon (sampled up to 20,000 fires) and where."""
    # In UTC: Python subtracts two datetimes of one zone as wall-clock times, which would hide
    # the 23-hour day of a DST change.
    last = schedule.last_at_or_before(now)
    previous = last.astimezone(timezone.utc) if last is not None else None
    best: tuple[timedelta, datetime] | None = None
    end = now + horizon
    for count, local in enumerate(schedule._engine.iterate(now)):
        occurrence = local.astimezone(timezone.utc)
        if occurrence > end or count >= _SAMPLE:
            break
        if previous is not None:
            gap = occurrence - previous
            if best is None or gap < best[0]:
                best = (gap, local)
        previous = occurrence
    return best


def floor_compatible(schedule: Schedule, floor: timedelta, now: datetime) -> Desired:
    """The owner's schedule if every gap is at least ``floor``, else a raised one, else a hold."""
    if floor <= timedelta(0):
        return Desired(schedule, False, None)
    gap = min_gap(schedule, now)
    if gap is None or gap[0] >= floor:
        return Desired(schedule, False, None)
    recur = schedule.recur
    simple = (
        recur is not None
        and recur.freq in FIXED_PERIOD
        and recur.count is None
        and not (
            recur.bymonth
            or recur.byweekno
            or recur.byyearday
            or recur.bymonthday
            or recur.byday
            or recur.byhour
            or recur.byminute
            or recur.bysecond
            or recur.bysetpos
        )
        and not schedule.exdates
    )
    if simple and recur is not None:
        period = FIXED_PERIOD[recur.freq] * recur.interval
        factor = -(-floor // period)  # ceiling division of timedeltas
        freq, interval = _coarsest(recur.freq, recur.interval * factor, schedule.dtstart)
        raised = Schedule(
            dtstart=schedule.dtstart,
            tzid=schedule.tzid,
            is_date=schedule.is_date,
            recur=Recur(freq=freq, interval=interval, until=recur.until, wkst=recur.wkst),
        )
        check = min_gap(raised, now)
        if check is None or check[0] >= floor:
            return Desired(raised, True, None)
    where = gap[1].isoformat()
    return Desired(
        None,
        False,
        f"occurrences come {_fmt(gap[0])} apart (at {where}), closer than the floor {_fmt(floor)}, and no "
        "floor-compatible form of this schedule exists; edit the schedule or the floor",
    )


def _coarsest(freq: str, interval: int, dtstart: datetime) -> tuple[str, int]:
    """Write e.g. every 60 minutes as hourly (same instants in wall-clock terms) so hosts with
    coarser units can express it."""
    steps = (("SECONDLY", 60, "MINUTELY", dtstart.microsecond == 0), ("MINUTELY", 60, "HOURLY", dtstart.second == 0))
    for small, size, big, aligned in steps:
        if freq == small and interval % size == 0 and aligned:
            freq, interval = big, interval // size
    if freq == "HOURLY" and interval % 24 == 0:
        freq, interval = "DAILY", interval // 24
    return freq, interval


def _fmt(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0 and seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
