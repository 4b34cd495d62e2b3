"""How the walk asks python-dateutil: a rule rebuilt from the start of a FREQ period, with every
part dateutil would derive from DTSTART written out (so that a walk may begin in any period, not
only DTSTART's), and the start of the period that holds a wall time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, Literal

from dateutil import rrule as du

from ._rrule import Recur

FREQ_CODES: dict[str, Literal[0, 1, 2, 3, 4, 5, 6]] = {
    "YEARLY": du.YEARLY,
    "MONTHLY": du.MONTHLY,
    "WEEKLY": du.WEEKLY,
    "DAILY": du.DAILY,
    "HOURLY": du.HOURLY,
    "MINUTELY": du.MINUTELY,
    "SECONDLY": du.SECONDLY,
}
_ORDER = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
_WEEKDAY = (du.MO, du.TU, du.WE, du.TH, du.FR, du.SA, du.SU)


def period_start(recur: Recur, dtstart: datetime, local: datetime) -> datetime:
    """The start of the FREQ period (counted from DTSTART's by INTERVAL) that holds ``local``."""
    r, d = recur, dtstart
    if r.freq == "MONTHLY":
        k = max(0, ((local.year - d.year) * 12 + (local.month - d.month)) // r.interval)
        total = d.month - 1 + k * r.interval
        return datetime(d.year + total // 12, total % 12 + 1, 1)
    if r.freq == "YEARLY":
        k = max(0, (local.year - d.year) // r.interval)
        return datetime(d.year + k * r.interval, 1, 1)
    if r.freq == "WEEKLY":
        base = datetime(d.year, d.month, d.day) - timedelta(days=(d.weekday() - r.wkst) % 7)
        step = timedelta(weeks=r.interval)
    else:
        base = _truncate(d, r.freq)
        step = {
            "SECONDLY": timedelta(seconds=r.interval),
            "MINUTELY": timedelta(minutes=r.interval),
            "HOURLY": timedelta(hours=r.interval),
            "DAILY": timedelta(days=r.interval),
        }[r.freq]
    k = max(0, (local - base) // step)
    return base + k * step


def _truncate(d: datetime, freq: str) -> datetime:
    if freq == "SECONDLY":
        return d.replace(microsecond=0)
    if freq == "MINUTELY":
        return d.replace(second=0, microsecond=0)
    if freq == "HOURLY":
        return d.replace(minute=0, second=0, microsecond=0)
    return d.replace(hour=0, minute=0, second=0, microsecond=0)


@lru_cache(maxsize=65536)
def build_rules(recur: Recur, start: datetime, origin: datetime, until: datetime | None, is_date: bool) -> tuple[du.rrule, ...]:
    """dateutil rules from the period start ``start`` with every part derived from DTSTART
    (``origin``) spelled out; two rules when plain and numbered weekdays must be united."""
    r, o = recur, origin
    byhour = r.byhour or None
    byminute = r.byminute or None
    bysecond = r.bysecond or None
    if is_date:  # RFC 5545: time parts do not apply to a DATE DTSTART
        byhour = byminute = bysecond = None
    level = _ORDER.index(r.freq)
    if byhour is None and level < _ORDER.index("HOURLY"):
        byhour = (o.hour,)
    if byminute is None and level < _ORDER.index("MINUTELY"):
        byminute = (o.minute,)
    if bysecond is None and level < _ORDER.index("SECONDLY"):
        bysecond = (o.second,)
    bymonth = r.bymonth or None
    bymonthday = r.bymonthday or None
    byday = r.byday
    if not (r.byweekno or r.byyearday or r.bymonthday or r.byday):
        if r.freq == "YEARLY":
            bymonth = bymonth or (o.month,)
            bymonthday = (o.day,)
        elif r.freq == "MONTHLY":
            bymonthday = (o.day,)
        elif r.freq == "WEEKLY":
            byday = ((None, o.weekday()),)
    elif r.freq == "YEARLY":
        if r.byweekno and not (r.byday or r.byyearday or r.bymonthday):
            byday = ((None, o.weekday()),)  # reading: DTSTART's weekday in the listed weeks
        if r.bymonthday and not (r.bymonth or r.byweekno or r.byyearday):
            bymonth = (o.month,)  # reading: DTSTART's month
    common: dict[str, Any] = dict(
        dtstart=start,
        interval=r.interval,
        wkst=r.wkst,
        until=until,
        bysetpos=r.bysetpos or None,
        bymonth=bymonth,
        bymonthday=bymonthday,
        byyearday=r.byyearday or None,
        byweekno=r.byweekno or None,
        byhour=byhour,
        byminute=byminute,
        bysecond=bysecond,
        cache=False,
    )
    plain = tuple(w for n, w in byday if n is None)
    numbered = tuple((n, w) for n, w in byday if n is not None)
    groups: list[list] = []  # type: ignore[type-arg]
    if plain and numbered:  # dateutil yields nothing for the mix: generate each half, merge
        groups = [[_WEEKDAY[w] for w in plain], [_WEEKDAY[w](n) for n, w in numbered]]
    else:
        groups = [[_WEEKDAY[w] if n is None else _WEEKDAY[w](n) for n, w in byday] or None]  # type: ignore[list-item]
    return tuple(du.rrule(FREQ_CODES[r.freq], byweekday=g, **common) for g in groups)
