"""The RRULE engine against the shared public corpus, our own fixtures, and raw dateutil."""

from __future__ import annotations

import bisect
import json
import os
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path

import pytest
from dateutil import rrule as du
from hypothesis import example, given, settings
from hypothesis import strategies as st

from floorgate.admission.clock import iso
from floorgate.hosts import InvalidSchedule, Schedule, UnsupportedSchedule
from floorgate.hosts._memo import CHUNK

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "rrule_corpus"
FIXTURES = ROOT / "rrule_fixtures"
READINGS = json.loads((FIXTURES / "corpus_readings.json").read_text())


def jsonl(path: Path) -> list[dict]:  # type: ignore[type-arg]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


if not (CORPUS / "valid.jsonl").exists():  # the shared corpus lives beside the repository
    if os.environ.get("CI"):
        raise FileNotFoundError(f"the shared RRULE corpus is missing at {CORPUS}")
    pytest.skip(f"shared RRULE corpus not found at {CORPUS}", allow_module_level=True)

VALID = jsonl(CORPUS / "valid.jsonl")
INVALID = jsonl(CORPUS / "invalid.jsonl")


def ical(record: dict) -> str:  # type: ignore[type-arg]
    d = record["dtstart"]
    if record.get("dtstart_value") == "DATE":
        head = f"DTSTART;VALUE=DATE:{d.replace('-', '')}"
    else:
        compact = d.replace("-", "").replace(":", "")
        tz = record["tzid"]
        head = f"DTSTART:{compact}Z" if tz == "UTC" else (f"DTSTART;TZID={tz}:{compact}" if tz else f"DTSTART:{compact}")
    text = f"{head}\nRRULE:{record['rrule']}"
    if record.get("exdate"):
        ex = ",".join(e.replace("-", "").replace(":", "") for e in record["exdate"])
        text += f"\nEXDATE;TZID={record['tzid']}:{ex}" if record["tzid"] not in (None, "UTC") else f"\nEXDATE:{ex}"
    return text


def labels(record: dict, occurrences: list[datetime]) -> list[str]:  # type: ignore[type-arg]
    if record.get("dtstart_value") == "DATE":
        return [o.date().isoformat() for o in occurrences]
    return [o.replace(tzinfo=None).isoformat() for o in occurrences]


@pytest.mark.parametrize("record", INVALID, ids=[r["id"] for r in INVALID])
def test_every_invalid_corpus_rule_is_rejected_naming_the_part(record: dict) -> None:  # type: ignore[type-arg]
    dt = record.get("dtstart") or "1997-09-02T09:00:00"
    compact = dt.replace("-", "").replace(":", "")
    head = f"DTSTART;TZID={record['tzid']}:{compact}" if record.get("tzid") else f"DTSTART:{compact}"
    with pytest.raises(InvalidSchedule) as err:
        Schedule.parse(f"{head}\nRRULE:{record['rrule']}", allow_floating=True)
    message = str(err.value)
    assert message.startswith("RRULE ") and "RFC 5545" in message
    part = message.split()[1].rstrip(":")
    assert part == "syntax" or part in record["rrule"] or part == "FREQ", message


@pytest.mark.parametrize("record", VALID, ids=[r["id"] for r in VALID])
def test_every_valid_corpus_record(record: dict) -> None:  # type: ignore[type-arg]
    reading = READINGS.get(record["id"])
    if reading is not None and reading["kind"] == "refused":
        with pytest.raises(UnsupportedSchedule):
            Schedule.parse(ical(record), allow_floating=True)
        return
    schedule = Schedule.parse(ical(record), allow_floating=True)
    expected = record["expected"] if reading is None else reading["expected"]
    if reading is None and record.get("dtstart_value") != "DATE":
        expected = [datetime.fromisoformat(e).isoformat() for e in expected]
    complete = not record["count_only"] or reading is not None
    got = schedule.occurrences(len(expected) + (1 if complete else 0))
    assert labels(record, got)[: len(expected)] == expected
    if complete:
        assert len(got) == len(expected), "the rule produced more occurrences than the source lists"
    offsets = record.get("expected_utc_offsets")
    if offsets and reading is None:
        got_offsets = [o.strftime("%z") for o in got[: len(offsets)]]
        assert got_offsets == [x.replace(":", "") for x in offsets]


