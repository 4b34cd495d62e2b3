"""The engine's memo of computed occurrences and its arithmetic on steady offset spans: answers
with the memo equal the walk from DTSTART in any probe order (forwards, backwards, jumping,
across real offset changes), the memo stays one complete interval within its bound, a host's
fires walk rarely, and threads sharing a schedule get the same answers."""

from __future__ import annotations

import bisect
import random
import threading
from datetime import datetime, timedelta, timezone
from itertools import islice
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_rrule import _walked

from floorgate.admission.errors import InvalidInput
from floorgate.hosts import Schedule, _memo
from floorgate.hosts._grid import offset_at
from floorgate.hosts._memo import CAP, CHUNK, CHUNK_MAX

UTC = timezone.utc


def _t(minutes: float) -> datetime:
    return datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=minutes)


def _seg(lo: float, keys: list[float], ended: bool = False) -> _memo.Memo:
    ks = [_t(k) for k in keys]
    return _memo.segment(_t(lo), ks, [f"v{k:g}" for k in keys], ended, _memo.END_AWARE)


def _known(memo: _memo.Memo) -> tuple[float, float | None, list[float]]:
    """(lo, hi or None when ended, keys) in minutes, checking the memo's own invariants."""
    lo, hi, keys, values = memo
    minutes = [(k - _t(0)).total_seconds() / 60 for k in keys]
    assert list(keys) == sorted(set(keys)) and all(k > lo for k in keys)
    assert [f"v{m:g}" for m in minutes] == [v for v in values if v is not None]
    ended = hi == _memo.END_AWARE
    assert len(values) == len(keys) + ended and (not ended or values[-1] is None)
    assert ended or hi == keys[-1]
    return (lo - _t(0)).total_seconds() / 60, None if ended else minutes[-1], minutes


# -- the memo's algebra -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "old, new, expected",
    [
        # new continues old from its last key (the next fire)
        ((0, [1, 2, 3]), (3, [4, 5]), (0, 5, [1, 2, 3, 4, 5])),
        # new starts inside old and reaches further
        ((0, [1, 2, 3]), (1.5, [2, 3, 4]), (0, 4, [1, 2, 3, 4])),
        # new starts before old and reaches into it (a walk back across the gap)
        ((5, [6, 7, 8]), (2, [3, 4, 6]), (2, 8, [3, 4, 6, 7, 8])),
        # new lies inside old: nothing to add
        ((0, [1, 2, 3, 4]), (1, [2, 3]), (0, 4, [1, 2, 3, 4])),
        # apart: the new one replaces the old
        ((0, [1, 2]), (3, [4, 5]), (3, 5, [4, 5])),
        ((10, [11, 12]), (1, [2, 3]), (1, 3, [2, 3])),
    ],
)
def test_merge_unites_intervals_that_meet_and_replaces_apart(old, new, expected) -> None:  # type: ignore[no-untyped-def]
    assert _known(_memo.merge(_seg(*old), _seg(*new), _t(new[0]))) == expected


def test_merge_keeps_the_end_of_a_rule() -> None:
    ended = _memo.merge(_seg(0, [1, 2]), _seg(2, [3], ended=True), _t(2))
    assert _known(ended) == (0, None, [1, 2, 3])
    assert _memo.covers(ended, _t(10_000)) and ended[3][bisect.bisect_right(ended[2], _t(10_000))] is None
    assert _known(_memo.merge(ended, _seg(1, [2, 3], ended=True), _t(1))) == (0, None, [1, 2, 3])
    assert _known(_memo.merge(ended, _seg(0.5, [1]), _t(1))) == (0, None, [1, 2, 3])


