"""Windows and amounts as values: one grammar for ``--per``, exact boundaries, DST days."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from floorgate.admission import InvalidInput
from floorgate.admission.windows import (
    NEVER,
    WindowKind,
    amount_frees_at,
    count_frees_at,
    format_tokens,
    looser_window,
    parse_tokens,
    parse_usd,
    parse_window,
    usd_to_micros,
)

UTC = timezone.utc
US = timedelta(microseconds=1)


def utc(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=UTC)


WINDOWS = [
    ("rolling-1d", "1d", WindowKind.ROLLING, "1d"),
    ("rolling-12h", "12h", WindowKind.ROLLING, "12h"),
    ("rolling-iso", "PT90M", WindowKind.ROLLING, "1h30m"),
    ("day-berlin", "day@Europe/Berlin", WindowKind.DAY, "day@Europe/Berlin"),
    ("week-utc", "week@UTC", WindowKind.WEEK, "week@UTC"),
    ("month-tokyo", " month@Asia/Tokyo ", WindowKind.MONTH, "month@Asia/Tokyo"),
    ("uppercase-kind", "DAY@UTC", WindowKind.DAY, "day@UTC"),
]


@pytest.mark.parametrize(("text", "kind", "canonical"), [w[1:] for w in WINDOWS], ids=[w[0] for w in WINDOWS])
def test_window_grammar_reads_back_canonical(text: str, kind: WindowKind, canonical: str) -> None:
    window = parse_window(text)
    assert window.kind is kind and window.text() == canonical
    assert parse_window(window.text()) == window


BAD_WINDOWS = [
    ("empty", "", "give a window"),
    ("zero", "0", "above 0"),
    ("negative", "-1d", "not a window"),
    ("over-cap", "400d", "at most"),
    ("over-the-interval-cap", "99999d", "at most 366d"),
    ("over-every-cap", "1000000d", "at most 366d"),
    ("unknown-period", "fortnight@UTC", "day, week or month"),
    ("unknown-zone", "day@Mars/Olympus", "unknown zone"),
    ("zone-in-the-wrong-case", "day@europe/berlin", "zone names are case-sensitive: Europe/Berlin"),
    ("zone-path-escape", "day@../../etc/passwd", "not an IANA zone"),
    ("no-zone", "day@", "not an IANA zone"),
    ("this-machines-zone", "day@localtime", "not a fixed zone"),
    ("the-default-rules", "week@posixrules", "not a fixed zone"),
    ("leap-second-scale", "day@right/UTC", "not a fixed zone"),
    ("posix-copy", "month@posix/Europe/Berlin", "not a fixed zone"),
    ("bare-period", "day", "not a window"),
    ("garbage", "daily", "not a window"),
]


@pytest.mark.parametrize(("text", "message"), [b[1:] for b in BAD_WINDOWS], ids=[b[0] for b in BAD_WINDOWS])
def test_bad_windows_name_the_flag(text: str, message: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_window(text)
    assert err.value.field == "--per" and message in str(err.value)


CALENDAR = [
    # (id, window, instant, period start, next period start)
    ("berlin-spring-forward-23h", "day@Europe/Berlin", utc(2026, 3, 29, 12), utc(2026, 3, 28, 23), utc(2026, 3, 29, 22)),
    ("berlin-fall-back-25h", "day@Europe/Berlin", utc(2026, 10, 25, 12), utc(2026, 10, 24, 22), utc(2026, 10, 25, 23)),
    ("berlin-just-before-midnight", "day@Europe/Berlin", utc(2026, 12, 1, 22, 59, 59, 999999), utc(2026, 11, 30, 23), utc(2026, 12, 1, 23)),
    ("berlin-at-midnight", "day@Europe/Berlin", utc(2026, 12, 1, 23), utc(2026, 12, 1, 23), utc(2026, 12, 2, 23)),
    ("santiago-skipped-midnight", "day@America/Santiago", utc(2026, 9, 6, 12), utc(2026, 9, 6, 4), utc(2026, 9, 7, 3)),
    ("week-monday-berlin", "week@Europe/Berlin", utc(2026, 12, 3, 12), utc(2026, 11, 29, 23), utc(2026, 12, 6, 23)),
    ("week-across-dst", "week@Europe/Berlin", utc(2026, 3, 27, 12), utc(2026, 3, 22, 23), utc(2026, 3, 29, 22)),
    ("month-first-berlin", "month@Europe/Berlin", utc(2026, 12, 15), utc(2026, 11, 30, 23), utc(2026, 12, 31, 23)),
    ("month-december-to-january", "month@UTC", utc(2026, 12, 31, 23, 59), utc(2026, 12, 1), utc(2027, 1, 1)),
    ("samoa-skipped-day", "day@Pacific/Apia", utc(2011, 12, 29, 12), utc(2011, 12, 29, 10), utc(2011, 12, 30, 10)),
]


@pytest.mark.parametrize(("text", "at", "start", "nxt"), [c[1:] for c in CALENDAR], ids=[c[0] for c in CALENDAR])
def test_calendar_periods_are_exact(text: str, at: datetime, start: datetime, nxt: datetime) -> None:
    window = parse_window(text)
    assert window.period_start(at) == start
    assert window.next_period_start(at) == nxt


def test_dst_days_are_23_and_25_hours() -> None:
    day = parse_window("day@Europe/Berlin")
    short, long_ = utc(2026, 3, 29, 12), utc(2026, 10, 25, 12)
    assert day.next_period_start(short) - day.period_start(short) == timedelta(hours=23)
    assert day.next_period_start(long_) - day.period_start(long_) == timedelta(hours=25)


def test_rolling_boundary_is_exact_to_the_microsecond() -> None:
    window = parse_window("1d")
    start = utc(2026, 12, 1, 9)
    assert window.leaves_at(start, start) == start + timedelta(days=1)
    assert window.holds(start, start + timedelta(days=1) - US)
    assert not window.holds(start, start + timedelta(days=1))
    three = [start, start + timedelta(hours=1), start + timedelta(hours=2)]
    frees = count_frees_at(three, 3, window, start + timedelta(hours=3))
    assert frees == start + timedelta(days=1)
    assert count_frees_at(three, 3, window, frees - US) == frees  # one microsecond before: still full
    assert count_frees_at(three, 3, window, frees) is None  # at it: one more fits


def test_calendar_boundary_is_exact_to_the_microsecond() -> None:
    window = parse_window("day@Europe/Berlin")
    start = utc(2026, 3, 29, 5)
    nxt = window.next_period_start(start)
    assert count_frees_at([start], 1, window, nxt - US) == nxt
    assert count_frees_at([start], 1, window, nxt) is None


def test_budget_frees_when_enough_ages_out() -> None:
    window = parse_window("10h")
    t0 = utc(2026, 12, 1)
    entries = [(t0, 400), (t0 + timedelta(hours=1), 300), (t0 + timedelta(hours=2), 200)]
    now = t0 + timedelta(hours=3)
    assert amount_frees_at(entries, 1000, 100, window, now) is None  # 900 + 100 fits
    # 900 + 300 > 1000: the first (400) must leave; then 500 + 300 fits.
    assert amount_frees_at(entries, 1000, 300, window, now) == t0 + timedelta(hours=10)
    # 900 + 700: the first two must leave.
    assert amount_frees_at(entries, 1000, 700, window, now) == t0 + timedelta(hours=11)
    assert amount_frees_at(entries, 1000, 1001, window, now) == NEVER


TOKENS = [
    ("plain", "1200", 1200),
    ("kilo", "500k", 500_000),
    ("kilo-upper", "500K", 500_000),
    ("mega", "2M", 2_000_000),
    ("fraction", "1.5M", 1_500_000),
    ("giga", "1G", 1_000_000_000),
    ("underscores", "2_000", 2000),
]


@pytest.mark.parametrize(("text", "tokens"), [t[1:] for t in TOKENS], ids=[t[0] for t in TOKENS])
def test_token_amounts(text: str, tokens: int) -> None:
    assert parse_tokens(text) == tokens
    assert parse_tokens(format_tokens(tokens)) == tokens


BAD_TOKENS = [
    ("negative", "-5"),
    ("exponent", "1e6"),
    ("nan", "NaN"),
    ("lowercase-m", "2m"),
    ("fraction-of-a-token", "1.0005k"),
    ("over-cap", "2000G"),
    ("zero", "0"),
    ("empty", ""),
    ("float-text", "1.5"),
]


@pytest.mark.parametrize("text", [b[1] for b in BAD_TOKENS], ids=[b[0] for b in BAD_TOKENS])
def test_bad_token_amounts(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_tokens(text)
    assert err.value.field == "--budget-tokens"


@pytest.mark.parametrize("text", ["99999999999999999999", "1001000M", "1000000000001"], ids=["many-digits", "suffixed", "one-over"])
def test_an_amount_over_the_cap_says_so_however_it_is_written(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_tokens(text)
    assert "is above the cap of 1,000,000,000,000 tokens" in str(err.value)


def test_a_fraction_of_a_token_names_the_whole_numbers_around_it() -> None:
    with pytest.raises(InvalidInput) as err:
        parse_tokens("1.2345k")
    assert "'1.2345k' is 1234.5 tokens; give a whole number such as 1234 or 1235" in str(err.value)
    with pytest.raises(InvalidInput) as err:
        parse_tokens("0.5")
    assert "'0.5' is 0.5 tokens; give a whole number such as 1" in str(err.value)  # 0 admits nothing: not offered


USD = [
    ("whole", "20", Decimal(20)),
    ("cents", "0.25", Decimal("0.25")),
    ("six-places", "3.000001", Decimal("3.000001")),
    ("dollar-sign", "$5", Decimal(5)),
]


@pytest.mark.parametrize(("text", "value"), [u[1:] for u in USD], ids=[u[0] for u in USD])
def test_usd_amounts_are_exact(text: str, value: Decimal) -> None:
    parsed = parse_usd(text)
    assert parsed == value and usd_to_micros(parsed) == int(value * 1_000_000)


BAD_USD = [
    ("negative", "-3"),
    ("seven-places", "1.0000001"),
    ("nan", "NaN"),
    ("infinity", "Infinity"),
    ("exponent", "1e3"),
    ("over-cap", "2000000"),
    ("zero", "0"),
    ("comma", "1,5"),
]


@pytest.mark.parametrize("text", [b[1] for b in BAD_USD], ids=[b[0] for b in BAD_USD])
def test_bad_usd_amounts(text: str) -> None:
    with pytest.raises(InvalidInput) as err:
        parse_usd(text)
    assert err.value.field == "--budget-usd"


LOOSER = [
    ("same", "1d", "1d", False),
    ("longer-rolling", "1d", "2d", False),
    ("shorter-rolling", "1d", "12h", True),
    ("rolling-to-calendar", "1d", "day@UTC", True),
    ("calendar-to-rolling", "day@UTC", "1d", True),
    ("other-zone", "day@UTC", "day@Europe/Berlin", True),
]


@pytest.mark.parametrize(("before", "after", "looser"), [x[1:] for x in LOOSER], ids=[x[0] for x in LOOSER])
def test_which_window_changes_loosen(before: str, after: str, looser: bool) -> None:
    assert looser_window(parse_window(before), parse_window(after)) is looser


ZONES = st.sampled_from(
    ["UTC", "Europe/Berlin", "America/New_York", "America/Santiago", "Australia/Lord_Howe", "Pacific/Apia", "Asia/Kolkata"]
)
# Microseconds since 1990 to 2040, as aware UTC instants.
INSTANTS = st.integers(min_value=0, max_value=50 * 365 * 86_400 * 10**6).map(lambda us: utc(1990, 1, 1) + timedelta(microseconds=us))


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(["day", "week", "month"]), zone=ZONES, at=INSTANTS)
def test_calendar_period_contains_its_instant_and_tiles_time(kind: str, zone: str, at: datetime) -> None:
    window = parse_window(f"{kind}@{zone}")
    start, nxt = window.period_start(at), window.next_period_start(at)
    assert start <= at < nxt
    assert window.period_start(start) == start  # a period begins at its own start
    assert window.period_start(nxt) == nxt and window.period_start(nxt - US) == start  # periods tile time
    local = start.astimezone(ZoneInfo(zone))
    first_day = {"day": True, "week": local.weekday() == 0, "month": local.day == 1}[kind]
    assert first_day or (start - US).astimezone(ZoneInfo(zone)).date() < local.date()  # (a skipped day starts later)


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(min_value=0, max_value=10**6), min_size=0, max_size=12),
    limit=st.integers(min_value=1, max_value=6),
    hours=st.integers(min_value=1, max_value=48),
)
def test_count_frees_at_is_the_first_instant_one_more_fits(offsets: list[int], limit: int, hours: int) -> None:
    window = parse_window(f"{hours}h")
    now = utc(2026, 12, 1)
    starts = [now - timedelta(seconds=o) for o in offsets]
    frees = count_frees_at(starts, limit, window, now)
    if frees is None:
        assert sum(window.holds(s, now) for s in starts) < limit
    else:
        assert frees > now
        assert sum(window.holds(s, frees) for s in starts) < limit  # at it: one more fits
        assert sum(window.holds(s, frees - US) for s in starts) >= limit  # a microsecond before: not


def test_a_clock_set_back_never_frees_what_was_counted() -> None:
    window = parse_window("1h")
    now = utc(2026, 12, 1, 12)
    later = now + timedelta(hours=5)  # recorded by a clock that has since gone back
    assert count_frees_at([later], 1, window, now) == later + timedelta(hours=1)
    assert amount_frees_at([(later, 10)], 10, 1, window, now) == later + timedelta(hours=1)
    day = parse_window("day@UTC")
    assert count_frees_at([now + timedelta(days=2)], 1, day, now) is not None