def test_readings_cover_exactly_the_documented_disagreements() -> None:
    disagreements = json.loads((CORPUS / "dateutil_disagreements.json").read_text())
    ours = {k for k in READINGS if not k.startswith("_")}
    # Every record we read differently is either a documented dateutil disagreement or one of
    # dateutil's own tests for an open reading we chose the other way.
    assert all(k in disagreements or k.startswith("dateutil-test") for k in ours)


@pytest.mark.parametrize("fixture", jsonl(FIXTURES / "dst.jsonl"), ids=lambda f: f["id"])
def test_dst_fixtures(fixture: dict) -> None:  # type: ignore[type-arg]
    schedule = Schedule.parse(fixture["schedule"])
    after = datetime.fromisoformat(fixture["after"].replace("Z", "+00:00"))
    got = schedule.occurrences(fixture["count"], after=after)
    assert [iso(o) for o in got] == fixture["expected_utc"]
    assert [o.isoformat() for o in got] == fixture["expected_local"]


@pytest.mark.parametrize("record", VALID, ids=[r["id"] for r in VALID])
def test_fast_queries_equal_the_full_walk(record: dict) -> None:  # type: ignore[type-arg]
    if READINGS.get(record["id"], {}).get("kind") == "refused":
        return
    schedule = Schedule.parse(ical(record), allow_floating=True)
    walk = list(schedule._engine.iterate())[:400] if record["count_only"] is False else schedule.occurrences(400)
    if not walk:
        return
    probes = (
        {walk[0] - timedelta(seconds=1)}
        | set(walk[:: max(1, len(walk) // 25)])
        | {o + timedelta(seconds=1) for o in walk[:: max(1, len(walk) // 25)]}
    )
    for t in sorted(probes):
        expected = next((o for o in walk if o > t), None)
        if expected is None and len(walk) == 400:
            continue  # beyond what we walked
        assert schedule.next_after(t) == expected, t
        before = [o for o in walk if o <= t]
        assert schedule.last_at_or_before(t) == (before[-1] if before else None), t


def test_matches_raw_dateutil_where_dateutil_is_right() -> None:
    checked = 0
    for record in VALID:
        if record["known_dateutil_disagreement"] or record.get("dtstart_value") or record.get("exdate") or record["id"] in READINGS:
            continue
        if any(tag.startswith("DST") for tag in record.get("tags", [])):
            continue  # dateutil returns non-existent wall labels there; compared via the fixtures instead
        dtstart = datetime.fromisoformat(record["dtstart"])
        rule = record["rrule"]
        if record["tzid"] is not None and "UNTIL=" in rule:
            continue  # raw dateutil would need the UNTIL converted to wall time by hand
        raw = du.rrulestr(rule, dtstart=dtstart)
        ours = Schedule.parse(ical(record), allow_floating=True)
        first = _take(raw, 30)
        assert [o.replace(tzinfo=None) for o in ours.occurrences(len(first))] == first, record["id"]
        checked += 1
    assert checked > 60


def _take(rule, n):  # type: ignore[no-untyped-def]
    out = []
    for value in rule:
        out.append(value)
        if len(out) == n:
            break
    return out


def test_years_old_dtstart_gives_dateutils_answer() -> None:
    schedule = Schedule.parse("DTSTART:20200101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=15")
    raw = du.rrule(du.MINUTELY, interval=15, dtstart=datetime(2020, 1, 1))
    probe = datetime(2026, 11, 29, 22, 7, 13)
    assert schedule.next_after(probe.replace(tzinfo=timezone.utc)).replace(tzinfo=None) == raw.after(probe)


_FREQS = ["MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY", "YEARLY"]
_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def rules(draw):  # type: ignore[no-untyped-def]
    freq = draw(st.sampled_from(_FREQS))
    parts = [f"FREQ={freq}", f"INTERVAL={draw(st.integers(1, 5 if freq in ('MONTHLY', 'YEARLY') else 40))}"]
    if freq in ("DAILY", "WEEKLY", "MONTHLY", "YEARLY") and draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, sorted(draw(st.sets(st.integers(0, 23), min_size=1, max_size=3))))))
    if freq in ("WEEKLY", "MONTHLY", "YEARLY") and draw(st.booleans()):
        parts.append("BYDAY=" + ",".join(sorted(draw(st.sets(st.sampled_from(_DAYS), min_size=1, max_size=3)))))
    if freq == "MONTHLY" and draw(st.booleans()) and not any(p.startswith("BYDAY") for p in parts):
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(draw(st.sets(st.integers(1, 28), min_size=1, max_size=3))))))
    if freq == "YEARLY" and draw(st.booleans()):
        parts.append("BYMONTH=" + ",".join(map(str, sorted(draw(st.sets(st.integers(1, 12), min_size=1, max_size=3))))))
    return ";".join(parts)


