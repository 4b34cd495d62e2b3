"""Which rules the engine runs: refusals of rules whose meaning floorgate will not guess, or that
never fire (checked at parse, from the rule alone, before any occurrence is computed).

Readings and refusals are listed in ``_engine``'s docstring (and README).
"""

from __future__ import annotations

from ._rrule import Recur
from .errors import UnsupportedSchedule

NOMINAL_DAYS = {"YEARLY": 366, "MONTHLY": 31, "WEEKLY": 7, "DAILY": 1, "HOURLY": 1 / 24, "MINUTELY": 1 / 1440, "SECONDLY": 1 / 86400}
# A step longer than a century is a typo, and dateutil's arithmetic overflows on larger ones.
_MAX_STEP_DAYS = 36_600
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _set_size_bound(recur: Recur) -> int:
    """At most how many instances one FREQ period of ``recur`` holds (an upper bound: parts that
    only filter are ignored; a part left out takes one value from DTSTART)."""
    times = {"YEARLY": 3, "MONTHLY": 3, "WEEKLY": 3, "DAILY": 3, "HOURLY": 2, "MINUTELY": 1, "SECONDLY": 0}[recur.freq]
    size = 1
    for values in (recur.bysecond, recur.byminute, recur.byhour)[:times]:
        size *= len(values) or 1
    if recur.freq == "WEEKLY":
        size *= len(recur.byday) or 1
    elif recur.freq == "MONTHLY":
        size *= 31 if recur.byday else (len(recur.bymonthday) or 1)
    elif recur.freq == "YEARLY":
        if recur.byday or recur.byyearday or recur.byweekno:
            size *= 366
        else:
            size *= (len(recur.bymonthday) or 1) * (len(recur.bymonth) or 1)
    return size


def check_supported(recur: Recur) -> None:
    """Refuse rules whose meaning floorgate will not guess (see ``_engine``'s docstring)."""
    if recur.freq == "YEARLY" and recur.byweekno and recur.interval > 1:
        raise UnsupportedSchedule(
            "RRULE INTERVAL: with FREQ=YEARLY and BYWEEKNO, INTERVAL > 1 is ambiguous (ISO week-years or "
            "calendar years); floorgate refuses it rather than risk a wrong fire time"
        )
    reach = recur.interval * NOMINAL_DAYS[recur.freq]
    if reach > _MAX_STEP_DAYS:
        raise UnsupportedSchedule(
            f"RRULE INTERVAL: {recur.interval} x {recur.freq} steps more than {_MAX_STEP_DAYS // 366} years between fires; give a smaller INTERVAL"
        )
    if recur.bysetpos:
        most = _set_size_bound(recur)
        if all(abs(p) > most for p in recur.bysetpos):
            raise UnsupportedSchedule(
                f"RRULE BYSETPOS: a {recur.freq} period of this rule holds at most {most} occurrence(s), so "
                f"BYSETPOS={','.join(map(str, recur.bysetpos))} never selects one: this rule never fires"
            )
    if recur.bymonth and recur.bymonthday and all(abs(d) > _MONTH_DAYS[m - 1] for m in recur.bymonth for d in recur.bymonthday):
        raise UnsupportedSchedule("RRULE BYMONTHDAY: no month in BYMONTH has that day: this rule never fires")
    plain = any(n is None for n, _ in recur.byday)
    ordinal = any(n is not None for n, _ in recur.byday)
    if plain and ordinal and recur.bysetpos:
        raise UnsupportedSchedule("RRULE BYDAY: plain and numbered weekdays together with BYSETPOS are not supported; split the rule")
