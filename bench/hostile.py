"""The hostile-input figures of issue 10, from a bigger run than the suite's fixed budget:

    .venv/bin/python bench/hostile.py [--cases N] [--schedules N] [--seed S]

- CLI: every argument slot of tests/test_hostile_fuzz.py gets hostile values (seeded random); counted
  are the cases tried, tracebacks (an exception out of the CLI or "Traceback" in its output), exit
  codes outside 0-5, and partial writes (a refused command that changed any row of any table);
- damaged state: every damage of tests/test_corrupt_state.py, one at a time on a seeded SQLite store;
  counted are admissions (a reservation of the damaged lane, inside its floor, that was admitted);
- schedules: hostile RRULEs (the fuzz's parts); for each accepted one, parse + canonical round trip +
  the next 3 fires + the preview of 5 host fires, timed; the slowest and the median are printed.

Timing lives here, never in a test.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from hostile import DOCUMENTED_EXITS, dump  # noqa: E402
from sqlalchemy import text  # noqa: E402
from test_corrupt_state import WHERE, _damages, _relax, _restore, _seed  # noqa: E402
from test_hostile_fuzz import FREQS, NOW, SLOTS  # noqa: E402

from floorgate.admission import Admission, FixedClock, WakeState, open_store  # noqa: E402
from floorgate.hosts import InvalidSchedule, Schedule  # noqa: E402
from floorgate.scheduler.app.preview import FloorMeeting, PlanInputs, simulate  # noqa: E402

from cli import run_cli  # noqa: E402
from conftest import T0  # noqa: E402
from helpers import add_automation, floor  # noqa: E402

VALUES = ["", "\0", "a\nb", "%41", "%", "../../etc/passwd", "9" * 30, "-1", str(2**63), "99999999999d", "[" * 5000, "é" * 200, "1e400"]
VALUES += ["0001-01-01T00:00:00+14:00", '{"max_turns": ' + "[" * 3000 + "]" * 3000 + "}", "x" * 300, "g/a/x/y", "\u202e"]


def hostile(rng: random.Random) -> str:
    if rng.random() < 0.6:
        return rng.choice(VALUES)
    return "".join(
        chr(rng.choice([rng.randrange(32, 127), rng.randrange(0x80, 0x3000), rng.randrange(0, 32)])) for _ in range(rng.randrange(40))
    )


def cli_figures(cases: int, rng: random.Random, work: Path) -> dict[str, int]:
    db = work / "fuzz.db"
    store = open_store(str(db))
    clock = FixedClock(NOW)
    add_automation(store, clock, "x")
    floor(store, clock, "g/a", timedelta(hours=1))
    Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="s1", trigger_time=NOW)
    out = {"cases": 0, "tracebacks": 0, "undocumented exits": 0, "partial writes": 0, "refused": 0}
    for _ in range(cases):
        argv = [hostile(rng) if part == "{}" else part for part in rng.choice(SLOTS)]
        before = dump(store)
        out["cases"] += 1
        try:
            result = run_cli(*argv, db=str(db), cwd=work)
        except Exception:
            out["tracebacks"] += 1
            continue
        if "Traceback" in result.stderr + result.stdout:
            out["tracebacks"] += 1
        if result.returncode not in DOCUMENTED_EXITS:
            out["undocumented exits"] += 1
        if result.returncode in (1, 2):
            out["refused"] += 1
            after = dump(store)
            if "may not wake the model" in result.stderr:  # a hook's answer is recorded (documented)
                before.pop("fg_hook_answers"), after.pop("fg_hook_answers")
            if after != before:
                out["partial writes"] += 1
    store.close()
    return out


def damage_figures(work: Path) -> dict[str, int]:
    db = work / "damage.db"
    store = open_store(str(db))
    _seed(store)
    _relax(store)
    store.close()
    store = open_store(str(db))

    class Seeded:  # what ``_restore`` reads
        pass

    seeded = Seeded()
    seeded.store, seeded.baseline = store, dump(store)  # type: ignore[attr-defined]
    out = {"damages": 0, "admissions on damaged state": 0}
    clock = FixedClock(T0 + timedelta(minutes=1))
    for damage in _damages("sqlite"):
        where = f"rowid IN (SELECT rowid FROM {damage.table} WHERE {WHERE[damage.table]} LIMIT 1)"
        with store.engine.begin() as conn:
            conn.execute(text(f"UPDATE {damage.table} SET {damage.column} = {damage.sql} WHERE {where}"))
        out["damages"] += 1
        try:
            decision = Admission(store, clock).reserve(goal="g", agent="bad", automation="bad", turn_id="new-bad", trigger_time=clock.now())
            out["admissions on damaged state"] += decision.admitted
        finally:
            _restore(seeded, damage.table)  # type: ignore[arg-type]
    store.close()
    return out


def schedule_text(rng: random.Random) -> str:
    nums = [*range(-400, 401), 0, 60, 61, 366, 367, 999999999, 2**63]
    year = rng.choice([1, 999, 1000, 1970, 2026, 8999, 9999])
    parts = [f"FREQ={rng.choice(FREQS)}"]
    ranges = {"INTERVAL": (1, 100), "BYSECOND": (0, 59), "BYMINUTE": (0, 59), "BYHOUR": (0, 23), "BYMONTHDAY": (-31, 31)}
    ranges |= {"BYMONTH": (1, 12), "BYSETPOS": (-366, 366), "COUNT": (1, 1000)}
    for name, (low, high) in ranges.items():
        if rng.random() < 0.4:
            # Mostly in range (so rules are accepted and timed), sometimes anything at all.
            pick = (lambda: rng.randint(low, high)) if rng.random() < 0.85 else (lambda: rng.choice(nums))  # noqa: B023
            parts.append(f"{name}={','.join(str(pick()) for _ in range(rng.randrange(1, 4)))}")
    return f"DTSTART:{year:04d}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}T090000Z RRULE:{';'.join(parts)}"


def schedule_figures(count: int, rng: random.Random) -> dict[str, object]:
    timings: list[tuple[float, str]] = []
    refused = exceptions = 0
    for _ in range(count):
        source = schedule_text(rng)
        started = time.perf_counter()
        try:
            schedule = Schedule.parse(source)
        except InvalidSchedule:
            refused += 1
            continue
        if schedule.planning_problem() is not None:  # refused at save, as `automation add` does
            refused += 1
            continue
        try:
            assert Schedule.parse(schedule.canonical()).canonical() == schedule.canonical()
            schedule.occurrences(3, after=NOW)
            inputs = PlanInputs(schedule, FloorMeeting.COALESCE, timedelta(hours=1), NOW, wake=WakeState(automation_id="b"))
            simulate(inputs, count=5, now=NOW)
        except Exception:
            exceptions += 1
        timings.append((time.perf_counter() - started, source))
    seconds = sorted(t for t, _ in timings)
    slowest = max(timings) if timings else (0.0, "")
    return {
        "schedules": count,
        "accepted": len(timings),
        "refused": refused,
        "exceptions after acceptance": exceptions,
        "median accepted (ms)": round(statistics.median(seconds) * 1000, 2) if seconds else None,
        "p99 accepted (ms)": round(seconds[int(len(seconds) * 0.99) - 1] * 1000, 2) if seconds else None,
        "slowest accepted (ms)": round(slowest[0] * 1000, 2),
        "slowest schedule": slowest[1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--schedules", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=10)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="fg-hostile-"))
    try:
        for name, figures in (
            ("CLI", cli_figures(args.cases, rng, work)),
            ("damaged state", damage_figures(work)),
            ("schedules", schedule_figures(args.schedules, rng)),
        ):
            print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