@settings(max_examples=150, deadline=None)
@given(
    rule=rules(),
    zone=st.sampled_from(["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe"]),
    start_days=st.integers(0, 4000),
    probe_minutes=st.integers(0, 3 * 365 * 24 * 60),
)
@example(rule="FREQ=YEARLY;INTERVAL=1;BYMONTH=2", zone="UTC", start_days=150, probe_minutes=0)  # February 30th: refused
def test_property_fast_next_equals_the_walk_and_increases(rule, zone, start_days, probe_minutes) -> None:  # type: ignore[no-untyped-def]
    start = datetime(2012, 1, 1, 7, 30) + timedelta(days=start_days)
    head = f"DTSTART:{start:%Y%m%dT%H%M%S}Z" if zone == "UTC" else f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}"
    try:
        schedule = Schedule.parse(f"{head}\nRRULE:{rule}")
    except UnsupportedSchedule as refused:  # e.g. YEARLY;BYMONTH=2 from a DTSTART on the 30th: never an occurrence
        assert "never fires" in str(refused)
        assert du.rrulestr(f"DTSTART:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}").after(start, inc=True) is None
        return
    probe = start.replace(tzinfo=timezone.utc) + timedelta(minutes=probe_minutes)
    fast = schedule.occurrences(5, after=probe)
    walked = []
    for occurrence in schedule._engine.iterate():
        if occurrence > probe:
            walked.append(occurrence)
            if len(walked) == 5:
                break
    assert fast == walked
    assert all(a < b for a, b in pairwise(fast))
    if not walked:  # a rule that has ended
        assert schedule.next_after(probe) is None
        return
    assert schedule.next_after(probe) == walked[0]  # FREQ and INTERVAL alone: by arithmetic
    assert schedule.last_at_or_before(walked[0]) == walked[0]
    assert schedule.last_at_or_before(walked[1] - timedelta(seconds=1)) == walked[0]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("DTSTART:20261201T090000\nRRULE:FREQ=DAILY", "time zone"),
        ("DTSTART;VALUE=DATE:20261201\nRRULE:FREQ=DAILY", "time zone"),
        ("RRULE:FREQ=DAILY", "DTSTART: missing"),
        ("DTSTART;TZID=Nowhere/Town:20261201T090000\nRRULE:FREQ=DAILY", "IANA"),
        ("DTSTART;TZID=Europe/Berlin:20261301T090000\nRRULE:FREQ=DAILY", "DTSTART"),
        ("DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=DAILY\nRRULE:FREQ=WEEKLY", "more than one RRULE"),
        ("every 0m", "interval"),
        ("daily at 25:00 Europe/Berlin", "time of day"),
        ("weekly on XX at 07:00 UTC", "weekday"),
    ],
)
def test_schedules_without_zone_or_start_are_rejected(text: str, needle: str) -> None:
    with pytest.raises(InvalidSchedule) as err:
        Schedule.parse(text, now=datetime(2026, 11, 29, tzinfo=timezone.utc))
    assert needle in str(err.value)


