"""What a schedule costs is bounded: a DTSTART far ahead or far back, a rule that never fires and
a crontab horizon check are answered or refused after a counted number of steps (never timed)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import date, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from dateutil import rrule as du
from test_rrule import _walked

from floorgate.admission import Store
from floorgate.hosts import Schedule, UnsupportedSchedule, _cron, _engine, _fires, _grid
from floorgate.hosts._rrule import parse_recur
from floorgate.hosts.contract import Held
from floorgate.hosts.crontab import CrontabHost

from test_cli import cli, one_line_error

NOW = datetime(2026, 12, 2, 12, tzinfo=timezone.utc)
BERLIN = ZoneInfo("Europe/Berlin")
UTC = timezone.utc


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of the engine's steps: ``periods`` dateutil examined (one day set built per FREQ
    period), ``days`` the first-fire scan looked at, ``offsets`` zone offsets looked up,
    ``cron`` local times cron's side of a horizon check turned into instants."""
    counts: Counter[str] = Counter()

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    for method in ("ydayset", "mdayset", "wdayset", "ddayset"):
        monkeypatch.setattr(du._iterinfo, method, counted("periods", getattr(du._iterinfo, method)))
    day_filter = _fires.day_filter
    monkeypatch.setattr(_fires, "day_filter", lambda *a: counted("days", day_filter(*a)))
    monkeypatch.setattr(_grid, "offset_at", counted("offsets", _grid.offset_at))
    monkeypatch.setattr(_engine, "_offset", counted("offsets", _engine._offset))
    monkeypatch.setattr(_cron, "_exact_instant", counted("cron", _cron._exact_instant))
    return counts


# -- refused at parse, with one line naming the part -----------------------------------------------
REFUSED = [
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:99991201T090000\nRRULE:FREQ=WEEKLY", "DTSTART: year 9999 is outside 1900..2200", id="year-9999-weekly"
    ),
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:10001201T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO",
        "DTSTART: year 1000 is outside 1900..2200",
        id="year-1000-weekly",
    ),
    pytest.param("DTSTART;VALUE=DATE:22010101\nRRULE:FREQ=DAILY", "DTSTART: year 2201 is outside", id="year-2201-date"),
    pytest.param("every 2m from 9999-12-01T00:00", "schedule: from: year 9999 is outside", id="friendly-every-from-year-9999"),
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30",
        "RRULE BYMONTHDAY: no month",
        id="never-february-30",
    ),
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=HOURLY;BYYEARDAY=366;BYMONTH=1",
        "RRULE: this rule never fires within 50 years of DTSTART",
        id="never-hourly-on-day-366-of-january",
    ),
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=MINUTELY;BYYEARDAY=-366;BYMONTH=12",
        "RRULE: this rule never fires within 50 years of DTSTART",
        id="never-minutely-on-day-minus-366-of-december",
    ),
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=MONTHLY;BYMONTH=2;BYDAY=5MO;BYMONTHDAY=1",
        "RRULE: this rule never fires within 50 years of DTSTART",
        id="never-fifth-monday-on-the-first",
    ),
]


@pytest.mark.parametrize("text, message", REFUSED)
def test_a_schedule_that_cannot_be_planned_is_refused_at_parse_after_bounded_work(text: str, message: str, steps: Counter[str]) -> None:
    with pytest.raises(UnsupportedSchedule) as refused:
        Schedule.parse(text, now=NOW, allow_floating=True)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)
    # Unbounded, the never-firing hourly rule examined 2.9 million periods on its way to year 9999.
    assert steps["days"] <= _fires.FIRST_FIRE_YEARS * 366 + 1
    assert steps["periods"] <= 100, steps


# -- answered right, after bounded work ------------------------------------------------------------
def _at(text: str, zone: ZoneInfo | timezone = UTC) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=zone)


ANSWERED = [
    pytest.param(
        "DTSTART:22001201T090000Z\nRRULE:FREQ=WEEKLY", NOW, _at("2200-12-01T09:00"), None, 0, id="weekly-from-year-2200-asked-now"
    ),
    pytest.param("every 2m from 2200-12-01T00:00", NOW, _at("2200-12-01T00:00"), None, 0, id="every-2m-from-year-2200-asked-now"),
    pytest.param(
        "DTSTART;TZID=America/New_York:19000101T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO",
        NOW,
        _at("2026-12-07T14:00"),
        _at("2026-11-30T14:00"),
        0,
        id="weekly-from-year-1900-asked-now",
    ),
    pytest.param(
        "DTSTART;TZID=America/New_York:19000101T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO",
        datetime(1, 1, 2, tzinfo=UTC),
        _at("1900-01-01T14:00"),
        None,
        0,
        id="weekly-from-year-1900-asked-in-year-1",
    ),
    pytest.param(
        "DTSTART;TZID=America/New_York:19000101T090000\nRRULE:FREQ=DAILY",
        datetime(9999, 12, 31, 15, tzinfo=UTC),
        None,
        _at("9999-12-31T09:00", ZoneInfo("America/New_York")),
        0,
        id="daily-from-year-1900-asked-in-year-9999",
    ),
    pytest.param(
        "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=29;BYDAY=MO",
        NOW,
        _at("2044-02-29T09:00", BERLIN),
        None,
        (date(2044, 2, 29) - NOW.date()).days,  # a sparse rule's walks cross its gap day by day
        id="first-fire-18-years-ahead",
    ),
    pytest.param(
        "DTSTART:20261201T090000Z\nRRULE:FREQ=DAILY;INTERVAL=36000",
        NOW,
        _at("2125-06-25T09:00"),
        _at("2026-12-01T09:00"),
        0,
        id="a-step-of-a-century",
    ),
    pytest.param(
        "DTSTART:20261201T090000Z\nRRULE:FREQ=DAILY;UNTIL=99991231T235959Z",
        NOW,
        _at("2026-12-03T09:00"),
        _at("2026-12-02T09:00"),
        0,
        id="until-year-9999",
    ),
]


