"""Host start-up and tick latency with 10,000 automations over 1,000 agents.

    .venv/bin/python bench/host.py [--automations 10000] [--agents 1000] [--pg URL]

Measures in one run, on a SQLite file (and PostgreSQL with --pg):
- host start (recovery + loading every automation + arming 10,000 APScheduler timers) against
  bare APScheduler 3 adding the same 10,000 jobs with plain interval triggers;
- peak RSS of the process after start;
- tick-to-decision latency (p50, p99): from a timer tick to admission's decision, on ticks that
  admission denies (every agent already started inside its daily floor), so no host is launched.
Schedules have DTSTARTs six years old (every 15 minutes, hourly, daily in several zones).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from sqlalchemy import insert

from admission import Admission, CommandHost, HostPolicies, HostPolicy, Policies, Scope, open_store
from admission import _schema as tables
from hosts import Schedule
from scheduler.runtime import HostRuntime, RuntimeConfig

SCHEDULES = [
    "DTSTART;TZID=Europe/Berlin:20201201T000000 RRULE:FREQ=MINUTELY;INTERVAL=15",
    "DTSTART:20201201T000500Z RRULE:FREQ=HOURLY",
    "DTSTART;TZID=America/New_York:20201201T090000 RRULE:FREQ=DAILY",
    "DTSTART;TZID=Asia/Tokyo:20201201T083000 RRULE:FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR",
]


def seed(url: str, automations: int, agents: int) -> None:
    now = datetime.now(timezone.utc)
    # Distinct start minutes per automation, as real owners' schedules would have.
    canon = [
        Schedule.parse(s.replace("T0000", f"T00{m:02d}").replace("T0005", f"T00{m:02d}")).canonical() for m in range(60) for s in SCHEDULES
    ]
    host = CommandHost(argv=("true",), timeout_seconds=60).model_dump_json()
    with open_store(url) as store:
        Policies(store).configure(Scope.goal("bench"), min_interval=timedelta(days=1), expected_revision=0, owner_ref="bench")
        rows = [
            dict(
                automation_id=f"auto-{i:05d}",
                goal_id="bench",
                agent_id=f"agent-{i % agents:04d}",
                schedule=canon[i % len(canon)],
                host_spec=host,
                model=None,
                overlap="skip",
                state="active",
                state_note=None,
                revision=1,
                created_at_us=now,
                updated_at_us=now,
            )
            for i in range(automations)
        ]
        with store.write() as conn:
            conn.execute(insert(tables.automations), rows)
        admission = Admission(store)
        for a in range(agents):  # every agent started an hour ago: each tick will be denied by its daily floor
            i = a  # automation auto-{a} belongs to agent a
            admission.reserve(
                goal="bench", agent=f"agent-{a:04d}", automation=f"auto-{i:05d}", turn_id=f"seed-{a}", trigger_time=now - timedelta(hours=1)
            )


def bare_apscheduler(n: int) -> float:
    """Add ``n`` jobs, then start the scheduler (which arms them): what the host does, bare."""
    sched = BackgroundScheduler(timezone=timezone.utc)
    start = time.perf_counter()
    for i in range(n):
        sched.add_job(print, IntervalTrigger(minutes=15, start_date=datetime(2020, 12, 1, tzinfo=timezone.utc)), id=f"j{i}")
    sched.start(paused=True)
    elapsed = time.perf_counter() - start
    sched.shutdown(wait=False)
    return elapsed


def host_start(url: str, state: Path) -> tuple[float, HostRuntime]:
    store = open_store(url)
    HostPolicies(store).set(HostPolicy(catch_up=timedelta(0)), expected_revision=HostPolicies(store).get().revision, owner_ref="bench")
    runtime = HostRuntime(store, RuntimeConfig(state_dir=state))
    start = time.perf_counter()
    runtime.start()
    elapsed = time.perf_counter() - start
    return elapsed, runtime


def tick_latency(runtime: HostRuntime, automations: int, samples: int) -> list[float]:
    out = []
    for k in range(samples):
        aid = f"auto-{(k * 7919) % automations:05d}"
        start = time.perf_counter()
        tick = runtime.tick(aid)
        out.append(time.perf_counter() - start)
        if tick.decision != "denied":
            raise SystemExit(f"bench bug: {aid} was {tick.decision} ({tick.reason})")
    return out


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def run_backend(name: str, url: str, args: argparse.Namespace, bare: float) -> None:
    seed(url, args.automations, args.agents)
    with tempfile.TemporaryDirectory() as state:
        elapsed, runtime = host_start(url, Path(state))
        jobs = len(runtime.scheduler.get_jobs())
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        latencies = tick_latency(runtime, args.automations, args.samples)
        runtime.stop()
        runtime.store.close()
    print(f"[{name}] {args.automations} automations over {args.agents} agents, {jobs} timers armed")
    print(f"  host start                 {elapsed:7.3f} s   = {elapsed / bare:.2f}x bare APScheduler  (target <= 3x)")
    print(f"  peak RSS                   {rss_mb:7.1f} MB                          (target < 150 MB)")
    print(f"  tick-to-decision p50       {statistics.median(latencies) * 1e3:7.2f} ms")
    print(f"  tick-to-decision p99       {pct(latencies, 99) * 1e3:7.2f} ms                          (target < 20 ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--automations", type=int, default=10_000)
    parser.add_argument("--agents", type=int, default=1_000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--pg", default=None, help="also run on this PostgreSQL database (its floorgate tables are used)")
    args = parser.parse_args()
    bare = statistics.median([bare_apscheduler(args.automations) for _ in range(3)])
    print(f"bare APScheduler 3: {args.automations} add_job calls in {bare:.3f} s")
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        run_backend("sqlite", os.path.join(tmp, "host.db"), args, bare)
    if args.pg:
        schema = f"fgbench_{uuid.uuid4().hex[:8]}"
        import psycopg

        dsn = args.pg.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            sep = "&" if "?" in args.pg else "?"
            run_backend("postgresql", f"{args.pg}{sep}options=-csearch_path%3D{schema}", args, bare)
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