def test_canonical_form_is_stable_and_compares_by_meaning() -> None:
    a = Schedule.parse("DTSTART;TZID=Europe/Berlin:20261201T090000 RRULE:BYDAY=TH,MO;FREQ=WEEKLY;INTERVAL=1")
    b = Schedule.parse("DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TH")
    assert a.canonical() == b.canonical() == "DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=WEEKLY;BYDAY=MO,TH"
    assert Schedule.parse(a.canonical()).canonical() == a.canonical()


@pytest.mark.parametrize("case", jsonl(FIXTURES / "floor_compat.jsonl"), ids=lambda c: c["id"])
def test_floor_compatible_schedules(case: dict) -> None:  # type: ignore[type-arg]
    from floorgate.admission import parse_interval
    from floorgate.hosts.flooring import floor_compatible

    now = datetime(2026, 11, 29, tzinfo=timezone.utc)
    desired = floor_compatible(Schedule.parse(case["schedule"]), parse_interval(case["floor"]), now)
    if case["expected"] is None:
        assert desired.schedule is None and "closer than the floor" in desired.hold_reason
    else:
        assert desired.schedule.canonical() == case["expected"] and desired.raised is case["raised"]


# Around a zone's real offset changes: the 24 h jump of Samoa (2011), half-hour DST (Lord Howe),
# and ordinary forward and backward changes. DTSTART the day before; every probe minute checked.
TRANSITIONS = [
    ("samoa-skips-a-day", "Pacific/Apia", datetime(2011, 12, 29, 0, 0), datetime(2011, 12, 30, 8, 0, tzinfo=timezone.utc)),
    ("lord-howe-half-hour-forward", "Australia/Lord_Howe", datetime(2026, 10, 3, 0, 0), datetime(2026, 10, 3, 15, 0, tzinfo=timezone.utc)),
    ("lord-howe-half-hour-back", "Australia/Lord_Howe", datetime(2026, 4, 4, 0, 0), datetime(2026, 4, 4, 15, 0, tzinfo=timezone.utc)),
    ("berlin-forward", "Europe/Berlin", datetime(2026, 3, 28, 0, 0), datetime(2026, 3, 29, 1, 0, tzinfo=timezone.utc)),
    ("new-york-back", "America/New_York", datetime(2026, 10, 31, 0, 0), datetime(2026, 11, 1, 6, 0, tzinfo=timezone.utc)),
]


@pytest.mark.parametrize("rule", ["FREQ=MINUTELY;INTERVAL=7", "FREQ=MINUTELY;INTERVAL=30", "FREQ=HOURLY;BYMINUTE=0,30,45"])
@pytest.mark.parametrize("case", TRANSITIONS, ids=[c[0] for c in TRANSITIONS])
def test_queries_near_a_real_offset_change_equal_the_walk_from_dtstart(case, rule: str) -> None:  # type: ignore[no-untyped-def]
    _, zone, start, change = case
    schedule = Schedule.parse(f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}\nRRULE:{rule}")
    walk = []
    for occurrence in schedule._engine.iterate():
        walk.append(occurrence)
        if occurrence > change + timedelta(hours=30):
            break
    probes = [change + timedelta(minutes=m, seconds=s) for m in range(-90, 26 * 60, 1) for s in (0, 1)]
    for t in probes:
        i = bisect.bisect_right(walk, t)
        assert schedule.next_after(t) == walk[i], t
        assert schedule.last_at_or_before(t) == (walk[i - 1] if i else None), t


