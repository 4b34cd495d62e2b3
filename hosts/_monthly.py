"""A MONTHLY rule's wall times by hand, one month at a time: what dateutil yields for the rule
``_dateutil.build_rules`` writes out (every part taken from DTSTART where the rule leaves it out),
without building a dateutil rule or its year's day masks on every walk (the cost of a cold query).

Within a month: the days that pass BYMONTH, BYMONTHDAY and BYDAY (plain weekdays, or numbered
within the month; a mix of both is their union, as the engine reads it), each at every time of
BYHOUR x BYMINUTE x BYSECOND, in order; BYSETPOS picks from that list (1 the first, -1 the last).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime

from ._rrule import Recur

_LAST_YEAR = 9999  # datetime's; dateutil stops there too
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def handles(recur: Recur) -> bool:
    """Whether ``monthly`` computes this rule (a MONTHLY rule; BYWEEKNO and BYYEARDAY never are)."""
    return recur.freq == "MONTHLY"


def month_days(
    first_weekday: int, size: int, bymonthday: tuple[int, ...], plain: tuple[int, ...], numbered: tuple[tuple[int, int], ...]
) -> list[int]:
    """The days of a month (``size`` days, its first a ``first_weekday``, 0=MO) that pass
    BYMONTHDAY (a negative day counts from the month's end) and BYDAY (``plain`` weekdays, or
    ``numbered`` (n, weekday): the n-th in the month, from its end when negative), in order;
    computed from the weekday arithmetic, not by testing every day."""
    if plain and not numbered and not bymonthday:
        # each week's matching days in order, week after week: already sorted
        offsets = sorted((w - first_weekday) % 7 + 1 for w in plain)
        return [d for week in (0, 7, 14, 21, 28) for o in offsets if (d := o + week) <= size]
    if plain or numbered:
        found: set[int] = set()
        for w in plain:
            found.update(range(1 + (w - first_weekday) % 7, size + 1, 7))
        last_weekday = (first_weekday + size - 1) % 7
        for n, w in numbered:
            day = 1 + (w - first_weekday) % 7 + 7 * (n - 1) if n > 0 else size - (last_weekday - w) % 7 + 7 * (n + 1)
            if 1 <= day <= size:
                found.add(day)
        if bymonthday:
            return sorted(d for d in found if d in bymonthday or d - size - 1 in bymonthday)
        return sorted(found)
    return sorted({d if d > 0 else size + 1 + d for d in bymonthday if -size <= d <= size})


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
    per_day = len(times)
    bymonthday = r.bymonthday
    if not (r.bymonthday or r.byday):
        bymonthday = (o.day,)
    plain = tuple(sorted({w for n, w in r.byday if n is None}))
    numbered = tuple((n, w) for n, w in r.byday if n is not None)
    bymonth = frozenset(r.bymonth)
    setpos = r.bysetpos
    year, month = start.year, start.month
    step = r.interval
    last = (_LAST_YEAR, 12) if until is None else (until.year, until.month)
    while (year, month) <= last:  # a month past UNTIL's holds nothing (a rule that stops firing ends here)
        if not bymonth or month in bymonth:
            size = 29 if month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else _MONTH_DAYS[month - 1]
            days = month_days(date(year, month, 1).weekday(), size, bymonthday, plain, numbered)
            if setpos:
                # BYSETPOS picks from the month's (day, time) list by position: only the picked
                # ones become datetimes.
                total = len(days) * per_day
                picked = sorted({p - 1 if p > 0 else total + p for p in setpos if -total <= p <= total})
                chosen = [(days[i // per_day], times[i % per_day]) for i in picked]
            else:
                if walk_from is not None and walk_from.year == year and walk_from.month == month:
                    days = [d for d in days if d >= walk_from.day]  # earlier days are before walk_from
                chosen = [(d, t) for d in days for t in times]
            for d, (h, m, s) in chosen:
                value = datetime(year, month, d, h, m, s)
                if until is not None and value > until:
                    return
                if walk_from is None or value >= walk_from:
                    yield value
        month += step
        year += (month - 1) // 12
        month = (month - 1) % 12 + 1
