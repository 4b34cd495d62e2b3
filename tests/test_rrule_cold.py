"""A cold query (a fresh parse, its first answer: no memo, arithmetic or one short walk) answers
exactly what a warm schedule and the walk from DTSTART answer, and what dateutil answers for the
same rule, for every rule class the benchmark times (and a few more), over DTSTARTs and queries
across real offset changes."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
from dateutil import rrule as du
from hypothesis import given, settings
from hypothesis import strategies as st

from floorgate.hosts import Schedule

UTC = timezone.utc

# id, zone, RRULE: bench/rrule.py's classes first
CLASSES = [
    ("per-minute", "UTC", "FREQ=MINUTELY"),
    ("every-15-minutes", "UTC", "FREQ=MINUTELY;INTERVAL=15"),
    ("hourly", "UTC", "FREQ=HOURLY"),
    ("daily", "UTC", "FREQ=DAILY"),
    ("monthly-last-weekday-bysetpos", "UTC", "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1"),
    ("per-minute-berlin", "Europe/Berlin", "FREQ=MINUTELY"),
    ("hourly-new-york", "America/New_York", "FREQ=HOURLY"),
    ("daily-berlin", "Europe/Berlin", "FREQ=DAILY"),
    ("every-7-minutes-lord-howe", "Australia/Lord_Howe", "FREQ=MINUTELY;INTERVAL=7"),
    ("weekly-interval-2-new-york", "America/New_York", "FREQ=WEEKLY;INTERVAL=2"),
    ("monthly-second-tuesday-berlin", "Europe/Berlin", "FREQ=MONTHLY;BYDAY=2TU;BYHOUR=2,14"),
    ("monthly-last-day-interval-3", "UTC", "FREQ=MONTHLY;INTERVAL=3;BYMONTHDAY=-1"),
    ("monthly-dtstart-day", "America/New_York", "FREQ=MONTHLY"),
    ("weekdays-at-9-and-17", "Europe/Berlin", "FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;BYHOUR=9,17"),
]


def _steady(zone: ZoneInfo, a: datetime, b: datetime) -> bool:
    """Whether ``zone`` keeps one offset from a day before ``a`` to a day after ``b`` (looked up
    hourly): there dateutil's naive wall times are the instants."""
    offsets = set()
    t = a - timedelta(days=1)
    while t <= b + timedelta(days=1):
        offsets.add(t.astimezone(zone).utcoffset())
        t += timedelta(hours=1)
    return len(offsets) == 1


@pytest.mark.parametrize("zone_name, rule", [c[1:] for c in CLASSES], ids=[c[0] for c in CLASSES])
@settings(max_examples=30, deadline=None)
@given(
    start=st.one_of(  # DTSTART is wall time in its zone: naive bounds on purpose
        st.datetimes(datetime(2019, 1, 1), datetime(2026, 1, 1)),  # noqa: DTZ001  years before the query: the arithmetic jump
        st.datetimes(datetime(2025, 12, 1), datetime(2026, 1, 1)),  # noqa: DTZ001  weeks before: dateutil can walk it
    ).map(lambda d: d.replace(microsecond=0)),
    query_minutes=st.one_of(st.integers(-3 * 24 * 60, 14 * 24 * 60), st.integers(0, 2 * 365 * 24 * 60)),
    query_seconds=st.integers(0, 59),
)
def test_cold_answer_equals_warm_walk_and_dateutil(
    zone_name: str, rule: str, start: datetime, query_minutes: int, query_seconds: int
) -> None:
    zone = ZoneInfo(zone_name)
    head = f"DTSTART:{start:%Y%m%dT%H%M%S}Z" if zone_name == "UTC" else f"DTSTART;TZID={zone_name}:{start:%Y%m%dT%H%M%S}"
    text = f"{head}\nRRULE:{rule}"
    query = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=query_minutes, seconds=query_seconds)

    cold_schedule = Schedule.parse(text)
    cold = cold_schedule.next_after(query)
    assert cold_schedule._engine._memo is None  # a first query computes its answer alone

    warm_schedule = Schedule.parse(text)
    warm_schedule.next_after(query - timedelta(hours=3))  # the first query, then a memo's
    warm_schedule.next_after(query - timedelta(minutes=1))
    warm = warm_schedule.next_after(query)
    assert warm_schedule._engine._memo is not None

    walked = next(Schedule.parse(text)._engine.iterate(query), None)  # the walk from the period before the query
    assert cold == warm == walked
    assert cold is not None and cold.tzinfo is not None and cold.utcoffset() == cold.astimezone(zone).utcoffset()

    # dateutil walks from DTSTART one occurrence at a time (minutes for years would take minutes):
    # compared where the walk is short and one offset holds (dateutil walks naive wall time).
    if query - start.replace(tzinfo=UTC) <= timedelta(days=45) and _steady(zone, query, cold):
        local = query.astimezone(zone).replace(tzinfo=None)
        expected = du.rrulestr(f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}").after(local)
        assert cold.replace(tzinfo=None) == expected


def test_a_query_before_dtstart_and_an_exdate_and_until_are_answered_cold() -> None:
    text = "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=HOURLY;UNTIL=20261201T110000Z\nEXDATE;TZID=Europe/Berlin:20261201T100000"
    berlin = ZoneInfo("Europe/Berlin")
    cases = [
        (datetime(2020, 1, 1, tzinfo=UTC), datetime(2026, 12, 1, 9, tzinfo=berlin)),  # years before DTSTART
        (datetime(2026, 12, 1, 8, 30, tzinfo=UTC), datetime(2026, 12, 1, 11, tzinfo=berlin)),  # 10:00 is excluded
        (datetime(2026, 12, 1, 10, 30, tzinfo=UTC), datetime(2026, 12, 1, 12, tzinfo=berlin)),  # 12:00 Berlin is UNTIL
        (datetime(2026, 12, 1, 11, 0, tzinfo=UTC), None),  # ended
    ]
    for query, expected in cases:
        assert Schedule.parse(text).next_after(query) == expected, query