def _walked(schedule: Schedule, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many wall times each query below has dateutil produce."""
    counts: list[int] = []
    engine = schedule._engine
    naive = engine._naive

    def counting(start, walk_from):  # type: ignore[no-untyped-def]
        counts.append(0)
        for value in naive(start, walk_from):
            counts[-1] += 1
            yield value

    monkeypatch.setattr(engine, "_naive", counting)
    return counts


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "UTC"])
def test_a_per_minute_query_walks_from_the_asked_minute_on_dst_days_too(zone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # BYSECOND=0 keeps it a walk (a bare FREQ=MINUTELY is answered by arithmetic, walking nothing).
    schedule = Schedule.parse(f"DTSTART;TZID={zone}:20200101T000000\nRRULE:FREQ=MINUTELY;BYSECOND=0")
    counts = _walked(schedule, monkeypatch)
    # Every 17 minutes over the days around 2026's changes, skipping the hour after a jump forward
    # (wall times in the gap become later instants: that hour is walked back, by the jump's size).
    for base in (
        datetime(2026, 3, 27, tzinfo=timezone.utc),
        datetime(2026, 10, 2, tzinfo=timezone.utc),
        datetime(2026, 10, 30, tzinfo=timezone.utc),
    ):
        for k in range(0, 4 * 24 * 60, 17):
            t = base + timedelta(minutes=k, seconds=5)
            change = schedule._engine._change(t)
            if change is not None and change[1] > timedelta(0):
                continue
            schedule._engine._memo = None  # a first query: no occurrence known to walk on from
            schedule.next_after(t)
            schedule._engine._memo = None
            schedule.last_at_or_before(t)
    assert counts and max(counts) <= CHUNK + 1  # the asked minute, and the few kept for the next query


_CACHE_RULES = [
    ("berlin-every-7m", "DTSTART;TZID=Europe/Berlin:20260328T000000\nRRULE:FREQ=MINUTELY;INTERVAL=7"),
    ("new-york-hourly-at-30", "DTSTART;TZID=America/New_York:20261031T000000\nRRULE:FREQ=HOURLY;BYMINUTE=30"),
    ("lord-howe-daily-0215", "DTSTART;TZID=Australia/Lord_Howe:20261001T021500\nRRULE:FREQ=DAILY"),
    ("utc-count-5", "DTSTART:20261101T000000Z\nRRULE:FREQ=HOURLY;COUNT=5"),
    ("utc-until", "DTSTART:20261101T000000Z\nRRULE:FREQ=MINUTELY;INTERVAL=20;UNTIL=20261101T030000Z"),
]


@pytest.mark.parametrize("name, text", _CACHE_RULES, ids=[c[0] for c in _CACHE_RULES])
def test_answers_from_the_last_walk_equal_a_fresh_walk_in_any_query_order(name: str, text: str) -> None:
    import random

    cached = Schedule.parse(text)
    origin = cached.dtstart.replace(tzinfo=timezone.utc)
    rng = random.Random(name)
    probes = [origin + timedelta(minutes=m) for m in range(-60, 3 * 24 * 60, 11)]
    probes += [origin + timedelta(minutes=rng.randrange(-60, 3 * 24 * 60), seconds=rng.randrange(60)) for _ in range(400)]
    rng.shuffle(probes[len(probes) // 2 :])  # half in order (a host's fires), half jumping about
    for t in probes:
        fresh = Schedule.parse(text)._engine  # no walk before this one: nothing cached
        assert cached.next_after(t) == fresh.next_after(t), t
        fresh = Schedule.parse(text)._engine
        assert cached.last_at_or_before(t) == fresh.last_at_or_before(t), t


@pytest.mark.parametrize(
    "spelled, short",
    [
        ("every 15 minutes", "every 15m"),
        ("every 1 minute", "every 1m"),
        ("every minute", "every 1m"),
        ("every 90 secs", "every 90s"),
        ("every hour", "every 1h"),
        ("every 2 Hours in Europe/Berlin", "every 2h in Europe/Berlin"),
        ("every day from 2026-12-01T08:00 in Europe/Berlin", "every 1d from 2026-12-01T08:00 in Europe/Berlin"),
        ("every 2 weeks", "every 14d"),
    ],
    ids=lambda v: v.replace(" ", "-"),
)
def test_an_interval_spelled_out_is_its_short_form(spelled: str, short: str) -> None:
    now = datetime(2026, 11, 29, 10, 17, tzinfo=timezone.utc)
    assert Schedule.parse(spelled, now=now).canonical() == Schedule.parse(short, now=now).canonical()


@pytest.mark.parametrize("text", ["every 15 fortnights", "every -3 minutes", "every 0 minutes", "every minutes 15"])
def test_a_spelled_out_interval_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(InvalidSchedule, match="schedule:"):
        Schedule.parse(text, now=datetime(2026, 11, 29, tzinfo=timezone.utc))
