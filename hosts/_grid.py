"""Occurrences of a rule of FREQ and INTERVAL alone by arithmetic: DTSTART plus whole steps of wall
time (dateutil derives every other part from DTSTART), computed on instants wherever the zone
keeps one offset, so that wall times and instants map one to one.

Where the offset holds from ``lo`` to ``hi`` (the next change), DTSTART's wall time at that
offset is one instant (the anchor) and every occurrence in the span is the anchor plus a whole
number of steps. Just after a change, for the change's size, the walk answers instead: after a
jump forward, wall times in the gap became instants there (shifted, RFC 5545 erratum EID 4271);
in a repeated hour's second pass, its wall times were produced in the first.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone, tzinfo

from ._rrule import FIXED_PERIOD, Recur

# No zone has ever moved its clocks by more than a day at once (Samoa 2011 and Kwajalein 1993
# jumped 24 h), nor changed its offset twice within this reach.
REACH = timedelta(hours=25)
_SPAN_STEPS = 16  # how far (in REACH steps, ~17 days) a steady offset is looked for each way
_UTC = timezone.utc
UNSOLVED = object()  # Grid.next: only the walk knows
_LONGEST_STEP = _SPAN_STEPS * REACH
# IANA names of zones at UTC+0 for all time (UTC and its links): no offset to look up.
ONE_OFFSET = frozenset({"UTC", "Etc/UTC", "Etc/Universal", "Etc/Zulu", "Universal", "Zulu"})

Span = tuple[datetime, datetime, datetime]  # (safe from, until, DTSTART's wall time as an instant)


def grid_step(recur: Recur, is_date: bool) -> timedelta | None:
    """The wall-time step between occurrences of a rule that is only FREQ and INTERVAL (dateutil
    derives every other part from DTSTART: the same time of day, weekday), else None."""
    r = recur
    if is_date or r.count is not None or r.freq not in FIXED_PERIOD:
        return None
    if r.bymonth or r.byweekno or r.byyearday or r.bymonthday or r.byday or r.byhour or r.byminute or r.bysecond or r.bysetpos:
        return None
    step = FIXED_PERIOD[r.freq] * r.interval
    # A step longer than the span a steady offset is looked for in would be found by stepping
    # through every span between two fires (a 100-year step: half a million offset lookups); the
    # walk finds it in one period.
    return step if step <= _LONGEST_STEP else None


def until_key(until: datetime | date | None, zone: tzinfo | None) -> datetime | bool | None:
    """UNTIL as an instant to compare occurrences' instants with (naive when floating); False
    when instants cannot say it (a DATE, or a floating UNTIL of a zoned rule: only the walk can)."""
    if until is None:
        return None
    if not isinstance(until, datetime):
        return False
    if zone is None:
        return until.replace(tzinfo=None)
    return until.astimezone(_UTC) if until.tzinfo is not None else False


def offset_at(instant: datetime, zone: tzinfo) -> timedelta:
    """The zone's UTC offset at the aware ``instant``."""
    return instant.astimezone(zone).utcoffset()  # type: ignore[return-value]


def first_after(origin: datetime, step: timedelta, zone: tzinfo | None, after: datetime) -> tuple[datetime, datetime] | object:
    """(instant, wall time labelled UTC) of the first grid point after the instant ``after``, from
    a few offset lookups and no span; or UNSOLVED unless the zone keeps the offset it has at
    ``after`` from ``REACH`` before it to that point (EXDATE and UNTIL are the caller's).
    ``origin`` is DTSTART labelled UTC (``dtstart`` itself when floating: then ``after`` is naive
    and both results are that wall time).

    Why that suffices: with one offset over that time, the point's wall time is neither repeated
    (its other instant would lie within a jump before it, at another offset) nor in a gap, so it
    is the instant found; and every earlier grid point is an instant at or before ``after``: one
    later than ``after`` and before the point would carry the offset, so its wall time would be
    after ``after``'s; one past the point would need a fall back after the point that still lies
    before ``after``. So no earlier point is produced after ``after``, nor stands in its way.
    """
    # Arithmetic on datetimes labelled UTC: keyword calls (replace(tzinfo=...)) cost more here.
    if zone is None or getattr(zone, "key", None) in ONE_OFFSET:
        k = 0 if after < origin else (after - origin) // step + 1
        wall = origin + k * step  # floating, or a zone whose offset is zero for all time
        return wall, wall
    offset = offset_at(after, zone)
    local = after + offset
    k = 0 if local < origin else (local - origin) // step + 1
    wall = origin + k * step
    key = wall - offset
    # Lookups at most REACH apart (``after`` itself was the first): a zone never changed its
    # offset twice within REACH, so an offset equal at both ends of a stretch held all through it.
    if offset_at(after - REACH, zone) != offset:
        return UNSOLVED
    probe = after
    while key - probe > REACH:
        probe += REACH
        if offset_at(probe, zone) != offset:
            return UNSOLVED
    if offset_at(key, zone) != offset:
        return UNSOLVED
    return key, wall


