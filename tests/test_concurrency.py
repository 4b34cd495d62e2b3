"""Durable one-start: real processes (and threads) racing on one agent get one admission per window."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from itertools import pairwise

from basics import T0, raw_sql

from floorgate.admission import Admission, FixedClock, Policies, Scope, open_store

from race_worker import race

WORKERS = 8
ROUNDS = 4
FLOOR_S = 3600


def test_processes_racing_get_exactly_one_admission_per_window(db_url: str) -> None:
    with open_store(db_url) as store:
        Policies(store, FixedClock(T0)).configure(
            Scope.agent("g", "a"), min_interval=timedelta(seconds=FLOOR_S), expected_revision=0, owner_ref="o"
        )
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=race, args=(db_url, w, ROUNDS, FLOOR_S, barrier, results)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    decisions = [results.get(timeout=120) for _ in range(WORKERS * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    admitted = Counter(r for r, _w, ok, _reason in decisions if ok)
    assert admitted == dict.fromkeys(range(ROUNDS), 1)
    # Losers are serialized behind the winner and see its start; none fails on a write conflict.
    assert {reason for _r, _w, ok, reason in decisions if not ok} <= {"interval_wait", "stale_trigger"}
    with open_store(db_url) as store:
        rows = raw_sql(store, "SELECT anchor_us, phase FROM fg_starts ORDER BY anchor_us")
    assert [phase for _a, phase in rows] == ["confirmed"] * ROUNDS
    assert all(b - a >= FLOOR_S * 1_000_000 for (a, _), (b, _) in pairwise(rows))


def test_threads_racing_get_exactly_one_admission(store) -> None:
    clock = FixedClock(T0)
    Policies(store, clock).configure(Scope.goal("g"), min_interval=timedelta(days=1), expected_revision=0, owner_ref="o")
    admission = Admission(store, clock)

    def attempt(i: int) -> bool:
        return admission.reserve(
            goal="g", agent="a", automation=None, turn_id=f"t{i}", trigger_time=T0 + timedelta(microseconds=i)
        ).admitted

    with ThreadPoolExecutor(max_workers=8) as pool:
        outcomes = list(pool.map(attempt, range(32)))
    assert outcomes.count(True) == 1


def _cli(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "floorgate", *args, "--db", db], capture_output=True, text=True, timeout=120)


def test_a_new_process_after_a_restart_is_still_denied(db_url: str) -> None:
    assert _cli("policy", "set", "g/a", "--min-interval", "1d", "--revision", "0", "--owner-ref", "o", db=db_url).returncode == 0
    first = _cli("admit", "--goal", "g", "--agent", "a", "--turn", "t1", db=db_url)
    assert first.returncode == 0, first.stderr
    second = _cli("admit", "--goal", "g", "--agent", "a", "--turn", "t2", db=db_url)
    assert second.returncode == 3
    assert "interval_wait" in second.stdout and "eligible at" in second.stdout
