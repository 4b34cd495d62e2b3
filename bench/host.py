"""Host start, memory, sync, publish and tick latency: the curve at 1k/10k(/50k) automations.

    .venv/bin/python bench/host.py [--sizes 1000,10000] [--big] [--rounds 3] [--pg URL]

Automations over agents (one per ten), schedules with DTSTARTs six years old (every 15 minutes,
hourly, daily, weekdays, in several zones, at distinct minutes), a daily floor, every agent
started an hour ago (so every tick is denied by the floor and no host is launched). Per size, in
interleaved rounds, each start in a fresh process (its peak RSS its own):
- floorgate's host start (recovery, loading every automation, arming every timer, the default
  catch-up window of one hour), against a fair APScheduler 3 baseline: a scheduler starting with
  the same number of jobs stored in a SQLAlchemyJobStore on SQLite, a real Python function as the
  job, interval triggers, coalescing and a one-hour misfire grace (the same catch-up), stopped ten
  minutes before (its first processing pass catches up the missed fires); ratios per round;
- then, once per size: an idle sync, a sync after 2 automations changed (statements counted), a
  forced full sync, the readback publish after start (its longest transaction, and the longest
  admission denial made meanwhile from another process), and tick-to-decision latency.
Goals: host start <= 1.5x the baseline, < 150 MB at 50,000; publish < 0.2 s at 10,000 with no
admission waiting > 100 ms; sync proportional to what changed. ``--big`` adds 50,000.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import pickle
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # before bench/: bench/admission.py is not the package

from _rows import record
from _seed import add_automations
from apscheduler.job import Job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
from apscheduler.util import datetime_to_utc_timestamp
from sqlalchemy import event

from floorgate.admission import Admission, Automations, CommandHost, Policies, Scope, open_store
from floorgate.admission.timers import TimerBindings
from floorgate.hosts import Schedule
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime._sync import FULL_SYNC_EVERY
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

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
        lanes = ((f"auto-{i:05d}", f"agent-{i % agents:04d}", canon[i % len(canon)]) for i in range(automations))
        add_automations(store, lanes, host, now - timedelta(hours=1))  # added a while ago: not a change a sync looks at
        admission = Admission(store)
        for a in range(agents):  # every agent started an hour ago: each tick will be denied by its daily floor
            i = a  # automation auto-{a} belongs to agent a
            admission.reserve(
                goal="bench", agent=f"agent-{a:04d}", automation=f"auto-{i:05d}", turn_id=f"seed-{a}", trigger_time=now - timedelta(hours=1)
            )


def job(automation_id: str) -> str:
    """The baseline's job: a real Python function (APScheduler inspects its signature, pickles a
    reference to it, and calls it), doing as little as a denied tick's caller would."""
    return automation_id


def seed_apscheduler(path: str, n: int, down: timedelta) -> None:
    """``n`` interval jobs stored as a SQLAlchemyJobStore stores them, as if its scheduler stopped
    ``down`` ago: each job's next run time is its first fire after then."""
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    store = SQLAlchemyJobStore(url=f"sqlite:///{path}")
    store.start(None, "default")  # creates the table
    sched = BackgroundScheduler(timezone=timezone.utc)
    stopped = datetime.now(timezone.utc) - down
    rows = []
    for i in range(n):
        trigger = IntervalTrigger(minutes=15, start_date=datetime(2020, 12, 1, 0, i % 60, tzinfo=timezone.utc))
        first = trigger.get_next_fire_time(None, stopped)
        j = Job(sched, id=f"auto-{i:05d}", func=job, args=(f"auto-{i:05d}",), kwargs={}, trigger=trigger, executor="default")
        j._modify(name=j.id, misfire_grace_time=3600, coalesce=True, max_instances=1, next_run_time=first)
        rows.append(
            dict(id=j.id, next_run_time=datetime_to_utc_timestamp(first), job_state=pickle.dumps(j.__getstate__(), pickle.HIGHEST_PROTOCOL))
        )
    with store.engine.begin() as conn:
        conn.execute(store.jobs_t.delete())
        conn.execute(store.jobs_t.insert(), rows)
    store.shutdown()