def _boundary(low: datetime, high: datetime, zone: tzinfo) -> datetime:
    """The first whole second after ``low`` with the offset ``high`` has (whole-second instants
    with different offsets, one change between them)."""
    return offset_from(offset_at(high, zone), int(low.timestamp()), int(high.timestamp()), zone)


def offset_from(offset: timedelta, low: int, high: int, zone: tzinfo) -> datetime:
    """The whole second at which ``zone`` took ``offset``: bisected between the POSIX seconds
    ``low`` (another offset) and ``high`` (``offset``), one change between them (tzdata changes
    offsets on whole seconds)."""
    while high - low > 1:
        middle = (low + high) // 2
        if offset_at(datetime.fromtimestamp(middle, _UTC), zone) == offset:
            high = middle
        else:
            low = middle
    return datetime.fromtimestamp(high, _UTC)


class Grid:
    """DTSTART (naive wall time in ``zone``; None: floating) plus whole ``step``s, less EXDATEs,
    up to UNTIL (``until``: an instant as ``until_key`` gives it)."""

    def __init__(self, dtstart: datetime, step: timedelta, zone: tzinfo | None, exdates: frozenset[datetime], until: datetime | None):
        self.dtstart = dtstart
        self.step = step
        self.zone = zone
        self.exdates = exdates
        self.until = until
        self._span: Span | None = None  # the last steady span found; replaced whole
        # No occurrence is an instant before this: a wall time at or after DTSTART is one at most a
        # zone's offset (under REACH) earlier. A query from before it is asked from here, so that
        # a DTSTART decades ahead costs one span, not one per ~17 days up to it.
        self._earliest = dtstart - 2 * REACH if zone is None else dtstart.replace(tzinfo=_UTC) - 2 * REACH

    def pairs(self, start: datetime) -> Iterator[tuple[datetime, datetime]]:
        """(instant in UTC, occurrence) after ``start``, in order, as far as the offset ``start``
        has holds; nothing when ``start`` lies just after a change."""
        start = max(start, self._earliest)
        span = self._span_at(start)
        if span is None:
            return
        anchor = span[2]
        step, exdates, until, zone = self.step, self.exdates, self.until, self.zone
        k = 0 if start < anchor else (start - anchor) // step + 1
        try:
            key = anchor + k * step
            wall = self.dtstart + k * step
            while True:
                hi = span[1]
                while key < hi:
                    if until is not None and key > until:
                        return
                    if not exdates or wall not in exdates:
                        yield key, (key if zone is None else key.astimezone(zone))
                    key += step
                    wall += step
                span = self._next_span(span)
                if span is None:
                    return
        except OverflowError:
            return

    def next(self, after: datetime) -> object:
        """The first occurrence after ``after`` (``pairs``'s first), or UNSOLVED where only the
        walk knows (just after an offset change, an EXDATE, past UNTIL)."""
        after = max(after, self._earliest)
        span = self._span_at(after)
        if span is None:
            return UNSOLVED
        step = self.step
        k = 0 if after < span[2] else (after - span[2]) // step + 1
        try:
            key = span[2] + k * step
            while key >= span[1]:
                span = self._next_span(span)  # type: ignore[assignment]
                if span is None:
                    return UNSOLVED
            if self.exdates and self.dtstart + k * step in self.exdates:
                return UNSOLVED
        except OverflowError:
            return UNSOLVED
        if self.until is not None and key > self.until:
            return UNSOLVED
        return key if self.zone is None else key.astimezone(self.zone)

    def _next_span(self, span: Span) -> Span | None:
        """The span after ``span`` when it keeps its offset (``span`` ended where the search for a
        change stopped, not at one); else None."""
        following = self._span_at(span[1])
        return following if following is not None and following[2] == span[2] else None

    def _span_at(self, instant: datetime) -> Span | None:
        span = self._span
        if span is None or not span[0] <= instant < span[1]:
            found = self._steady_span(instant)
            if found is None:
                return None
            self._span = span = found
        return span if span[0] <= instant < span[1] else None

    def _steady_span(self, instant: datetime) -> Span | None:
        """(from, until, anchor): the zone keeps the offset it has at ``instant`` from ``from``
        (the last change plus its size, or as far back as looked) to ``until`` (the next change,
        or as far ahead as looked, _SPAN_STEPS days each way); None past datetime's range."""
        zone = self.zone
        if zone is None:
            return datetime.min, datetime.max, self.dtstart  # noqa: DTZ901 (floating time is naive)
        try:
            t = instant.replace(microsecond=0)  # tzdata changes offsets on whole seconds
            offset = offset_at(t, zone)
            hi = t
            for _ in range(_SPAN_STEPS):
                probe = hi + REACH
                if offset_at(probe, zone) != offset:
                    hi = _boundary(hi, probe, zone)
                    break
                hi = probe
            lo = t
            for _ in range(_SPAN_STEPS):
                probe = lo - REACH
                before = offset_at(probe, zone)
                if before != offset:
                    lo = _boundary(probe, lo, zone) + abs(offset - before)
                    break
                lo = probe
            else:
                lo += REACH  # a change just before where the search stopped may still cast its shadow
            anchor = self.dtstart.replace(tzinfo=_UTC) - offset
        except OverflowError:
            return None
        return lo, hi, anchor
