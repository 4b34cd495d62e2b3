"""Admission cost against bare durable inserts, measured in one run on each backend.

    .venv/bin/python bench/admission.py [--pg postgresql://postgres@127.0.0.1/test] [--n 2000]

Baselines: a bare sqlite3 loop (WAL, synchronous=FULL, BEGIN IMMEDIATE; INSERT; COMMIT) on the
same file system, and a bare psycopg loop (INSERT; COMMIT) on the same server. floorgate's
admitted cycle is reserve + confirm (two durable commits by design: the reservation, then the
confirmation once the host attempt is journaled). Prints per-operation microseconds and ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from admission import Admission, FixedClock, Policies, Scope, open_store

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)


def _best(samples: list[float]) -> float:
    return statistics.median(samples)


def bare_sqlite(path: str, n: int) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS bare (id TEXT PRIMARY KEY, goal TEXT, agent TEXT, at INTEGER)")
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO bare VALUES (?, 'g', 'a', ?)", (f"b{i}-{uuid.uuid4().hex[:6]}", i))
        conn.execute("COMMIT")
    elapsed = (time.perf_counter() - start) / n
    conn.close()
    return elapsed


def bare_pg(dsn: str, n: int) -> float:
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS bare_unused (x int)")  # warm the connection
        conn.execute("DROP TABLE IF EXISTS fg_bench_bare")
        conn.execute("CREATE TABLE fg_bench_bare (id TEXT PRIMARY KEY, goal TEXT, agent TEXT, at BIGINT)")
        conn.commit()
        start = time.perf_counter()
        for i in range(n):
            conn.execute("INSERT INTO fg_bench_bare VALUES (%s, 'g', 'a', %s)", (f"b{i}", i))
            conn.commit()
        elapsed = (time.perf_counter() - start) / n
        conn.execute("DROP TABLE fg_bench_bare")
        conn.commit()
    return elapsed


def floorgate_cycles(url: str, n: int) -> tuple[float, float]:
    """(admitted reserve+confirm seconds, denial seconds) per operation."""
    store = open_store(url)
    clock = FixedClock(T0)
    agent = f"bench-{uuid.uuid4().hex[:8]}"
    Policies(store, clock).configure(Scope.agent("g", agent), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="bench")
    admission = Admission(store, clock)
    start = time.perf_counter()
    for i in range(n):
        clock.advance(timedelta(hours=1))
        d = admission.reserve(goal="g", agent=agent, automation="x", turn_id=f"{agent}-a{i}", trigger_time=clock.now())
        if not d.admitted:
            raise SystemExit(f"bench bug: cycle {i} denied: {d.reason}")
        admission.confirm(d.turn_id)
    admitted = (time.perf_counter() - start) / n
    start = time.perf_counter()
    for i in range(n):
        d = admission.reserve(
            goal="g", agent=agent, automation="x", turn_id=f"{agent}-d{i}", trigger_time=clock.now() + timedelta(microseconds=i + 1)
        )
        if d.admitted:
            raise SystemExit("bench bug: a denial was admitted")
    denied = (time.perf_counter() - start) / n
    store.close()
    return admitted, denied


def _racer(url: str, agent: str, worker: int, rounds: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = open_store(url)
    clock = FixedClock(T0)
    admission = Admission(store, clock)
    for r in range(rounds):
        clock.set(T0 + timedelta(hours=r))
        barrier.wait(timeout=60)
        d = admission.reserve(goal="g", agent=agent, automation=f"x{worker}", turn_id=f"{agent}-w{worker}-r{r}", trigger_time=clock.now())
        if d.admitted:
            admission.confirm(d.turn_id)
        results.put((r, d.admitted))
    store.close()


def race(url: str, procs: int = 8, rounds: int = 20) -> Counter:  # type: ignore[type-arg]
    agent = f"race-{uuid.uuid4().hex[:8]}"
    with open_store(url) as store:
        Policies(store, FixedClock(T0)).configure(
            Scope.agent("g", agent), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="bench"
        )
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    workers = [ctx.Process(target=_racer, args=(url, agent, w, rounds, barrier, results)) for w in range(procs)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=300) for _ in range(procs * rounds)]
    for w in workers:
        w.join()
    return Counter(r for r, ok in outcomes if ok)


def report(name: str, bare: float, admitted: float, denied: float, wins: Counter, rounds: int) -> bool:  # type: ignore[type-arg]
    cycle_ratio = admitted / bare
    deny_ratio = admitted / denied
    exact = all(wins.get(r, 0) == 1 for r in range(rounds))
    print(f"[{name}]")
    print(f"  bare durable insert+commit      {bare * 1e6:8.1f} us")
    print(f"  admitted reserve+confirm cycle  {admitted * 1e6:8.1f} us   = {cycle_ratio:.2f}x bare insert  (target <= 2.5x)")
    print(f"  denial                          {denied * 1e6:8.1f} us   admission/denial = {deny_ratio:.1f}x  (target >= 10x)")
    print(
        f"  8 processes x {rounds} windows: admissions per window {sorted(set(wins.values()))}  "
        f"({'exactly one each' if exact else 'NOT exactly one'})"
    )
    return exact


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000, help="operations per measurement")
    parser.add_argument("--pg", default=os.environ.get("FLOORGATE_TEST_PG_URL"), help="PostgreSQL URL (skip when absent)")
    parser.add_argument("--dir", default=None, help="directory for the SQLite files (default: a temp dir under the cwd)")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(dir=args.dir or ".") as tmp:
        url = os.path.join(tmp, "bench.db")
        open_store(url).close()
        bare = _best([bare_sqlite(os.path.join(tmp, "bare.db"), args.n) for _ in range(3)])
        runs = [floorgate_cycles(url, args.n) for _ in range(3)]
        ok &= report("sqlite", bare, _best([a for a, _ in runs]), _best([d for _, d in runs]), race(url, rounds=args.rounds), args.rounds)
    if args.pg:
        open_store(args.pg).close()
        dsn = args.pg.replace("postgresql+psycopg://", "postgresql://")
        bare = _best([bare_pg(dsn, args.n) for _ in range(3)])
        runs = [floorgate_cycles(args.pg, args.n) for _ in range(3)]
        ok &= report(
            "postgresql", bare, _best([a for a, _ in runs]), _best([d for _, d in runs]), race(args.pg, rounds=args.rounds), args.rounds
        )
    else:
        print("[postgresql] skipped: pass --pg URL or set FLOORGATE_TEST_PG_URL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
