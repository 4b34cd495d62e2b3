"""A MONTHLY rule's wall times computed by hand (``_monthly``: the month's days from weekday
arithmetic, BYSETPOS picked by position) equal what dateutil yields for the rule the engine would
otherwise hand it (``_dateutil.build_rules``, walked as the engine walks it), from DTSTART's
period and from any wall time after it, over every MONTHLY part together."""

from __future__ import annotations

import heapq
from datetime import datetime, timedelta
from itertools import islice

from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from floorgate.hosts import _monthly
from floorgate.hosts._dateutil import build_rules, period_start
from floorgate.hosts._rrule import Recur

_NONZERO_DAY = st.integers(-31, 31).filter(bool)


def _dateutil_walk(recur: Recur, start: datetime, dtstart: datetime, until: datetime, walk_from: datetime | None) -> list[datetime]:
    """The engine's dateutil walk (merged and deduplicated when plain and numbered weekdays mix)."""
    rules = build_rules(recur, start, dtstart, until, False)
    iters = [r.xafter(walk_from, inc=True) if walk_from is not None else iter(r) for r in rules]
    out: list[datetime] = []
    for value in heapq.merge(*iters):
        if not out or value != out[-1]:
            out.append(value)
        if len(out) == 40:
            break
    return out


@settings(max_examples=200, deadline=None)
@given(
    interval=st.integers(1, 5),
    bymonth=st.lists(st.integers(1, 12), max_size=3, unique=True),
    bymonthday=st.lists(_NONZERO_DAY, max_size=3, unique=True),
    plain=st.lists(st.integers(0, 6), max_size=3, unique=True),
    numbered=st.lists(st.tuples(st.integers(-5, 5).filter(bool), st.integers(0, 6)), max_size=2, unique=True),
    byhour=st.lists(st.integers(0, 23), max_size=2, unique=True),
    bysetpos=st.lists(st.integers(-6, 6).filter(bool), max_size=2, unique=True),
    dtstart=st.datetimes(datetime(1999, 1, 1), datetime(2030, 1, 1)).map(lambda d: d.replace(microsecond=0)),  # noqa: DTZ001
    later_days=st.one_of(st.none(), st.integers(0, 900)),
)
@example(  # the last weekday of the month (bench/rrule.py's class)
    interval=1,
    bymonth=[],
    bymonthday=[],
    plain=[0, 1, 2, 3, 4],
    numbered=[],
    byhour=[],
    bysetpos=[-1],
    dtstart=datetime(2020, 11, 29, 9),  # noqa: DTZ001
    later_days=2190,
)
@example(  # the last day of every third month, from a 31st
    interval=3,
    bymonth=[],
    bymonthday=[-1],
    plain=[],
    numbered=[],
    byhour=[],
    bysetpos=[],
    dtstart=datetime(2024, 1, 31, 8),  # noqa: DTZ001
    later_days=40,
)
def test_monthly_by_hand_equals_dateutil(  # type: ignore[no-untyped-def]
    interval, bymonth, bymonthday, plain, numbered, byhour, bysetpos, dtstart, later_days
) -> None:
    byday = tuple((None, w) for w in plain) + tuple(numbered)
    assume(not (plain and numbered and bysetpos))  # refused at parse (check_supported)
    assume(not bysetpos or byday or bymonthday or bymonth or byhour)  # refused at parse (RFC 5545)
    recur = Recur(
        freq="MONTHLY",
        interval=interval,
        bymonth=tuple(bymonth),
        bymonthday=tuple(bymonthday),
        byday=byday,
        byhour=tuple(byhour),
        bysetpos=tuple(bysetpos),
    )
    until = dtstart + timedelta(days=3 * 366)  # bounds both walks (a rule may never fire)
    walk_from = None if later_days is None else dtstart + timedelta(days=later_days, minutes=7)
    start = period_start(recur, dtstart, walk_from if walk_from is not None else dtstart)
    ours = list(islice(_monthly.monthly(recur, start, dtstart, until, False, walk_from), 40))
    # dateutil checks UNTIL only on an occurrence it finds: a rule that never fires again walks
    # to year 9999 (the engine refuses one that never fires at parse)
    assume(ours)
    assert ours == _dateutil_walk(recur, start, dtstart, until, walk_from)