@pytest.mark.parametrize("at, first, last", [(0, 0, CAP - 1), (1000, 1001 - CAP // 4, 1001 + 3 * CAP // 4 - 1), (1999.5, 2000 - CAP, 1999)])
def test_trim_keeps_cap_occurrences_around_the_asked_instant_and_stays_complete(at: float, first: int, last: int) -> None:
    lo, hi, keys = _known(_memo.trim(_seg(-1, list(range(2000))), _t(at)))
    assert keys == list(range(first, last + 1))
    assert lo == (first - 1 if first else -1)  # complete from the key before the first kept one
    assert hi == last


def test_trim_keeps_the_end_when_it_keeps_the_last_key() -> None:
    _, hi, keys = _known(_memo.trim(_seg(-1, list(range(2000)), ended=True), _t(1999.5)))
    assert hi is None and keys[-1] == 1999 and len(keys) == CAP


def test_a_gap_is_walked_when_it_likely_holds_few_enough_occurrences() -> None:
    memo = _seg(0, [1, 2, 3, 4])  # one occurrence a minute
    assert _memo.budget(memo) == CHUNK  # a small memo walks a continuation's few
    assert _memo.near(memo, 60 * CHUNK, CHUNK) and not _memo.near(memo, 60 * (CHUNK + 1), CHUNK)
    half = CAP // 2
    big = _seg(0, list(range(1, half + 1)))
    assert _memo.budget(big) == half  # while it has room, the memo may double
    assert _memo.near(big, 60 * half, half) and not _memo.near(big, 60 * (half + 1), half)
    assert _memo.budget(_seg(0, list(range(1, CAP + 1)))) == CHUNK  # full: only the next few
    assert _memo.chunk(None) == CHUNK and _memo.chunk(big) == CHUNK_MAX


# -- answers with the memo equal the walk from DTSTART ------------------------------------------
# The days before real offset changes: Samoa's skipped day, Lord Howe's half hours, Berlin, New York.
def _wall(text: str) -> datetime:
    """A naive wall time (DTSTART is written in its zone's wall time)."""
    return datetime.fromisoformat(text)


_CHANGES = [
    ("Pacific/Apia", _wall("2011-12-29")),
    ("Australia/Lord_Howe", _wall("2026-04-04")),
    ("Australia/Lord_Howe", _wall("2026-10-03")),
    ("Europe/Berlin", _wall("2026-03-28")),
    ("Europe/Berlin", _wall("2026-10-24")),
    ("America/New_York", _wall("2026-03-07")),
    ("America/New_York", _wall("2026-10-31")),
    ("UTC", _wall("2026-06-01")),
]
_DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]


@st.composite
def _rules(draw):  # type: ignore[no-untyped-def]
    freq = draw(st.sampled_from(["MINUTELY", "HOURLY", "DAILY", "WEEKLY", "MONTHLY"]))
    top = {"MINUTELY": 90, "HOURLY": 7, "DAILY": 3, "WEEKLY": 2, "MONTHLY": 2}[freq]
    parts = [f"FREQ={freq}", f"INTERVAL={draw(st.integers(1, top))}"]
    if freq == "HOURLY" and draw(st.booleans()):
        parts.append("BYMINUTE=" + ",".join(map(str, sorted(draw(st.sets(st.integers(0, 59), min_size=1, max_size=3))))))
    if freq in ("DAILY", "WEEKLY", "MONTHLY") and draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, sorted(draw(st.sets(st.integers(0, 23), min_size=1, max_size=3))))))
    if freq in ("WEEKLY", "MONTHLY") and draw(st.booleans()):
        parts.append("BYDAY=" + ",".join(sorted(draw(st.sets(st.sampled_from(_DAYS), min_size=1, max_size=5)))))
        if freq == "MONTHLY" and draw(st.booleans()):
            parts.append(f"BYSETPOS={draw(st.sampled_from([-1, 1, 2, -2]))}")
    ending = draw(st.sampled_from(["none", "none", "count", "until"]))
    if ending == "count":
        parts.append(f"COUNT={draw(st.integers(1, 300))}")
    return ";".join(parts), ending


def _truth(text: str, limit: int = 1500) -> tuple[list[datetime], bool]:
    """Occurrences walked from DTSTART by a schedule nothing else has asked, and whether the walk ended."""
    walked = list(islice(Schedule.parse(text)._engine.iterate(), limit + 1))
    return walked[:limit], len(walked) <= limit