@pytest.mark.parametrize("text, at, following, latest, gap_days", ANSWERED)
def test_a_far_dtstart_or_query_is_answered_after_bounded_work(
    text: str,
    at: datetime,
    following: datetime | None,
    latest: datetime | None,
    gap_days: int,
    steps: Counter[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:

    schedule = Schedule.parse(text, now=NOW)
    walls = _walked(schedule, monkeypatch)
    steps.clear()
    assert schedule.next_after(at) == following
    assert schedule.last_at_or_before(at) == latest
    assert schedule.occurrences(1, after=at) == ([following] if following is not None else [])
    # Unbounded, the weekly rule from 2200 looked up 5.7 million offsets stepping ~17-day spans.
    assert steps["offsets"] <= 400, steps
    # A sparse rule's gap is walked once by each query, twice by last_at_or_before (it widens its
    # look back once); a chunk of eight fires ahead walked 240 years of days.
    assert steps["periods"] <= 200 + 4 * gap_days, steps
    assert sum(walls) <= 100, walls


# -- the crontab host's horizon check --------------------------------------------------------------
def test_a_crontab_horizon_check_of_a_far_dtstart_stops_at_the_first_difference(steps: Counter[str]) -> None:
    host = CrontabHost(lambda automation_id: "true", zone=ZoneInfo("UTC"))
    schedule = Schedule.parse("every 2m from 2200-12-01T00:00", now=NOW)
    steps.clear()
    form = host.express(schedule, NOW)
    assert isinstance(form, Held) and form.reason == "crontab: cron has no start date; this schedule begins at 2200-12-01T00:00:00+00:00"
    # Both sides listed over the 400-day horizon: 288,000 cron fires; now at most the two days
    # cron's side starts with.
    assert steps["cron"] <= 2 * 24 * 60, steps
    assert steps["offsets"] <= 400, steps


# -- the CLI ---------------------------------------------------------------------------------------
@pytest.fixture
def cli_db(store: Store, db_url: str) -> Iterator[str]:
    yield db_url


@pytest.mark.parametrize(
    "schedule",
    [
        pytest.param("DTSTART;TZID=Europe/Berlin:99991201T090000 RRULE:FREQ=WEEKLY", id="year-9999-weekly"),
        pytest.param("DTSTART;TZID=Europe/Berlin:10001201T090000 RRULE:FREQ=WEEKLY;BYDAY=MO", id="year-1000-weekly"),
        pytest.param("DTSTART;TZID=Europe/Berlin:20261201T090000 RRULE:FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", id="never-february-30"),
        pytest.param("DTSTART;TZID=Europe/Berlin:20261201T090000 RRULE:FREQ=HOURLY;BYYEARDAY=366;BYMONTH=1", id="never-hourly"),
        pytest.param("every 2m from 9999-12-01T00:00", id="friendly-from-year-9999"),
    ],
)
def test_automation_add_refuses_each_with_one_line_and_exit_2(cli_db: str, schedule: str) -> None:
    r = cli(
        "automation", "add", "far", "--goal", "g", "--agent", "a", "--schedule", schedule, "--", sys.executable, "-c", "pass", db=cli_db
    )
    assert r.returncode == 2
    line = one_line_error(r)
    assert "DTSTART" in line or "RRULE" in line or "from" in line, line
    listed = cli("automation", "list", "--json", db=cli_db)
    assert listed.returncode == 0 and json.loads(listed.stdout)["automations"] == []


@pytest.mark.parametrize(
    "rule",
    [
        pytest.param("FREQ=MONTHLY;BYDAY=-1FR", id="last-friday"),
        pytest.param("FREQ=YEARLY;BYDAY=20MO", id="20th-monday-of-the-year"),
        pytest.param("FREQ=YEARLY;BYMONTH=3,10;BYDAY=-1SU", id="last-sunday-of-march-and-october"),
        pytest.param("FREQ=MONTHLY;BYDAY=-1TU;BYMONTHDAY=-1,-2,-3,-4,-5", id="last-tuesday-in-the-last-five-days"),
        pytest.param("FREQ=DAILY;INTERVAL=3;BYMONTH=3", id="every-third-day-in-march"),
        pytest.param("FREQ=WEEKLY;INTERVAL=2;BYDAY=MO,FR", id="every-other-week"),
        pytest.param("FREQ=HOURLY;BYYEARDAY=1,-1", id="hourly-on-the-first-and-last-day"),
    ],
)
def test_the_first_fire_scan_lets_through_exactly_the_days_dateutil_fires_on(rule: str) -> None:
    start = datetime(2026, 1, 1, 9)  # noqa: DTZ001 (floating wall time, as the engine walks it)
    fits = _fires.day_filter(parse_recur(rule, "floating"), start)
    fired = {d.date() for d in du.rrulestr(rule, dtstart=start).between(start, start + timedelta(days=366), inc=True)}
    days = [(start + timedelta(days=i)).date() for i in range(366)]
    assert fired == {day for day in days if fits(day)}