def host_start(url: str, state: Path) -> tuple[float, HostRuntime, float]:
    """floorgate's host start with the deployment's default host policy (one hour of catch-up):
    wall and CPU seconds (on a loaded machine the wall time is mostly waiting for a core)."""
    store = open_store(url)
    runtime = Floorgate(store).host_runtime(RuntimeConfig(state_dir=state))
    start, cpu = time.perf_counter(), time.process_time()
    runtime.start()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    return elapsed, runtime, cpu


def floorgate_start(url: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as state:
        elapsed, runtime, cpu = host_start(url, Path(state))
        jobs = len(runtime.scheduler.get_jobs())
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        runtime.stop()
        runtime.store.close()
    return {"seconds": elapsed, "cpu": cpu, "rss_mb": rss, "jobs": jobs}


def _deny_loop(url: str, stop, latencies) -> None:  # type: ignore[no-untyped-def]
    """Another process's admission denials while the host publishes (an agent inside its floor)."""
    with open_store(url) as store:
        admission = Admission(store)
        k = 0
        while not stop.is_set():
            start = time.perf_counter()
            admission.reserve(
                goal="bench", agent="agent-0000", automation="auto-00000", turn_id=f"probe-{k}", trigger_time=datetime.now(timezone.utc)
            )
            latencies.append(time.perf_counter() - start)
            k += 1


def operations(url: str, samples: int) -> dict[str, float]:
    """After a host start: syncs, publish, tick latency (one process, one run)."""
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as state:
        _, runtime, _ = host_start(url, Path(state))
        runtime.stop()  # its loops: this process drives the syncs itself (the timers stay armed)
        store = runtime.store
        statements = [0]
        event.listen(store.engine, "before_cursor_execute", lambda *a: statements.__setitem__(0, statements[0] + 1))
        runtime.sync()
        start = time.perf_counter()
        statements[0] = 0
        runtime.sync()
        out["idle_sync_s"], out["idle_sync_statements"] = time.perf_counter() - start, statements[0]
        automations = Automations(store)
        for aid in ("auto-00003", "auto-00007"):
            automations.set_state(aid, "paused", note="bench")
        start = time.perf_counter()
        statements[0] = 0
        runtime.sync()
        out["changed_sync_s"], out["changed_sync_statements"] = time.perf_counter() - start, statements[0]
        runtime._marks.partial = FULL_SYNC_EVERY  # the next one reconciles everything
        start = time.perf_counter()
        runtime.sync()
        out["full_sync_s"] = time.perf_counter() - start
        chunks: list[float] = []
        original = TimerBindings._publish_chunk

        def timed_chunk(self, rows):  # type: ignore[no-untyped-def]
            t = time.perf_counter()
            original(self, rows)
            chunks.append(time.perf_counter() - t)

        TimerBindings._publish_chunk = timed_chunk  # type: ignore[method-assign]
        ctx = multiprocessing.get_context("spawn")
        stop, latencies = ctx.Event(), ctx.Manager().list()
        prober = ctx.Process(target=_deny_loop, args=(url, stop, latencies))
        prober.start()
        deadline = time.monotonic() + 60
        while len(latencies) < 20 and time.monotonic() < deadline:  # the prober is up and denying
            time.sleep(0.05)
        before = len(latencies)
        start = time.perf_counter()
        runtime.publish()
        out["publish_s"] = time.perf_counter() - start
        time.sleep(0.2)
        stop.set()
        prober.join()
        during = list(latencies)[before:]
        out["publish_longest_txn_s"] = max(chunks) if chunks else 0.0
        out["publish_rows"] = float(len(chunks))
        out["denial_max_during_publish_s"] = max(during) if during else float("nan")
        out["denials_during_publish"] = float(len(during))
        for aid in ("auto-00003", "auto-00007"):
            automations.set_state(aid, "active", note=None)
        latencies_t = tick_latency(runtime, len(automations.revisions()), samples)
        out["tick_p50_s"], out["tick_p99_s"] = statistics.median(latencies_t), pct(latencies_t, 99)
        store.close()
    return out


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


def child(kind: str, url: str, samples: int) -> dict[str, float]:
    if kind == "floorgate":
        return floorgate_start(url)
    return operations(url, samples)


# The APScheduler baseline's process: standalone (it never imports floorgate, whose imports would
# count in its memory and start); ``job`` resolves as the seed stored it (``__main__:job``).
APSCHEDULER_CHILD = """
import json, resource, sys, threading, time
from datetime import timezone
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
def job(automation_id):
    return automation_id
kind, path = sys.argv[1], sys.argv[2]
done = threading.Event()
class Timed(BackgroundScheduler):
    def _process_jobs(self):
        wait = super()._process_jobs()
        done.set()
        return wait
start, cpu = time.perf_counter(), time.process_time()
sched = Timed(jobstores={"default": SQLAlchemyJobStore(url=f"sqlite:///{path}")}, timezone=timezone.utc)
sched.start()
done.wait()
jobs = len(sched.get_jobs()) if kind == "resuming" else 0
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
jobs = jobs or len(sched.get_jobs())
sched.shutdown(wait=False)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "cpu": cpu, "rss_mb": rss, "jobs": jobs}))
"""


def measure(kind: str, url: str, samples: int = 0) -> dict[str, float]:
    argv = [sys.executable, __file__, "--child", kind, url, "--samples", str(samples)]
    if kind in ("resuming", "catching-up"):
        argv = [sys.executable, "-c", APSCHEDULER_CHILD, kind, url]
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{kind} child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def spread(values: list[float], unit: str = "", scale: float = 1.0, digits: int = 2) -> str:
    m, lo, hi = (f"{v * scale:.{digits}f}" for v in (statistics.median(values), min(values), max(values)))
    return f"{m}{unit} ({lo}..{hi})"


def run_size(size: int, rounds: int, samples: int, previous: tuple[int, float] | None, catch_up_limit: int) -> float:
    with tempfile.TemporaryDirectory(dir=".") as tmp:
        url = os.path.join(tmp, "host.db")
        resumed, caught = os.path.join(tmp, "resuming.db"), os.path.join(tmp, "catching-up.db")
        seed(url, size, max(1, size // 10))
        measure("floorgate", url)  # unmeasured: its recovery settles the seed's reservations (no journal row), once
        seed_apscheduler(resumed, size, timedelta(0))
        ours, theirs, ratios, late, late_ratios = [], [], [], [], []
        for _ in range(rounds):  # interleaved A/B/C, a fresh process each (the catching-up store is re-seeded: its pass moves the jobs on)
            b = measure("resuming", resumed)
            if size <= catch_up_limit:
                seed_apscheduler(caught, size, timedelta(minutes=10))
                c = measure("catching-up", caught)
            else:
                c = {"seconds": float("nan"), "rss_mb": float("nan"), "jobs": size}
            o = measure("floorgate", url)
            if o["jobs"] != size or b["jobs"] != size or c["jobs"] != size:
                raise SystemExit(f"bench bug: {o['jobs']} / {b['jobs']} / {c['jobs']} jobs for {size}")
            ours.append(o)
            theirs.append(b)
            late.append(c)
            ratios.append(o["seconds"] / b["seconds"])
            late_ratios.append(o["seconds"] / c["seconds"])
        if size > catch_up_limit:
            late, late_ratios = [], []
        ops = measure("operations", url, samples)
    took = statistics.median(o["seconds"] for o in ours)
    rss = [o["rss_mb"] for o in ours]
    growth = (
        f"; growth {took / previous[1] / (size / previous[0]):.2f} (time x{took / previous[1]:.1f} for size x{size / previous[0]:.0f})"
        if previous
        else ""
    )
    print(f"[sqlite] {size} automations over {max(1, size // 10)} agents")
    print(f"  host start            {spread([o['seconds'] for o in ours], ' s')}, {took / size * 1e6:.0f} us per automation{growth}")
    print(f"  APScheduler 3 start   resuming {spread([b['seconds'] for b in theirs], ' s')} (none due, every job read back)")
    if late:
        print(
            f"                        catching up {spread([c['seconds'] for c in late], ' s')} (down 10 minutes: ~2/3 due, each run and stored)"
        )
    else:
        print(f"                        catching up: not run at this size (one fsynced update per due job; --catching-up {size})")
    met = "met" if statistics.median(ratios) <= 1.5 else "NOT met"
    caught_up = f"; {spread(late_ratios, 'x')} catching up" if late_ratios else ""
    print(f"  host / APScheduler    {spread(ratios, 'x')} resuming (goal <= 1.5x: {met}){caught_up}")
    cpu = [o["cpu"] / b["cpu"] for o, b in zip(ours, theirs, strict=True)]
    print(f"                        {spread(cpu, 'x')} in CPU time (host {spread([o['cpu'] for o in ours], ' s')})")
    print(
        f"  peak RSS              {spread(rss, ' MB', digits=0)} (APScheduler resuming {spread([b['rss_mb'] for b in theirs], ' MB', digits=0)}); "
        f"{statistics.median(rss) * 1024 / size:.1f} KB per automation"
    )
    print(
        f"  sync                  idle {ops['idle_sync_s'] * 1e3:.1f} ms ({ops['idle_sync_statements']:.0f} statements), "
        f"2 changed {ops['changed_sync_s'] * 1e3:.1f} ms ({ops['changed_sync_statements']:.0f} statements), "
        f"full {ops['full_sync_s'] * 1e3:.0f} ms"
    )
    print(
        f"  publish after start   {ops['publish_s']:.3f} s in {ops['publish_rows']:.0f} transactions, the longest "
        f"{ops['publish_longest_txn_s'] * 1e3:.1f} ms; {ops['denials_during_publish']:.0f} denials from another process "
        f"meanwhile, the slowest {ops['denial_max_during_publish_s'] * 1e3:.1f} ms (goal < 0.2 s at 10,000, denials < 100 ms)"
    )
    print(f"  tick-to-decision      p50 {ops['tick_p50_s'] * 1e3:.2f} ms, p99 {ops['tick_p99_s'] * 1e3:.2f} ms (denied ticks)")
    rss_mb = statistics.median(rss)
    record(
        f"HostRuntime.start() in process vs APScheduler 3 starting in its own process, {size:,} stored jobs",
        f"{spread(ratios, 'x')}; CPU {spread(cpu, 'x')}",
        "<= 1.5x",
        statistics.median(ratios) <= 1.5,
        backend="sqlite",
    )
    record(
        f"host peak RSS, {size:,} automations",
        f"{spread(rss, ' MB', digits=0)}; APScheduler 3 {spread([b['rss_mb'] for b in theirs], ' MB', digits=0)}",
        "< 150 MB at 50,000",
        rss_mb < 150 if size >= 50_000 else None,
        backend="sqlite",
    )
    record(
        f"sync, {size:,}: idle / 2 changed / full (one run)",
        f"{ops['idle_sync_s'] * 1e3:.1f} / {ops['changed_sync_s'] * 1e3:.1f} / {ops['full_sync_s'] * 1e3:.0f} ms "
        f"({ops['idle_sync_statements']:.0f} / {ops['changed_sync_statements']:.0f} statements)",
        "proportional to what changed (2 changed < 1/10 of a full sync at 10,000)",
        ops["changed_sync_s"] * 10 < ops["full_sync_s"] if size >= 10_000 else None,
        backend="sqlite",
    )
    publish_met = ops["publish_s"] < 0.2 and ops["denial_max_during_publish_s"] < 0.1
    record(
        f"readback publish after start, {size:,} (one run)",
        f"{ops['publish_s']:.3f} s, longest transaction {ops['publish_longest_txn_s'] * 1e3:.1f} ms, "
        f"slowest concurrent denial {ops['denial_max_during_publish_s'] * 1e3:.0f} ms",
        "< 0.2 s at 10,000, no admission waits > 100 ms",
        publish_met if size == 10_000 else None,
        backend="sqlite",
    )
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--big", action="store_true", help="add 50,000 automations")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--catching-up", type=int, default=1000, help="run the catching-up baseline up to this size")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.child[1], args.samples)))
        return
    sizes = [int(x) for x in args.sizes.split(",")] + ([50_000] if args.big else [])
    previous: tuple[int, float] | None = None
    for size in sizes:
        previous = (size, run_size(size, args.rounds, args.samples, previous, args.catching_up))


if __name__ == "__main__":
    main()
