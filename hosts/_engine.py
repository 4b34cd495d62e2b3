"""Occurrence generation over python-dateutil: RFC-correct, and fast for years-old DTSTARTs.

Every walk starts at the beginning of a FREQ period (DTSTART's own, or for a query about a later
time, the period just before it) with every part dateutil would derive from DTSTART written out;
occurrences before DTSTART are dropped and COUNT and UNTIL are applied here. That one mechanism
gives the RFC 5545 reading where dateutil's differs (a mid-week DTSTART with WEEKLY+BYSETPOS
builds its set from the week start) and skips the walk from a DTSTART years ago (dateutil's
``after()`` walks every occurrence since DTSTART). COUNT rules are walked from DTSTART.

Queries are answered from a per-engine memo of occurrences already computed (``_memo``: one
interval known complete, bisected; a miss next to it walks across the gap, a chunk at a time), and
a rule of FREQ and INTERVAL alone is computed by arithmetic on instants wherever the zone keeps
one offset (``_grid``). Both give exactly the walk's occurrences (tests/test_rrule_memo.py).

Readings the RFC leaves open (documented in README, tested against the shared corpus):
- YEARLY with BYWEEKNO and no BYDAY: DTSTART's weekday in those weeks (not all seven days).
- YEARLY with BYMONTHDAY and no BYMONTH (nor BYWEEKNO/BYYEARDAY): DTSTART's month only.
- A DATE DTSTART ignores BYHOUR/BYMINUTE/BYSECOND.
Refused as unsupported at parse time: YEARLY+BYWEEKNO with INTERVAL > 1 (week-years or calendar
years?), and plain with ordinal BYDAY together with BYSETPOS. Plain with ordinal BYDAY without
BYSETPOS (dateutil yields nothing) is generated as the union of the two halves.

Local wall times become instants with zoneinfo and fold=0: a time in a DST gap takes the offset
before the gap (RFC 5545 erratum EID 4271: shifted forward), a repeated time its first occurrence;
an instant already produced is never produced twice.
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone, tzinfo
from functools import cached_property

from floorgate.admission.clock import aware_utc

from . import _fires, _memo, _monthly
from ._dateutil import build_rules, period_start
from ._grid import ONE_OFFSET, UNSOLVED, Grid, first_after, grid_step, offset_from, until_key
from ._grid import REACH as _REACH
from ._grid import offset_at as _offset
from ._memo import Memo
from ._rrule import FIXED_PERIOD, Recur
from ._support import NOMINAL_DAYS, check_supported
from .errors import UnsupportedSchedule

__all__ = ["Engine", "check_supported"]

_MICROSECOND = timedelta(microseconds=1)


def _unlabelled(w: datetime) -> datetime:
    return datetime(w.year, w.month, w.day, w.hour, w.minute, w.second, w.microsecond)


_TWO_REACH = 2 * _REACH
_UTC = timezone.utc
# A period of each FREQ at its longest (a month of 31 days, a leap year).
_LONGEST_PERIOD = {**FIXED_PERIOD, "MONTHLY": timedelta(days=31), "YEARLY": timedelta(days=366)}


class Engine:
    """Occurrences of one recurrence: DTSTART as naive wall time in ``zone`` (None: floating)."""

    def __init__(self, dtstart: datetime, recur: Recur, zone: tzinfo | None, exdates: frozenset[datetime], is_date: bool):
        check_supported(recur)
        self.dtstart = dtstart
        self.recur = recur
        self.zone = zone
        self._one_offset = getattr(zone, "key", None) in ONE_OFFSET  # UTC and its links: no offset ever changes
        self.exdates = exdates
        self.is_date = is_date
        self._until_walk = self._walk_until()
        self._step = grid_step(recur, is_date)
        self._until_key = until_key(recur.until, zone)
        # Instants are compared in UTC (one zone's aware datetimes compare by wall time), or naive.
        self._key_tz = _UTC if zone is not None else None
        self._end = _memo.END_AWARE if zone is not None else _memo.END_NAIVE
        self._start = _memo.START_AWARE if zone is not None else _memo.START_NAIVE
        # No occurrence is an instant before this (DTSTART less more than any zone's offset): a
        # query from before it is asked from here, and never reaches datetime's first year.
        self._origin = dtstart if zone is None else dtstart.replace(tzinfo=_UTC)  # DTSTART's wall time labelled UTC
        self._earliest = self._origin - _TWO_REACH
        # Occurrences already computed (see _memo); replaced whole, read once per query. The
        # first query fills none: a schedule asked once (parsed for a preview, a status line, a
        # restart's first plan) pays for its one answer only; a host's next fire starts the memo.
        self._memo: Memo | None = None
        self._asked = False
        if self._step is not None:
            return  # FREQ and INTERVAL alone: fires at DTSTART itself, and dateutil has nothing to refuse
        if recur.freq in ("HOURLY", "MINUTELY", "SECONDLY") and (recur.byhour or recur.byminute or recur.bysecond):
            try:  # dateutil refuses a rule whose INTERVAL never meets its BY parts ("an empty set")
                build_rules(recur, period_start(recur, dtstart, dtstart), dtstart, self._until_walk, is_date)
            except ValueError as exc:
                raise UnsupportedSchedule(f"RRULE: this rule never fires ({exc}); check INTERVAL against the BY parts") from None
        self._check_fires()

    @cached_property
    def _chunk_span(self) -> timedelta:
        """A walk past the asked instant stops after a chunk of occurrences, or after the time a
        chunk of FREQ periods spans: a sparse rule (a 29 February that is a Monday) walked 240
        years of days for eight fires."""
        return timedelta(days=NOMINAL_DAYS[self.recur.freq] * self.recur.interval * _memo.CHUNK)

    @cached_property
    def _grid(self) -> Grid | None:
        """Arithmetic on steady offset spans for a rule of FREQ and INTERVAL alone (built at its
        first use: a cold query answers without it)."""
        until = self._until_key
        if self._step is None or until is False:
            return None
        return Grid(self.dtstart, self._step, self.zone, self.exdates, until)  # type: ignore[arg-type]

    def _check_fires(self) -> None:
        """Refuse a rule with no occurrence within ``_fires.FIRST_FIRE_YEARS`` of DTSTART (unless
        its UNTIL ends it sooner): dateutil would look for one up to year 9999 at every query."""
        end = _fires.horizon(self.dtstart)
        until = self._until_walk
        if until is not None and until <= end:
            return  # the walk ends at UNTIL: no occurrence is a finite, cheap answer
        day = _fires.first_day(self.recur, self.dtstart, end.date())
        if day is not None:
            walk_from = max(datetime(day.year, day.month, day.day), self.dtstart)
            for naive in self._naive(period_start(self.recur, self.dtstart, walk_from), walk_from):
                if naive >= self.dtstart:
                    if naive <= end:
                        return
                    break
        raise UnsupportedSchedule(
            f"RRULE: this rule never fires within {_fires.FIRST_FIRE_YEARS} years of DTSTART; check the BY parts against each "
            "other (e.g. BYMONTH=2 with BYMONTHDAY=30) or move DTSTART closer to its first fire"
        )

    # -- public --------------------------------------------------------------------------------
    def iterate(self, after: datetime | None = None) -> Iterator[datetime]:
        """Occurrences in order, aware in the zone (naive when floating); strictly after the
        instant ``after`` when given."""
        if after is not None and after < self._earliest:
            after = None  # every occurrence is later: from DTSTART
        for _, value in self._pairs(after):
            yield value

    def next_after(self, after: datetime) -> datetime | None:
        """The first occurrence strictly after the instant ``after`` (aware; naive when floating),
        answered from the memo of occurrences already computed when it covers ``after`` (a host
        asks each timer's schedule again at every fire, and one schedule serves many automations)."""
        memo = self._memo
        if memo is not None and after.__class__ is datetime and after.tzinfo is self._key_tz and memo[0] <= after < memo[1]:
            return memo[3][bisect_right(memo[2], after)]  # type: ignore[no-any-return]
        key = self._key(after)
        if key < self._earliest:
            key = self._earliest
        if not self._asked:
            self._asked = True
            return self._first_after(key)
        return self._next_missed(key)

    def last_at_or_before(self, at: datetime) -> datetime | None:
        """The latest occurrence at or before ``at`` (None if there is none)."""
        if self.recur.count is not None:
            found = None
            for occurrence in self.iterate():
                if occurrence > at:
                    break
                found = occurrence
            return found
        if at.tzinfo is not None:
            at = at.astimezone(_UTC)
        if at < self._earliest:
            return None
        solved, found = self._grid_last(at)
        if solved:
            return found
        memo = self._memo
        if memo is not None and memo[2] and memo[2][0] <= at < memo[1]:  # every occurrence in between is known
            return memo[3][bisect_right(memo[2], at) - 1]  # type: ignore[no-any-return]
        change = self._change(at)
        if change is not None and change[1] < timedelta(0):
            at = change[0] - _MICROSECOND  # inside a repeated hour's second pass: no occurrence is an instant there
        back = self._period_length()  # a first guess, widened below until an occurrence is found
        if memo is not None and memo[2] and at < memo[2][0] and _memo.near(memo, (memo[2][0] - at).total_seconds(), _memo.budget(memo)):
            known = memo[2]  # just before the memo (walking back in time): a chunk of it at once
            back = max(back, (known[-1] - known[0]) / (len(known) - 1) * _memo.chunk(memo))
        while True:
            try:
                earliest = at - back
                probe: datetime | None = None if self._to_local(earliest) <= self.dtstart else earliest
            except OverflowError:
                probe = None  # back past datetime's first year: from DTSTART, where the walk begins anyway
            keys: list[datetime] = []
            values: list[datetime] = []
            ended = True
            for key, value in self._pairs(probe):
                keys.append(key)
                values.append(value)
                if key > at:
                    ended = False
                    break
            i = bisect_right(keys, at)
            if i or probe is None:
                if len(keys) <= _memo.CAP:  # what was walked is known: the next queries need not
                    lo = probe if probe is not None else self._start
                    self._memo = _memo.merge(memo, _memo.segment(lo, keys, values, ended, self._end), at)
                return values[i - 1] if i else None
            back *= 4

    # -- a cold query: one answer, no memo -----------------------------------------------------
    def _first_after(self, after: datetime) -> datetime | None:
        """The first occurrence after the instant key ``after``, computing nothing more: by
        arithmetic for a rule of FREQ and INTERVAL alone where the offset holds from before
        ``after`` to the answer, else the walk's first occurrence from the period before it."""
        step, until = self._step, self._until_key
        if step is not None and until is not False:
            try:
                found = first_after(self._origin, step, self.zone, after)
            except OverflowError:
                found = UNSOLVED
            if found is not UNSOLVED:
                key: datetime
                w: datetime
                key, w = found  # type: ignore[misc]
                zone, exdates = self.zone, self.exdates
                # Built positionally: a keyword call (replace(tzinfo=...)) costs more than the rest.
                if (until is None or key <= until) and not (exdates and _unlabelled(w) in exdates):  # type: ignore[operator]
                    return key if zone is None else datetime(w.year, w.month, w.day, w.hour, w.minute, w.second, w.microsecond, zone)
        for _, value in self._pairs(after):
            return value
        return None

    # -- the memo ------------------------------------------------------------------------------
    def _key(self, value: datetime) -> datetime:
        if self.zone is None:
            return value.replace(tzinfo=None) if value.tzinfo is not None else value
        return aware_utc(value, "after")

    def _next_missed(self, after: datetime) -> datetime | None:
        """Answer a query the memo does not cover. Just past the memo (the next fire) or just
        before it, walk across the gap so the memo stays one interval; farther away, answer a
        rule of FREQ and INTERVAL alone by arithmetic, else walk from ``after`` into a new memo."""
        memo = self._memo
        if _memo.covers(memo, after):
            assert memo is not None
            return memo[3][bisect_right(memo[2], after)]  # type: ignore[no-any-return]
        if memo is not None:
            lo, hi, _, _ = memo
            budget = _memo.budget(memo)
            seg = None
            if after >= hi:
                if _memo.near(memo, (after - hi).total_seconds(), budget):
                    seg = self._segment(hi, after, _memo.chunk(memo), None)
            elif _memo.near(memo, (lo - after).total_seconds(), budget):
                # from a chunk before ``after`` (at the memo's density): a walk back in time
                # (a preview scrolled back, a catch-up) then walks once per chunk too
                keys, chunk = memo[2], _memo.chunk(memo)
                try:
                    start = after - (keys[-1] - keys[0]) / (len(keys) - 1) * chunk
                except OverflowError:
                    start = after
                seg = self._segment(start, after, chunk, lo)
            if seg is not None:
                self._memo = memo = _memo.merge(memo, seg, after)
                if _memo.covers(memo, after):
                    return memo[3][bisect_right(memo[2], after)]  # type: ignore[no-any-return]
            elif self._grid is not None:
                found = self._grid.next(after)
                if found is not UNSOLVED:
                    return found  # type: ignore[return-value]
        memo = _memo.merge(memo, self._segment(after, after, _memo.CHUNK, None), after)
        self._memo = memo
        return memo[3][bisect_right(memo[2], after)]  # type: ignore[no-any-return]

    def _segment(self, start: datetime, at: datetime, want: int, reach: datetime | None) -> Memo:
        """The occurrences after ``start``, up to ``want`` of them after ``at`` (and one at or
        past ``reach``), at most ``_memo.CAP``: by arithmetic while the zone keeps one offset,
        then walking."""
        keys: list[datetime] = []
        values: list[datetime] = []
        past, cap = 0, _memo.CAP
        runs = (self._grid.pairs(start), None) if self._grid is not None else (None,)
        for run in runs:
            for key, value in run if run is not None else self._pairs(keys[-1] if keys else start):
                keys.append(key)
                values.append(value)
                if key > at:
                    past += 1
                    if (past >= want or key - at > self._chunk_span) and (reach is None or key >= reach):
                        return _memo.segment(start, keys, values, False, self._end)
                if len(keys) >= cap:
                    return _memo.segment(start, keys, values, False, self._end)
        return _memo.segment(start, keys, values, True, self._end)

    # -- the grid: a rule with no BYxxx part is DTSTART plus whole steps of wall time ----------
    def _grid_last(self, at: datetime) -> tuple[bool, datetime | None]:
        """(True, the latest occurrence at or before ``at``) by arithmetic where the zone keeps one
        offset from a day before ``at`` to it; else (False, None)."""
        step = self._step
        if step is None:
            return False, None
        local = self._to_local(at)
        steady, offset = self._steady(at)
        if not steady:
            return False, None
        if local < self.dtstart:
            return True, None  # DTSTART is later: nothing has happened (no fold maps it earlier here)
        return self._grid_point((local - self.dtstart) // step, at, offset, later=False)

    def _grid_point(self, k: int, asked: datetime, offset: timedelta | None, *, later: bool) -> tuple[bool, datetime | None]:
        try:
            naive = self.dtstart + k * self._step  # type: ignore[operator]
        except OverflowError:
            return False, None
        if naive in self.exdates or (self.recur.until is not None and not self._before_until(naive)):
            return False, None  # the walk knows what comes instead
        instant = self._instant(naive)
        if offset is not None:
            assert self.zone is not None
            if abs(instant - asked) > _REACH or _offset(instant, self.zone) != offset:
                return False, None
            if not later and _offset(instant - _REACH, self.zone) != offset:
                return False, None  # an earlier fire shifted out of a gap could stand where this one does
        return True, instant

    def _steady(self, instant: datetime) -> tuple[bool, timedelta | None]:
        """(whether the zone's offset at ``instant`` was the same a day before, that offset; None
        without a zone)."""
        zone = self.zone
        if zone is None or instant.tzinfo is None:
            return True, None
        offset = _offset(instant, zone)
        return _offset(instant - _REACH, zone) == offset, offset

    # -- internals -----------------------------------------------------------------------------
    def _pairs(self, after: datetime | None) -> Iterator[tuple[datetime, datetime]]:
        """(the instant in UTC, the occurrence) in order, walking from the FREQ period before
        ``after`` (from DTSTART when None or for COUNT), strictly after ``after``."""
        if after is None or self.recur.count is not None:
            start = period_start(self.recur, self.dtstart, self.dtstart)
            walk_from = None
        else:
            walk_from = max(self._walk_from(after), self.dtstart)
            start = period_start(self.recur, self.dtstart, walk_from)
        zone, dtstart, exdates, count = self.zone, self.dtstart, self.exdates, self.recur.count
        bounded = self.recur.until is not None
        emitted = 0
        last: datetime | None = None
        for naive in self._naive(start, walk_from):
            if naive < dtstart:
                continue
            if bounded and not self._before_until(naive):
                return
            emitted += 1
            if count is not None and emitted > count:
                return
            if naive in exdates:
                continue
            if zone is None:
                key = value = naive
            else:
                key = naive.replace(tzinfo=zone).astimezone(_UTC)
                value = key.astimezone(zone)
            if last is not None and key <= last:
                continue  # a DST gap shifted this onto (or before) an occurrence already produced
            last = key
            if after is not None and key <= after:
                continue
            yield key, value

    def _naive(self, start: datetime, walk_from: datetime | None) -> Iterator[datetime]:
        if _monthly.handles(self.recur):
            yield from _monthly.monthly(self.recur, start, self.dtstart, self._until_walk, self.is_date, walk_from)
            return
        rules = build_rules(self.recur, start, self.dtstart, self._until_walk, self.is_date)
        iters = [r.xafter(walk_from, inc=True) if walk_from is not None else iter(r) for r in rules]
        if len(iters) == 1:
            yield from iters[0]
            return
        previous = None
        for value in heapq.merge(*iters):
            if value != previous:
                yield value
                previous = value

    def _walk_until(self) -> datetime | None:
        until = self.recur.until
        if until is None:
            return None
        if isinstance(until, datetime):
            if until.tzinfo is not None and self.zone is not None:
                # Inside a repeated hour, a later wall time of the first pass is an instant before UNTIL.
                try:
                    change = self._change(until)
                    repeat = -change[1] if change is not None and change[1] < timedelta(0) else timedelta(0)
                    return until.astimezone(self.zone).replace(tzinfo=None) + repeat
                except OverflowError:
                    return None  # an UNTIL at datetime's end: the walk ends there anyway; _before_until still applies
            return until.replace(tzinfo=None)
        if until.year == datetime.max.year and until.month == 12 and until.day == 31:
            return None  # UNTIL=99991231, "forever": the day after it is past datetime's range
        return datetime(until.year, until.month, until.day) + timedelta(days=1)

    def _before_until(self, naive: datetime) -> bool:
        until = self.recur.until
        if isinstance(until, datetime):
            if until.tzinfo is not None:
                return self._instant(naive) <= until if self.zone is not None else naive <= until.replace(tzinfo=None)
            return naive <= until
        assert isinstance(until, date)
        return naive.date() <= until

    def _walk_from(self, after: datetime) -> datetime:
        """The wall time to walk from for occurrences after the instant ``after``: its own, except
        just after the zone changed its offset. After a jump forward, a wall time in the gap is
        taken at the offset before it, so it becomes an instant up to the jump later: walk back by
        the jump. Inside a repeated hour's second pass, its wall times were produced in the first:
        walk from the end of the repeat. A per-minute rule walks from the asked minute on DST days."""
        local = self._to_local(after)
        change = self._change(after)
        if change is None:
            return local
        at, jump = change
        return local - jump if jump > timedelta(0) else self._to_local(at - jump)  # at - jump: the repeat's end

    def _change(self, instant: datetime) -> tuple[datetime, timedelta] | None:
        """The zone's last offset change before ``instant`` when ``instant`` lies within its size
        after it: (the instant of the change, its signed size); else None."""
        zone = self.zone
        if zone is None or instant.tzinfo is None or self._one_offset:
            return None
        offset = _offset(instant, zone)
        jump = offset - _offset(instant - _REACH, zone)
        if not jump:
            return None
        at = offset_from(offset, math.floor((instant - _REACH).timestamp()), math.ceil(instant.timestamp()), zone)
        return (at, jump) if instant < at + abs(jump) else None

    def _to_local(self, instant: datetime) -> datetime:
        if self.zone is None or instant.tzinfo is None:
            return instant.replace(tzinfo=None)
        return instant.astimezone(self.zone).replace(tzinfo=None)

    def _instant(self, naive: datetime) -> datetime:
        if self.zone is None:
            return naive
        return naive.replace(tzinfo=self.zone).astimezone(_UTC).astimezone(self.zone)

    def _period_length(self) -> timedelta:
        return _LONGEST_PERIOD[self.recur.freq] * self.recur.interval
