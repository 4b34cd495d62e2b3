"""Next-occurrence queries per rule class: cold (parse the text + first answer) against dateutil
parsing the same rule text with DTSTART rebased to the query, and warm against dateutil with a
warm cache.

    .venv/bin/python bench/rrule.py [--rounds 3] [--reps 200] [--only CLASS] [--cold-only]

Cold comes first: see ``cold``. Then the warm rows:

The baseline is the best dateutil offers for the same question: one ``rrule`` built once with
``cache=True``, its DTSTART moved up to the day before the probes (the restart floorgate's engine
makes itself; from a DTSTART six years old ``after()`` walks every occurrence since), the cache
warmed by answering every probe once before timing. floorgate answers through ``Schedule``
(instants in, zone-aware instants out). Two probe patterns:

- ``fires``: each probe just after the previous answer (what a host asks at every fire);
- ``scattered``: random instants over a week (what status and previews ask).

Rounds interleave baseline and floorgate; each round's ratio is baseline / floorgate time, and
the median ratio is printed with its spread (min..max). Answers are compared one by one. Goal:
at least 10x on every rule class. Why a rule with more than 32 fires among the probes stays
far below it: floorgate's memo keeps 32 occurrences a schedule (bounded for a long-running host's
memory), so each round, replaying the probes from the first, misses it and answers by arithmetic
(FREQ and INTERVAL alone) or a walk of a chunk, while dateutil's warm cache holds every
occurrence and answers with a bisect, as a memo hit would. floorgate's memo of computed occurrences is warm after the
first round like dateutil's cache (for ``fires`` already from finding the probes); the last
column times a fresh schedule over the same probes each round (the first pass: what a host pays
once per fire, and the walks that fill the memo), against the same warm baseline. DST zones: both sides are asked across a real offset change
(dateutil's naive walk in the zone, floorgate's instants; compared as wall times).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _rows import record, spread
from dateutil import rrule as du

from floorgate.hosts import Schedule

# label, zone, RRULE, dateutil arguments, first probe (UTC)
CASES: list[tuple[str, str, str, dict[str, object], datetime]] = [
    ("per-minute (every 1m)", "UTC", "FREQ=MINUTELY", dict(freq=du.MINUTELY), datetime(2026, 11, 29, 22, 7, 13)),
    ("every 15 minutes", "UTC", "FREQ=MINUTELY;INTERVAL=15", dict(freq=du.MINUTELY, interval=15), datetime(2026, 11, 29, 22, 7, 13)),
    ("hourly", "UTC", "FREQ=HOURLY", dict(freq=du.HOURLY), datetime(2026, 11, 29, 22, 7, 13)),
    ("daily 09:00", "UTC", "FREQ=DAILY", dict(freq=du.DAILY), datetime(2026, 11, 29, 22, 7, 13)),
    (
        "monthly last weekday (BYSETPOS)",
        "UTC",
        "FREQ=MONTHLY;BYDAY=MO,TU,WE,TH,FR;BYSETPOS=-1",
        dict(freq=du.MONTHLY, byweekday=(du.MO, du.TU, du.WE, du.TH, du.FR), bysetpos=-1),
        datetime(2026, 11, 29, 22, 7, 13),
    ),
    ("per-minute, Berlin DST day", "Europe/Berlin", "FREQ=MINUTELY", dict(freq=du.MINUTELY), datetime(2026, 3, 28, 23, 30)),
    ("hourly, New York DST day", "America/New_York", "FREQ=HOURLY", dict(freq=du.HOURLY), datetime(2026, 11, 1, 3, 30)),
    ("daily 02:30, Berlin DST", "Europe/Berlin", "FREQ=DAILY", dict(freq=du.DAILY), datetime(2026, 3, 27, 12, 0)),
]
START = datetime(2020, 11, 29, 9, 0)  # DTSTART: six years before the probes
PROBES = 400


def _probes(kind: str, first: datetime, schedule: Schedule) -> list[datetime]:
    if kind == "fires":
        out, at = [], first.replace(tzinfo=timezone.utc)
        for _ in range(PROBES):
            out.append(at)
            nxt = schedule.next_after(at)
            assert nxt is not None
            at = nxt.astimezone(timezone.utc) + timedelta(seconds=1)
        return out
    rng = random.Random(kind + str(first))
    return [first.replace(tzinfo=timezone.utc) + timedelta(seconds=rng.randrange(7 * 86400)) for _ in range(PROBES)]


def _timed(fn: Callable[[datetime], object], probes: list[datetime]) -> tuple[float, list[object]]:
    start = time.perf_counter()
    answers = [fn(p) for p in probes]
    return (time.perf_counter() - start) / len(probes), answers


def case(
    label: str, zone: str, rule: str, kwargs: dict[str, object], first: datetime, kind: str, rounds: int
) -> tuple[float, float, float, float, float, float | None, float]:
    start = START.replace(hour=2, minute=30) if "02:30" in label else START
    head = f"DTSTART:{start:%Y%m%dT%H%M%S}Z" if zone == "UTC" else f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}"
    ours = Schedule.parse(f"{head}\nRRULE:{rule}")
    tz = ZoneInfo(zone)
    probes = _probes(kind, first, ours)
    # dateutil walks naive wall time in the zone; its DTSTART moved to the day before the probes,
    # on DTSTART's phase (a multiple of the interval since it), time of day and weekday pattern.
    local_first = first.replace(tzinfo=timezone.utc).astimezone(tz).replace(tzinfo=None)
    step = {du.MINUTELY: timedelta(minutes=1), du.HOURLY: timedelta(hours=1)}.get(kwargs["freq"], timedelta(days=1))  # type: ignore[call-overload]
    interval = int(kwargs.get("interval", 1))  # type: ignore[call-overload]
    days_back = 40 if kwargs["freq"] == du.MONTHLY else 1
    moved = start + ((local_first - timedelta(days=days_back) - start) // (step * interval)) * step * interval
    if kwargs["freq"] in (du.DAILY, du.MONTHLY):
        moved = moved.replace(hour=start.hour, minute=start.minute)
    if kwargs["freq"] == du.MONTHLY:
        moved = moved.replace(day=1)
    args = {k: v for k, v in kwargs.items() if k != "freq"}
    raw = du.rrule(kwargs["freq"], dtstart=moved, cache=True, **args)  # type: ignore[arg-type]
    local = [p.astimezone(tz).replace(tzinfo=None) for p in probes]

    def baseline(p: datetime) -> object:
        return raw.after(p)

    def floorgate(p: datetime) -> object:
        return ours.next_after(p)

    # The same rule kept from its own DTSTART (six years of occurrences in its cache, once warm):
    # what a program holding one dateutil rrule per schedule gets. Skipped past 300,000 of them.
    old = du.rrule(kwargs["freq"], dtstart=start, cache=True, **args)  # type: ignore[arg-type]
    kept = (local_first - start) / (step * interval) < 300_000

    def from_dtstart(p: datetime) -> object:
        return old.after(p)

    _timed(baseline, local)  # warm dateutil's caches over every probe
    if kept:
        _timed(from_dtstart, local[: PROBES // 10])
    ratios, old_ratios, base_times, our_times, first_ratios = [], [], [], [], []
    for _ in range(rounds):
        b, base_answers = _timed(baseline, local)
        o, our_answers = _timed(floorgate, probes)
        if kept:  # on a tenth of the probes: each of its answers scans the cache from 2020
            old_ratios.append(_timed(from_dtstart, local[: PROBES // 10])[0] / o)
        fresh = Schedule.parse(f"{head}\nRRULE:{rule}")
        f, first_answers = _timed(fresh.next_after, probes)
        assert first_answers == our_answers, label
        first_ratios.append(b / f)
        ratios.append(b / o)
        base_times.append(b)
        our_times.append(o)
    walls = [a.replace(tzinfo=None) for a in our_answers]  # type: ignore[union-attr]
    # dateutil's naive walk keeps wall times that do not exist on a DST day; floorgate shifts
    # them (RFC 5545): compare where dateutil's wall time exists.
    mismatches = [(w, b) for w, b in zip(walls, base_answers, strict=True) if w != b and _exists(b, tz)]  # type: ignore[arg-type]
    if mismatches:
        raise SystemExit(f"{label} ({kind}): answers differ, e.g. floorgate {mismatches[0][0]} vs dateutil {mismatches[0][1]}")
    return (
        statistics.median(base_times),
        statistics.median(our_times),
        statistics.median(ratios),
        min(ratios),
        max(ratios),
        statistics.median(old_ratios) if old_ratios else None,
        statistics.median(first_ratios),
    )


def _text(label: str, zone: str, rule: str) -> str:
    start = START.replace(hour=2, minute=30) if "02:30" in label else START
    head = f"DTSTART:{start:%Y%m%dT%H%M%S}Z" if zone == "UTC" else f"DTSTART;TZID={zone}:{start:%Y%m%dT%H%M%S}"
    return f"{head}\nRRULE:{rule}"


def _rebased(
    label: str, zone: str, rule: str, kwargs: dict[str, object], first: datetime
) -> tuple[Callable[[], object], Callable[[], object]]:
    """dateutil's cold answers, with DTSTART rebased to the query itself (the last phase point at
    or before it; a month's first day), asked once: from the rule's text (``rrulestr`` of the
    rebased DTSTART and the same RRULE line: the parse floorgate's side pays too), and from
    ``rrule`` arguments built by hand (no parse, shown beside it)."""
    start = START.replace(hour=2, minute=30) if "02:30" in label else START
    local_first = first.replace(tzinfo=timezone.utc).astimezone(ZoneInfo(zone)).replace(tzinfo=None)
    step = {du.MINUTELY: timedelta(minutes=1), du.HOURLY: timedelta(hours=1)}.get(kwargs["freq"], timedelta(days=1))  # type: ignore[call-overload]
    interval = int(kwargs.get("interval", 1))  # type: ignore[call-overload]
    rebased = start + ((local_first - start) // (step * interval)) * step * interval
    if kwargs["freq"] in (du.DAILY, du.MONTHLY):
        rebased = rebased.replace(hour=start.hour, minute=start.minute)
        rebased -= timedelta(days=1) if rebased > local_first else timedelta(0)
    if kwargs["freq"] == du.MONTHLY:
        rebased = rebased.replace(day=1)
    args = {k: v for k, v in kwargs.items() if k != "freq"}
    freq = kwargs["freq"]
    # Naive wall time: dateutil walks the zone's wall clock (floorgate's side also maps it to instants).
    text = f"DTSTART:{rebased:%Y%m%dT%H%M%S}\nRRULE:{rule}"
    return (
        lambda: du.rrulestr(text).after(local_first),  # type: ignore[union-attr]
        lambda: du.rrule(freq, dtstart=rebased, **args).after(local_first),  # type: ignore[arg-type]
    )


def cold(
    cases: list[tuple[str, str, str, dict[str, object], datetime]], rounds: int, reps: int
) -> dict[str, tuple[list[float], list[float]]]:
    """Cold, per class: parse the text and answer the first query (a new ``Schedule`` each time, the
    engine's one global cache, dateutil rules by period start, cleared before each), against
    dateutil parsing the same RRULE text with DTSTART rebased to the query (``rrulestr``) and asking
    it once; beside it, against a dateutil ``rrule`` built from arguments (no parse). Each round
    visits every class once; within a class ``reps`` triples alternate the three; a round's ratio is
    summed CPU times (dateutil / floorgate). Answers are compared (as wall times) every time.
    Returns per class (ratios against the parsed baseline, ratios against the built one)."""
    from floorgate.hosts import _dateutil

    setup = []
    for label, zone, rule, kwargs, first in cases:
        parsed, built = _rebased(label, zone, rule, kwargs, first)
        setup.append((label, _text(label, zone, rule), first.replace(tzinfo=timezone.utc), parsed, built, ZoneInfo(zone)))
    ratios: dict[str, tuple[list[float], list[float]]] = {label: ([], []) for label, *_ in setup}
    clock = time.process_time
    for _ in range(rounds):
        for label, text, probe, parsed, built, tz in setup:
            base = bare = ours = 0.0
            for _ in range(reps):
                t0 = clock()
                want = parsed()
                t1 = clock()
                _dateutil.build_rules.cache_clear()
                t2 = clock()
                got = Schedule.parse(text).next_after(probe)
                t3 = clock()
                also = built()
                t4 = clock()
                base += t1 - t0
                ours += t3 - t2
                bare += t4 - t3
                if got is None or got.astimezone(tz).replace(tzinfo=None) != want or want != also:  # type: ignore[union-attr]
                    raise SystemExit(f"{label} (cold): floorgate {got} vs dateutil {want} (built: {also})")
            ratios[label][0].append(base / ours)
            ratios[label][1].append(bare / ours)
    return ratios


def _exists(wall: datetime, tz: ZoneInfo) -> bool:
    return wall.replace(tzinfo=tz).astimezone(timezone.utc).astimezone(tz).replace(tzinfo=None) == wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reps", type=int, default=200, help="cold: parse + first answer pairs per class per round")
    parser.add_argument("--only", metavar="CLASS", help="only the rule classes whose label contains this (e.g. monthly, Berlin)")
    parser.add_argument("--cold-only", action="store_true", help="only the cold rows (parse + first answer)")
    args = parser.parse_args()
    cases = [c for c in CASES if args.only is None or args.only.lower() in c[0].lower()]
    if not cases:
        raise SystemExit(f"--only: no rule class matches {args.only!r}; classes: {', '.join(c[0] for c in CASES)}")
    print(
        f"cold: parse + first answer, {args.reps} interleaved triples per class, {args.rounds} rounds (CPU time); DTSTART {START:%Y-%m-%d}"
    )
    print(
        f"  {'rule class':34s} {'vs dateutil rrulestr, rebased (both parse)':>42s}   goal >= 1x   "
        "vs dateutil rrule from built arguments (no parse; no goal)"
    )
    for label, (ratios, bare) in cold(cases, args.rounds, args.reps).items():
        met = statistics.median(ratios) >= 1
        print(f"  {label:34s} {spread(ratios):>42s}   {'met' if met else 'NOT met':10s}   {spread(bare)}")
        record(
            f"cold (parse the text + first answer, both sides) vs dateutil rrulestr rebased to the query: {label}",
            spread(ratios),
            ">= 1x",
            met,
            backend="none",
        )
        record(
            f"cold (parse + first answer) vs dateutil rrule from built arguments (no parse), rebased: {label}",
            spread(bare),
            "-",
            None,
            backend="none",
        )
    if args.cold_only:
        return
    print(f"next occurrence, {PROBES} probes a round, {args.rounds} interleaved rounds; DTSTART {START:%Y-%m-%d} (six years back)")
    print(
        f"  {'rule class':34s} {'probes':9s} {'dateutil warm':>14s} {'floorgate':>10s}   ratio (median, min..max)   goal >= 10x"
        "   vs a warm rrule kept from its DTSTART   first pass (fresh memo)"
    )
    for label, zone, rule, kwargs, first in cases:
        for kind in ("fires", "scattered"):
            b, o, median, low, high, old, fresh = case(label, zone, rule, kwargs, first, kind, args.rounds)
            met = "met" if median >= 10 else "NOT met"
            record(
                f"next occurrence vs warm dateutil: {label}, {kind}",
                f"{median:.1f}x ({low:.1f}..{high:.1f})",
                ">= 10x",
                median >= 10,
                backend="none",
            )
            kept = f"{old:9.1f}x" if old is not None else "      n/a (over 300,000 cached)"
            print(
                f"  {label:34s} {kind:9s} {b * 1e6:11.1f} us {o * 1e6:7.1f} us   {median:6.1f}x ({low:.1f}..{high:.1f}x)      {met:8s}{kept:31s}"
                f"{fresh:9.1f}x"
            )


if __name__ == "__main__":
    main()
