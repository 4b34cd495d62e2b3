"""Occurrence generation over python-dateutil, fast for rules whose DTSTART is years old.

dateutil walks every occurrence from DTSTART on each query. For rules without COUNT the
occurrence set repeats per FREQ period, so a query restarts the walk at a period boundary close to
the asked instant, with every part dateutil would derive from DTSTART written out explicitly; the
answers are the same occurrences (checked against raw dateutil over the whole corpus and by a
hypothesis property). COUNT rules are finite and are walked from DTSTART.

Local wall times become instants with zoneinfo and fold=0: a time in a DST gap takes the offset
before the gap (RFC 5545 erratum EID 4271: shifted forward), a repeated time its first occurrence;
an instant already produced is never produced twice.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Iterator

from dateutil import rrule as du

from ._rrule import Recur

_FREQ = {
    "YEARLY": du.YEARLY,
    "MONTHLY": du.MONTHLY,
    "WEEKLY": du.WEEKLY,
    "DAILY": du.DAILY,
    "HOURLY": du.HOURLY,
    "MINUTELY": du.MINUTELY,
    "SECONDLY": du.SECONDLY,
}
_WEEKDAY = (du.MO, du.TU, du.WE, du.TH, du.FR, du.SA, du.SU)
_SLACK = timedelta(hours=3)  # wider than any DST shift between a wall time and its instant


class Engine:
    """Occurrences of one recurrence: DTSTART as naive wall time in ``zone`` (None: floating)."""

    def __init__(self, dtstart: datetime, recur: Recur, zone: tzinfo | None, exdates: frozenset[datetime], is_date: bool):
        self.dtstart = dtstart
        self.recur = recur
        self.zone = zone
        self.exdates = exdates
        self.is_date = is_date
        self._until_local = self._local_until()
        self._until_instant = recur.until if isinstance(recur.until, datetime) and recur.until.tzinfo else None
        self._jumpable = recur.count is None

    # -- public --------------------------------------------------------------------------------
    def iterate(self, after: datetime | None = None) -> Iterator[datetime]:
        """Occurrences in order, as aware datetimes in the zone (naive when floating), strictly
        after the instant ``after`` when given."""
        if after is None or not self._jumpable:
            start_rule = self._rule(self.dtstart, explicit=False)
            walk_from = None
        else:
            local_after = self._to_local(after) - _SLACK
            start = self._period_start(local_after)
            start_rule = self._rule(start, explicit=True) if start is not None else self._rule(self.dtstart, explicit=False)
            walk_from = local_after
        naive_iter = start_rule.xafter(walk_from, inc=True) if walk_from is not None else iter(start_rule)
        last: datetime | None = None
        for naive in naive_iter:
            if naive in self.exdates:
                continue
            instant = self._instant(naive)
            if self._until_instant is not None and instant > self._until_instant:
                return
            if last is not None and instant <= last:
                continue  # a DST gap shifted this onto (or before) an occurrence already produced
            last = instant
            if after is not None and instant <= after:
                continue
            yield instant

    def next_after(self, after: datetime) -> datetime | None:
        for occurrence in self.iterate(after):
            return occurrence
        return None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        """The latest occurrence at or before ``at`` (None if there is none)."""
        if not self._jumpable:
            found = None
            for occurrence in self.iterate():
                if occurrence > at:
                    break
                found = occurrence
            return found
        back = self._period_length_guess()
        while True:
            probe = at - back
            if self._to_local(probe) < self.dtstart - _SLACK:
                probe = None
            found = None
            for occurrence in self.iterate(probe - timedelta(microseconds=1) if probe is not None else None):
                if occurrence > at:
                    break
                found = occurrence
            if found is not None or probe is None:
                return found
            back *= 4

    # -- internals -----------------------------------------------------------------------------
    def _local_until(self) -> datetime | None:
        until = self.recur.until
        if until is None:
            return None
        if isinstance(until, datetime):
            if until.tzinfo is not None:
                if self.zone is None:
                    return until.replace(tzinfo=None)
                # Walk a little past UNTIL in wall time; instants are cut exactly in iterate().
                return until.astimezone(self.zone).replace(tzinfo=None) + timedelta(hours=3)
            return until
        return datetime(until.year, until.month, until.day, 23, 59, 59) if not self.is_date else datetime(until.year, until.month, until.day)

    def _to_local(self, instant: datetime) -> datetime:
        if self.zone is None:
            return instant.replace(tzinfo=None) if instant.tzinfo is not None else instant
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def _instant(self, naive: datetime) -> datetime:
        if self.zone is None:
            return naive
        return naive.replace(tzinfo=self.zone).astimezone(timezone.utc).astimezone(self.zone)

    def _period_length_guess(self) -> timedelta:
        r = self.recur
        unit = {
            "SECONDLY": timedelta(seconds=1),
            "MINUTELY": timedelta(minutes=1),
            "HOURLY": timedelta(hours=1),
            "DAILY": timedelta(days=1),
            "WEEKLY": timedelta(weeks=1),
            "MONTHLY": timedelta(days=31),
            "YEARLY": timedelta(days=366),
        }[r.freq]
        return unit * r.interval + _SLACK

    def _period_start(self, local: datetime) -> datetime | None:
        """The start of the latest FREQ period (counted from DTSTART by INTERVAL) at or before
        ``local``; None when that is DTSTART's own period (walk the original rule then)."""
        r, d = self.recur, self.dtstart
        if local <= d:
            return None
        if r.freq in ("SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY"):
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
            k = (local - base) // step
            return base + k * step if k > 0 else None
        if r.freq == "MONTHLY":
            months = (local.year - d.year) * 12 + (local.month - d.month)
            k = months // r.interval
            if k <= 0:
                return None
            total = d.month - 1 + k * r.interval
            return datetime(d.year + total // 12, total % 12 + 1, 1)
        k = (local.year - d.year) // r.interval
        return datetime(d.year + k * r.interval, 1, 1) if k > 0 else None

    def _rule(self, start: datetime, *, explicit: bool) -> du.rrule:
        return _build_rule(self.recur, start, self.dtstart if explicit else None, self._until_local, self.is_date)


def _truncate(d: datetime, freq: str) -> datetime:
    if freq == "SECONDLY":
        return d.replace(microsecond=0)
    if freq == "MINUTELY":
        return d.replace(second=0, microsecond=0)
    if freq == "HOURLY":
        return d.replace(minute=0, second=0, microsecond=0)
    return d.replace(hour=0, minute=0, second=0, microsecond=0)


@lru_cache(maxsize=65536)
def _build_rule(recur: Recur, start: datetime, origin: datetime | None, until: datetime | None, is_date: bool) -> du.rrule:
    """A dateutil rule from ``start``; with ``origin`` (the real DTSTART) every part dateutil would
    derive from DTSTART is spelled out, so a period-boundary ``start`` gives the same occurrences."""
    r = recur
    kwargs: dict = dict(  # type: ignore[type-arg]
        dtstart=start,
        interval=r.interval,
        wkst=r.wkst,
        count=r.count,
        until=until,
        bysetpos=r.bysetpos or None,
        bymonth=r.bymonth or None,
        bymonthday=r.bymonthday or None,
        byyearday=r.byyearday or None,
        byweekno=r.byweekno or None,
        byweekday=[_WEEKDAY[w](n) if n is not None else _WEEKDAY[w] for n, w in r.byday] or None,
        byhour=r.byhour or None,
        byminute=r.byminute or None,
        bysecond=r.bysecond or None,
        cache=False,
    )
    if is_date:
        # RFC 5545: BYHOUR/BYMINUTE/BYSECOND do not apply to a DATE DTSTART.
        kwargs.update(byhour=None, byminute=None, bysecond=None)
    if origin is not None:
        o = origin
        if not (r.byweekno or r.byyearday or r.bymonthday or r.byday):
            if r.freq == "YEARLY":
                kwargs["bymonth"] = kwargs["bymonth"] or (o.month,)
                kwargs["bymonthday"] = (o.day,)
            elif r.freq == "MONTHLY":
                kwargs["bymonthday"] = (o.day,)
            elif r.freq == "WEEKLY":
                kwargs["byweekday"] = (_WEEKDAY[o.weekday()],)
        order = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
        level = order.index(r.freq)
        if kwargs["byhour"] is None and level < order.index("HOURLY"):
            kwargs["byhour"] = (o.hour,)
        if kwargs["byminute"] is None and level < order.index("MINUTELY"):
            kwargs["byminute"] = (o.minute,)
        if kwargs["bysecond"] is None and level < order.index("SECONDLY"):
            kwargs["bysecond"] = (o.second,)
    return du.rrule(_FREQ[r.freq], **kwargs)


def days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def as_datetime(value: date) -> datetime:
    return datetime(value.year, value.month, value.day)