def _probes(walk: list[datetime], rng: random.Random, kind: str, n: int) -> list[datetime]:
    first, last = walk[0] - timedelta(hours=2), walk[-1]
    span = (last - first).total_seconds()
    points = [first + timedelta(seconds=rng.uniform(0, span)) for _ in range(n)]
    points += [rng.choice(walk) + timedelta(seconds=rng.choice([-1, 0, 1])) for _ in range(n // 2)]
    if kind == "fires":  # each probe the previous answer (a host re-arming its timer), from a random start
        i = rng.randrange(len(walk))
        points = [walk[i - 1] if i else first, *walk[i : i + n]]
    elif kind == "backwards":
        points.sort(reverse=True)
    elif kind == "forwards":
        points.sort()
    else:
        rng.shuffle(points)
    # as instants in UTC (what a clock gives) or in the schedule's zone (what an answer was)
    return [p.astimezone(UTC) if rng.random() < 0.7 else p for p in points]


def _check(schedule: Schedule, walk: list[datetime], ended: bool, probes: list[datetime]) -> None:
    keys = [o.astimezone(UTC) for o in walk]
    for t in probes:
        i = bisect.bisect_right(keys, t)
        if i < len(walk) or ended:
            got = schedule.next_after(t)
            expected = walk[i] if i < len(walk) else None
            assert got == expected, (t, got, expected)
            if got is not None:  # the very object: same zone, same fold
                assert (got.tzinfo, got.fold, got.isoformat()) == (expected.tzinfo, expected.fold, expected.isoformat()), t
        if i < len(walk):
            assert schedule.last_at_or_before(t) == (walk[i - 1] if i else None), t
        memo = schedule._engine._memo
        if memo is not None:  # the memo is one interval, complete: exactly the walk's occurrences there
            lo, hi, mkeys, values = memo
            assert len(mkeys) <= CAP
            if ended if hi == _memo.END_AWARE else hi <= keys[-1]:
                start, stop = bisect.bisect_right(keys, lo), bisect.bisect_right(keys, hi)
                assert list(mkeys) == keys[start:stop] and list(values[: len(mkeys)]) == walk[start:stop], t


@settings(max_examples=120, deadline=None)
@given(
    rule=_rules(),
    where=st.sampled_from(_CHANGES),
    days_before=st.integers(0, 3),
    at=st.tuples(st.integers(0, 23), st.sampled_from([0, 15, 30, 45]), st.sampled_from([0, 30])),
    kind=st.sampled_from(["fires", "backwards", "forwards", "random"]),
    seed=st.integers(0, 2**32),
)
def test_property_answers_with_the_memo_equal_the_walk_in_any_order(rule, where, days_before, at, kind, seed) -> None:  # type: ignore[no-untyped-def]
    (text, ending), (zone, day) = rule, where
    start = day - timedelta(days=days_before) + timedelta(hours=at[0], minutes=at[1], seconds=at[2])
    head = f"DTSTART:{start:%Y%m%dT%H%M%S}Z" if zone == "UTC" else f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}"
    if ending == "until":
        text += f";UNTIL={start + timedelta(days=3):%Y%m%dT%H%M%S}Z"
    schedule_text = f"{head}\nRRULE:{text}"
    walk, ended = _truth(schedule_text)
    if not walk:
        return
    rng = random.Random(seed)
    schedule = Schedule.parse(schedule_text)
    _check(schedule, walk, ended, _probes(walk, rng, kind, 80))
    _check(schedule, walk, ended, _probes(walk, rng, "random", 40))  # then jumping about


@pytest.mark.parametrize("zone, day", _CHANGES, ids=[f"{z}-{d:%Y%m%d}" for z, d in _CHANGES])
@pytest.mark.parametrize(
    "rule",
    ["FREQ=MINUTELY;INTERVAL=7", "FREQ=HOURLY", "FREQ=DAILY", "FREQ=HOURLY;BYMINUTE=0,30", "FREQ=DAILY;BYHOUR=1,2,3;BYMINUTE=30"],
)
def test_every_minute_around_a_real_change_in_three_orders(zone: str, day: datetime, rule: str) -> None:
    head = (
        f"DTSTART:{day - timedelta(days=2):%Y%m%dT%H%M%S}Z"
        if zone == "UTC"
        else f"DTSTART;TZID={zone}:{day - timedelta(days=2):%Y%m%dT%H%M%S}"
    )
    text = f"{head}\nRRULE:{rule}"
    walk, ended = _truth(text, 3000)
    begin = day.replace(tzinfo=ZoneInfo(zone)).astimezone(UTC) - timedelta(hours=6)
    probes = [begin + timedelta(minutes=m, seconds=s) for m in range(0, 36 * 60, 7) for s in (0, 1)]
    for order in (probes, probes[::-1], random.Random(zone + rule).sample(probes, len(probes))):
        _check(Schedule.parse(text), walk, ended, order)


def test_exdates_and_a_grid_rule() -> None:
    text = "DTSTART;TZID=Europe/Berlin:20260327T000000\nRRULE:FREQ=MINUTELY;INTERVAL=20\nEXDATE;TZID=Europe/Berlin:20260327T010000,20260329T032000,20260329T034000"
    walk, ended = _truth(text, 600)
    assert len(walk) == 600 and not ended
    rng = random.Random(7)
    for kind in ("fires", "backwards", "random"):
        _check(Schedule.parse(text), walk, ended, _probes(walk, rng, kind, 300))


# -- bounded, walking rarely, shared by threads -------------------------------------------------
@pytest.mark.parametrize(
    "rule, zone",
    [
        ("FREQ=DAILY;BYHOUR=9,17", "Europe/Berlin"),
        ("FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1", "UTC"),
        ("FREQ=MINUTELY;BYSECOND=0", "America/New_York"),
    ],
)
def test_a_hosts_fires_walk_once_per_chunk(rule: str, zone: str, monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = Schedule.parse(f"DTSTART;TZID={zone}:20200101T000000\nRRULE:{rule}")
    walks = _walked(schedule, monkeypatch)
    at = datetime(2026, 3, 1, tzinfo=UTC)
    fired = []
    for _ in range(2000):
        at = schedule.next_after(at)  # type: ignore[assignment]
        fired.append(at)
    # The first walks are short (a memo starts small); then one walk per CHUNK_MAX fires.
    assert len(walks) <= len(fired) // CHUNK_MAX + 8, len(walks)
    assert len(schedule._engine._memo[2]) <= CAP  # type: ignore[index]
    # Back in time too (a preview scrolled back), asking for the next or for the last occurrence.
    for ask, shift in ((schedule.next_after, timedelta(seconds=-1)), (schedule.last_at_or_before, timedelta(0))):
        schedule._engine._memo = None
        walks.clear()
        for occurrence in reversed(fired):
            assert ask(occurrence + shift) == occurrence
        assert len(walks) <= len(fired) // CHUNK_MAX + 8, (ask, len(walks))


def test_a_grid_rule_is_answered_without_walking_where_the_offset_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = Schedule.parse("DTSTART;TZID=Europe/Berlin:20200101T000000\nRRULE:FREQ=MINUTELY;INTERVAL=15")
    walks = _walked(schedule, monkeypatch)
    rng = random.Random(3)
    base = datetime(2026, 5, 1, tzinfo=UTC)  # months from any change
    for _ in range(2000):
        schedule.next_after(base + timedelta(seconds=rng.randrange(30 * 86400)))
    at = base
    for _ in range(2000):
        at = schedule.next_after(at)  # type: ignore[assignment]
    assert walks == []


def test_a_walk_cut_at_the_bound_is_not_the_rules_end(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "DTSTART:20260101T000000Z\nRRULE:FREQ=MINUTELY;BYSECOND=0"
    engine = Schedule.parse(text)._engine
    t0 = datetime(2026, 2, 1, tzinfo=UTC)
    lo, hi, keys, values = engine._segment(t0, t0, CHUNK, t0 + timedelta(days=2))  # reach: farther than CAP minutes
    assert len(keys) == len(values) == CAP and hi == keys[-1] == t0 + timedelta(minutes=CAP) and lo == t0
    # A gap guessed short but longer than a memo holds: the walk across it stops at CAP, and
    # the query is answered from a walk of its own.
    schedule = Schedule.parse(text)
    schedule.next_after(t0)
    monkeypatch.setattr(_memo, "near", lambda memo, gap, budget: True)
    far = t0 + timedelta(days=3, seconds=30)
    assert schedule.next_after(far) == far.replace(second=0) + timedelta(minutes=1)
    memo = schedule._engine._memo
    assert memo is not None and memo[1] != _memo.END_AWARE and len(memo[2]) <= CAP


def test_scattered_queries_keep_the_memo_within_its_bound() -> None:
    schedule = Schedule.parse("DTSTART;TZID=America/New_York:20200101T000000\nRRULE:FREQ=HOURLY;BYMINUTE=0,20,40")
    rng = random.Random(5)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    sizes = set()
    for i in range(3000):
        schedule.next_after(base + timedelta(seconds=rng.randrange(365 * 86400)))
        memo = schedule._engine._memo
        assert (memo is None) == (i == 0)  # a schedule's first query fills no memo
        if memo is not None:
            sizes.add(len(memo[2]))
    assert max(sizes) <= CAP


def test_the_memo_answers_queries_over_a_week_it_has_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    schedule = Schedule.parse("DTSTART:20200101T090000Z\nRRULE:FREQ=WEEKLY;BYDAY=MO,WE,FR;BYHOUR=9,12,18")
    rng = random.Random(11)
    base = datetime(2026, 6, 1, tzinfo=UTC)
    probes = [base + timedelta(seconds=rng.randrange(7 * 86400)) for _ in range(300)]
    for t in probes:
        schedule.next_after(t)
        schedule.last_at_or_before(t)
    walks = _walked(schedule, monkeypatch)
    for t in probes:
        schedule.next_after(t)
        schedule.last_at_or_before(t)
    assert walks == []


def test_threads_sharing_a_schedule_get_the_walks_answers() -> None:
    text = "DTSTART;TZID=Europe/Berlin:20260320T000000\nRRULE:FREQ=HOURLY;BYMINUTE=0,15,40"
    walk, _ = _truth(text, 2000)
    keys = [o.astimezone(UTC) for o in walk]
    schedule = Schedule.parse(text)
    errors: list[object] = []

    def ask(seed: int) -> None:
        rng = random.Random(seed)
        try:
            t = keys[0] + timedelta(seconds=rng.randrange(int((keys[-1] - keys[0]).total_seconds())))
            for _ in range(1500):
                if rng.random() < 0.5:  # jump, else the next fire
                    t = keys[0] + timedelta(seconds=rng.randrange(int((keys[-1] - keys[0]).total_seconds())))
                i = bisect.bisect_right(keys, t)
                if i >= len(walk):
                    continue
                got = schedule.next_after(t)
                if got != walk[i]:
                    errors.append((t, got, walk[i]))
                t = got.astimezone(UTC)  # type: ignore[union-attr]
        except Exception as exc:  # reported below, as the thread's failure
            errors.append(exc)

    threads = [threading.Thread(target=ask, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


# -- the input is checked once, in the engine ---------------------------------------------------
def test_next_after_still_refuses_a_naive_or_non_datetime_and_reads_any_zone() -> None:
    schedule = Schedule.parse("DTSTART;TZID=Europe/Berlin:20261201T090000\nRRULE:FREQ=DAILY")
    with pytest.raises(InvalidInput):
        schedule.next_after(_wall("2026-12-05T12:00"))
    with pytest.raises(InvalidInput):
        schedule.next_after("2026-12-05")  # type: ignore[arg-type]
    utc = schedule.next_after(datetime(2026, 12, 5, 12, tzinfo=UTC))
    assert utc is not None and utc.tzinfo is ZoneInfo("Europe/Berlin")
    assert schedule.next_after(datetime(2026, 12, 5, 13, tzinfo=ZoneInfo("Europe/Berlin"))) == utc
    # a Berlin datetime in a repeated hour's second pass is after its first pass's wall times
    fall = Schedule.parse("DTSTART;TZID=Europe/Berlin:20261024T000000\nRRULE:FREQ=MINUTELY;INTERVAL=10;BYSECOND=0")
    second_pass = datetime(2026, 10, 25, 2, 25, tzinfo=ZoneInfo("Europe/Berlin"), fold=1)
    assert fall.next_after(datetime(2026, 10, 25, 0, 5, tzinfo=UTC)) is not None  # fills the memo around it
    assert fall.next_after(second_pass) == datetime(2026, 10, 25, 3, 0, tzinfo=ZoneInfo("Europe/Berlin"))


# -- steady offset spans -----------------------------------------------------------------------
@pytest.mark.parametrize("zone", ["Europe/Berlin", "Australia/Lord_Howe", "Pacific/Apia", "America/New_York", "UTC", "Asia/Kolkata"])
def test_steady_spans_hold_one_offset_and_end_at_real_changes(zone: str) -> None:
    tz = ZoneInfo(zone)
    grid = Schedule.parse(f"DTSTART;TZID={zone}:20100101T000000\nRRULE:FREQ=HOURLY")._engine._grid
    assert grid is not None
    rng = random.Random(zone)
    for _ in range(40):
        t = datetime(2010, 6, 1, tzinfo=UTC) + timedelta(seconds=rng.randrange(17 * 365 * 86400))
        span = grid._steady_span(t)
        assert span is not None
        lo, hi, anchor = span
        offset = offset_at(t, tz)
        assert anchor == grid.dtstart.replace(tzinfo=UTC) - offset
        probe = max(lo, t - timedelta(days=20))
        while probe < hi:  # one offset on [lo, hi) (sampled each 30 minutes)
            assert offset_at(probe, tz) == offset, (t, probe)
            probe += timedelta(minutes=30)
        if hi - t < timedelta(days=16):  # ended by a change, exactly there
            assert offset_at(hi, tz) != offset and offset_at(hi - timedelta(seconds=1), tz) == offset
        back = offset_at(lo - timedelta(days=2), tz)
        if back != offset and lo > t - timedelta(days=15):  # a change's shadow: its size after it
            change = lo - abs(offset - back)
            assert offset_at(change, tz) == offset and offset_at(change - timedelta(seconds=1), tz) != offset
