"""A MONTHLY rule's wall times by hand, one month at a time: what dateutil yields for the rule
``_dateutil.build_rules`` writes out (every part taken from DTSTART where the rule leaves it out),
without building a dateutil rule or its year's day masks on every walk (the cost of a cold query).

Within a month: the days that pass BYMONTH, BYMONTHDAY and BYDAY (plain weekdays, or numbered
within the month; a mix of both is their union, as the engine reads it), each at every time of
BYHOUR x BYMINUTE x BYSECOND, in order; BYSETPOS picks from that list (1 the first, -1 the last).
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from datetime import datetime

from ._rrule import Recur

_LAST_YEAR = 9999  # datetime's; dateutil stops there too


def handles(recur: Recur) -> bool:
    """Whether ``monthly`` computes this rule (a MONTHLY rule; BYWEEKNO and BYYEARDAY never are)."""
    return recur.freq == "MONTHLY"


def monthly(
    recur: Recur, start: datetime, origin: datetime, until: datetime | None, is_date: bool, walk_from: datetime | None
) -> Iterator[datetime]:
    """Wall times from the month of ``start`` (a period start), every INTERVAL months, at or after
    ``walk_from`` (all when None), up to ``until`` inclusive; DTSTART is ``origin``."""
    r, o = recur, origin
    hours = (o.hour,) if is_date or not r.byhour else tuple(sorted(r.byhour))
    minutes = (o.minute,) if is_date or not r.byminute else tuple(sorted(r.byminute))
    seconds = (o.second,) if is_date or not r.bysecond else tuple(sorted(r.bysecond))
    times = [(h, m, s) for h in hours for m in minutes for s in seconds]
    bymonthday = r.bymonthday
    if not (r.bymonthday or r.byday):
        bymonthday = (o.day,)
    plain = frozenset(w for n, w in r.byday if n is None)
    numbered = frozenset((n, w) for n, w in r.byday if n is not None)
    byday = bool(r.byday)
    bymonth = frozenset(r.bymonth)
    setpos = r.bysetpos
    year, month = start.year, start.month
    step = r.interval
    while year <= _LAST_YEAR:
        if not bymonth or month in bymonth:
            first_weekday, size = calendar.monthrange(year, month)
            days = []
            for day in range(1, size + 1):
                if bymonthday and day not in bymonthday and day - size - 1 not in bymonthday:
                    continue
                if byday:
                    weekday = (first_weekday + day - 1) % 7
                    if (
                        weekday not in plain
                        and ((day - 1) // 7 + 1, weekday) not in numbered
                        and (-((size - day) // 7 + 1), weekday) not in numbered
                    ):
                        continue
                days.append(day)
            found = [datetime(year, month, d, h, m, s) for d in days for h, m, s in times]
            if setpos:
                n = len(found)
                picked = {found[p - 1 if p > 0 else p] for p in setpos if -n <= p <= n}
                found = sorted(picked)
            for value in found:
                if until is not None and value > until:
                    return
                if walk_from is None or value >= walk_from:
                    yield value
        month += step
        year += (month - 1) // 12
        month = (month - 1) % 12 + 1
