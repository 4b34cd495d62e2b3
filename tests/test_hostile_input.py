"""Input that used to break later: each is refused at once, in one line (exit 2), and writes
nothing; schedules that are accepted re-parse from their canonical text."""

from __future__ import annotations

from datetime import timedelta

import pytest
from basics import T0
from hostile import assert_one_line, dump

from floorgate.admission import FixedClock, Store
from floorgate.hosts import Schedule, UnsupportedSchedule

from cli import run_cli
from helpers import add_automation, floor

POLICY = ["--revision", "1", "--owner-ref", "o"]
ADD = ["automation", "add", "new", "--goal", "g", "--agent", "a"]
CASES = [
    pytest.param(
        ["admit", "--goal", "g", "--agent", "a", "--trigger-time", "0001-01-01T00:00:00+14:00"],
        "--trigger-time",
        id="trigger-before-year-1",
    ),
    pytest.param(
        ["admit", "--goal", "g", "--agent", "a", "--trigger-time", "1969-12-31T23:59:59Z"], "--trigger-time", id="trigger-before-epoch"
    ),
    pytest.param(
        ["admit", "--goal", "g", "--agent", "a", "--trigger-time", "9999-12-31T23:59:59-14:00"], "--trigger-time", id="trigger-after-9999"
    ),
    pytest.param(["starts", "--limit", str(2**63)], "limit", id="starts-limit-2^63"),
    pytest.param(["starts", "--limit", "-1"], "limit", id="starts-limit-negative"),
    pytest.param(["policy", "history", "g/a", "--limit", str(2**63)], "limit", id="history-limit-2^63"),
    pytest.param(["policy", "set", "g/a", "--compute", "[" * 100_000 + "]" * 100_000, *POLICY], "--compute", id="compute-nested"),
    pytest.param(["policy", "set", "g/a", "--compute-file", "a\0b", *POLICY], "--compute-file", id="compute-file-nul"),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;BYSECOND=60", "--", "true"], "BYSECOND", id="bysecond-60"
    ),
    pytest.param([*ADD, "--schedule", "every 99999999999m", "--", "true"], "schedule", id="every-huge"),
    pytest.param([*ADD, "--schedule", "every 99999999999999999999d", "--", "true"], "schedule", id="every-overflow"),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=YEARLY;INTERVAL=999999999", "--", "true"], "INTERVAL", id="interval-huge"
    ),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=MONTHLY;BYMONTHDAY=1;BYSETPOS=5", "--", "true"],
        "BYSETPOS",
        id="bysetpos-beyond",
    ),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=HOURLY;BYMINUTE=1;BYSETPOS=3", "--", "true"],
        "BYSETPOS",
        id="bysetpos-hourly",
    ),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=DAILY;BYMONTH=2;BYMONTHDAY=30", "--", "true"], "BYMONTHDAY", id="feb-30"
    ),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=DAILY", "--model", "m" * 129, "--", "true"], "model", id="model-129"
    ),
    pytest.param(
        [*ADD, "--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=DAILY", "--backend", "b" * 129, "--", "true"], "backend", id="backend-129"
    ),
    pytest.param(["automation", "edit", "x", "--model", "m" * 200], "model", id="edit-model-200"),
]


@pytest.mark.parametrize(("argv", "field"), CASES)
def test_hostile_input_is_refused_in_one_line_and_writes_nothing(store: Store, argv: list[str], field: str) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock, "x")
    floor(store, clock, "g/a", timedelta(hours=1))
    before = dump(store)
    result = run_cli(*argv, db=store.url)
    assert_one_line(result)
    assert result.returncode == 2, result
    assert field in result.stderr
    assert dump(store) == before


def test_preview_near_the_last_plannable_year_finishes(store: Store) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    schedule = "DTSTART:21991231T230000Z RRULE:FREQ=HOURLY"
    result = run_cli("automation", "preview", "p", "--goal", "g", "--agent", "a", "--schedule", schedule, db=store.url)
    assert result.returncode == 0, result
    assert "2199-12-31" in result.stdout


def test_preview_of_a_start_beyond_the_plannable_years_is_one_line(store: Store) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    schedule = "DTSTART:89991231T230000Z RRULE:FREQ=HOURLY"
    result = run_cli("automation", "preview", "p", "--goal", "g", "--agent", "a", "--schedule", schedule, db=store.url)
    assert_one_line(result)
    assert result.returncode == 2 and "DTSTART" in result.stderr and "1900..2200" in result.stderr, result


@pytest.mark.parametrize(
    "text",
    [
        "DTSTART:09991201T090000Z RRULE:FREQ=DAILY",
        "DTSTART:00010101T000000Z RRULE:FREQ=DAILY;UNTIL=00020101T000000Z",
        "DTSTART;VALUE=DATE:05000101 RRULE:FREQ=YEARLY",
        "DTSTART;TZID=Europe/Berlin:09990101T090000 RRULE:FREQ=WEEKLY EXDATE;TZID=Europe/Berlin:09990108T090000",
    ],
)
def test_a_year_before_1900_is_refused_naming_dtstart(text: str) -> None:
    with pytest.raises(UnsupportedSchedule, match=r"DTSTART: year \d+ is outside 1900\.\.2200"):
        Schedule.parse(text, allow_floating=True)


@pytest.mark.parametrize(
    "text",
    [
        "DTSTART:19000101T000000Z RRULE:FREQ=DAILY",
        "DTSTART;VALUE=DATE:19000101 RRULE:FREQ=YEARLY",
        "DTSTART;TZID=Europe/Berlin:19000101T090000 RRULE:FREQ=WEEKLY EXDATE;TZID=Europe/Berlin:19000108T090000",
    ],
)
def test_the_first_plannable_year_round_trips_through_its_canonical_text(text: str) -> None:
    schedule = Schedule.parse(text, allow_floating=True)
    assert Schedule.parse(schedule.canonical(), allow_floating=True).canonical() == schedule.canonical()


def test_a_rejected_ack_writes_nothing_when_no_host_would_answer(store: Store) -> None:
    # An apscheduler timer (the default): read back by a running host, and none runs.
    added = run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "true", db=store.url)
    assert added.returncode == 0, added
    before = dump(store)
    result = run_cli("automation", "ack", "x", "--wait", "1s", db=store.url)
    assert result.returncode == 3, result
    assert "nothing recorded" in result.stdout
    assert dump(store) == before


def test_a_percent_in_a_path_is_escaped_for_cron_and_a_newline_is_refused(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import re
    from pathlib import Path

    from floorgate.admission import InvalidInput
    from floorgate.scheduler.app.timers import TimerService

    svc = TimerService(store)
    svc.state_dir = Path(tmp_path / "pct%41dir")
    line = svc._cron_command("x")
    assert re.search(r"(?<!\\)%", line) is None, line  # cron would cut the command at a bare %
    assert "pct\\%41dir" in line
    svc.state_dir = Path(tmp_path / "a\nb")
    with pytest.raises(InvalidInput, match="line break"):
        svc._cron_command("x")
