"""Whether a rule fires at all: a bounded look at the days its date-level parts allow.

dateutil checks UNTIL only on an occurrence it found, so for a rule whose parts never meet (an
hourly rule on the 366th day of January) it walks every period to year 9999: tens of seconds, at
every query. A rule must fire within ``FIRST_FIRE_YEARS`` of DTSTART; the days in that span are
scanned here first (each one a few comparisons), and dateutil is asked only once a day fits.
"""

from __future__ import annotations

import calendar
from collections.abc import Callable
from datetime import date, datetime, timedelta

from ._rrule import Recur

# A rule must fire within this many years of its DTSTART. Every rule that fires at all repeats
# with the calendar's 400-year cycle; the rarest fires a person writes (a 29 February that is a
# Monday) come up to 40 years apart.
FIRST_FIRE_YEARS = 50


def horizon(dtstart: datetime) -> datetime:
    """DTSTART plus ``FIRST_FIRE_YEARS`` (a 29 February moves to the 28th)."""
    return dtstart.replace(year=dtstart.year + FIRST_FIRE_YEARS, day=min(dtstart.day, 28))


def day_filter(recur: Recur, origin: datetime) -> Callable[[date], bool]:
    """A test that a day may hold an occurrence of ``recur`` from DTSTART ``origin``: the rule's
    month, day-of-year, day-of-month and weekday parts (with the parts dateutil takes from DTSTART
    when they are left out), and a DAILY or WEEKLY INTERVAL's stride. It never refuses a day that
    holds one; BYWEEKNO, BYSETPOS and the time parts are left to the walk."""
    r, o = recur, origin
    bymonth = set(r.bymonth)
    bymonthday = set(r.bymonthday)
    byday = set(r.byday)
    if not (r.byweekno or r.byyearday or r.bymonthday or r.byday):
        if r.freq == "YEARLY":
            bymonth = bymonth or {o.month}
            bymonthday = {o.day}
        elif r.freq == "MONTHLY":
            bymonthday = {o.day}
        elif r.freq == "WEEKLY":
            byday = {(None, o.weekday())}
    elif r.freq == "YEARLY":
        if r.byweekno and not (r.byday or r.byyearday or r.bymonthday):
            byday = {(None, o.weekday())}
        if r.bymonthday and not (r.bymonth or r.byweekno or r.byyearday):
            bymonth = {o.month}
    byyearday = set(r.byyearday)
    in_month = r.freq == "MONTHLY" or bool(bymonth)  # an ordinal weekday counts within the month, else the year
    stride = 0
    if r.freq == "DAILY" and r.interval > 1:
        stride = r.interval
    start = o.date()
    week0 = start - timedelta(days=(start.weekday() - r.wkst) % 7)

    def fits(day: date) -> bool:
        if bymonth and day.month not in bymonth:
            return False
        if stride and (day - start).days % stride:
            return False
        if r.freq == "WEEKLY" and r.interval > 1 and ((day - week0).days // 7) % r.interval:
            return False
        if byyearday:
            size = 366 if calendar.isleap(day.year) else 365
            yday = day.timetuple().tm_yday
            if yday not in byyearday and yday - size - 1 not in byyearday:
                return False
        if bymonthday:
            size = calendar.monthrange(day.year, day.month)[1]
            if day.day not in bymonthday and day.day - size - 1 not in bymonthday:
                return False
        if byday:
            weekday = day.weekday()
            if (None, weekday) in byday:
                return True
            if in_month:
                nth, last = (day.day - 1) // 7 + 1, -((calendar.monthrange(day.year, day.month)[1] - day.day) // 7 + 1)
            else:
                yday = day.timetuple().tm_yday
                size = 366 if calendar.isleap(day.year) else 365
                nth, last = (yday - 1) // 7 + 1, -((size - yday) // 7 + 1)
            return (nth, weekday) in byday or (last, weekday) in byday
        return True

    return fits


def first_day(recur: Recur, origin: datetime, until: date) -> date | None:
    """The first day from DTSTART's to ``until`` that ``day_filter`` lets through (None: none)."""
    fits = day_filter(recur, origin)
    day = origin.date()
    one = timedelta(days=1)
    while day <= until:
        if fits(day):
            return day
        day += one
    return None
