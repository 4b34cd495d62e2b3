"""The hunt made permanent, on a fixed budget: schedules built from hostile parts either parse
(and then their canonical text re-parses to the same schedule and the next fires come quickly)
or are refused with the schedule error; the CLI answers hostile values in one line."""

from __future__ import annotations

from datetime import datetime, timezone

from hostile import assert_one_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hosts import InvalidSchedule, Schedule

from cli import run_cli

NOW = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
FREQS = ["SECONDLY", "MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]
NUMS = st.one_of(st.integers(-400, 400), st.sampled_from([0, 60, 61, 366, 367, 999999999, 2**63]))


@st.composite
def rules(draw: st.DrawFn) -> str:
    year = draw(st.sampled_from([1, 999, 1000, 1970, 2026, 8999, 9999]))
    month, day = draw(st.integers(1, 12)), draw(st.integers(1, 28))
    parts = [f"FREQ={draw(st.sampled_from(FREQS))}"]
    for name in ("INTERVAL", "BYSECOND", "BYMINUTE", "BYHOUR", "BYMONTHDAY", "BYMONTH", "BYSETPOS", "COUNT"):
        if draw(st.booleans()):
            values = draw(st.lists(NUMS, min_size=1, max_size=3))
            parts.append(f"{name}={','.join(map(str, values))}")
    return f"DTSTART:{year:04d}{month:02d}{day:02d}T090000Z RRULE:{';'.join(parts)}"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rules())
def test_an_accepted_schedule_round_trips_and_answers(text: str) -> None:
    try:
        schedule = Schedule.parse(text)
    except InvalidSchedule:
        return  # refused with the schedule's own error (UnsupportedSchedule is one too)
    canonical = schedule.canonical()
    assert Schedule.parse(canonical).canonical() == canonical
    schedule.occurrences(3, after=NOW)
    schedule.last_at_or_before(NOW)


HOSTILE = st.one_of(
    st.sampled_from(["", "\0", "a\nb", "%41", "../../etc/passwd", "9" * 30, "-1", str(2**63), "[" * 5000, "é" * 200, "1e400"]),
    st.text(max_size=40),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    st.sampled_from(
        [
            ["policy", "set", "g/a", "--revision", "0", "--owner-ref", "o", "--min-interval"],
            ["policy", "set", "g/a", "--revision", "0", "--owner-ref", "o", "--min-interval", "1h", "--compute"],
            ["admit", "--goal", "g", "--agent", "a", "--trigger-time"],
            ["starts", "--limit"],
            ["policy", "show"],
            ["automation", "preview", "p", "--goal", "g", "--agent", "a", "--schedule"],
        ]
    ),
    HOSTILE,
)
def test_a_hostile_value_gets_one_line_and_a_documented_exit(sqlite_db: str, argv: list[str], value: str) -> None:
    result = run_cli(*argv, value, db=sqlite_db)
    if result.returncode != 0:
        assert_one_line(result)
    assert result.returncode in range(6)
