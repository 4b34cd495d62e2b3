"""Host start as a whole process: ``floorgate run`` at 10,000 automations against APScheduler 4
resuming 10,000 stored schedules, each a fresh process.

    .venv/bin/python bench/host_start.py [--size 10000] [--rounds 3]

floorgate: the host benchmark's store (``bench/host.py``'s seed: automations over agents, a daily
floor, schedules of four kinds); ``floorgate run`` is timed from exec until it logs its armed
timers (recovery, loading every automation, arming every timer); its CPU seconds and peak RSS are
read from /proc at that line. The baseline: APScheduler 4 (its own virtualenv under
``bench/.apscheduler4``, made with pip on first use; it never imports floorgate) starting a
``Scheduler`` on a SQLAlchemy data store holding the same number of interval schedules (none due)
and reading every schedule back; its CPU seconds (``getrusage``, the whole process: interpreter,
imports, start) and peak RSS. Rounds interleave the two. Goals: CPU <= 1.3x, RSS <= 1.5x.
What bounds the CPU ratio, in the same rounds: each side's imports alone (floorgate's: the modules
``floorgate run`` loaded before arming, read from ``-X importtime`` in an unmeasured start), the CPU
per stored job beyond them, and APScheduler 3 (floorgate's timer host) arming as many jobs in a
process without floorgate.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _imports import import_code, top_imports
from _rows import record, spread
from host import seed

HERE = Path(__file__).resolve().parent
VENV = HERE / ".apscheduler4"

BASELINE = r"""
import json, resource, sys
from datetime import datetime, timezone
from apscheduler import ConflictPolicy, Scheduler
from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore
from apscheduler.triggers.interval import IntervalTrigger
def job(automation_id):
    return automation_id
mode, path = sys.argv[1], sys.argv[2]
from sqlalchemy import create_engine
store = SQLAlchemyDataStore(create_engine(f"sqlite:///{path}", connect_args={"timeout": 60}))
with Scheduler(store) as scheduler:
    if mode == "seed":
        trigger = IntervalTrigger(minutes=15, start_time=datetime(2020, 12, 1, tzinfo=timezone.utc))
        scheduler.add_schedule(job, trigger, id="auto-00000", args=("auto-00000",), conflict_policy=ConflictPolicy.replace)
    else:
        scheduler.start_in_background()
        schedules = len(scheduler.get_schedules())
        use = resource.getrusage(resource.RUSAGE_SELF)
        print(json.dumps({"cpu": use.ru_utime + use.ru_stime, "rss_mb": use.ru_maxrss / 1024, "jobs": schedules}))
"""
# floorgate's timer host is APScheduler 3: arming one job per automation (added before the scheduler
# starts, as the host does), in a process that does not import floorgate; CPU per job.
APS3_ARM = r"""
import json, sys, time
from datetime import datetime, timedelta, timezone
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger
def job(automation_id):
    return automation_id
n = int(sys.argv[1])
scheduler = BackgroundScheduler(timezone=timezone.utc, job_defaults={"coalesce": True, "max_instances": 1})
trigger = IntervalTrigger(minutes=15, start_date=datetime(2020, 12, 1, tzinfo=timezone.utc))
first = datetime.now(timezone.utc) + timedelta(days=1)
began = time.process_time()
for i in range(n):
    scheduler.add_job(job, trigger=trigger, args=(f"auto-{i:05d}",), id=f"auto-{i:05d}", name=f"auto-{i:05d}", next_run_time=first)
scheduler.start(paused=True)
cpu = time.process_time() - began
scheduler.shutdown(wait=False)
print(json.dumps({"cpu": cpu}))
"""
# The bound under each start: its imports alone, CPU from getrusage at the end (same as BASELINE's).
RUSAGE = (
    "\nimport json, resource\nuse = resource.getrusage(resource.RUSAGE_SELF)\nprint(json.dumps({'cpu': use.ru_utime + use.ru_stime}))\n"
)
BASELINE_IMPORTS = (
    "from apscheduler import ConflictPolicy, Scheduler\n"
    "from apscheduler.datastores.sqlalchemy import SQLAlchemyDataStore\n"
    "from apscheduler.triggers.interval import IntervalTrigger\n"
    "from sqlalchemy import create_engine\n"
) + RUSAGE


def _python() -> str:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "apscheduler==4.0.0a6", "sqlalchemy[asyncio]", "aiosqlite", "sniffio"]
        subprocess.run(pip, check=True)
    return str(python)


def seed_baseline(python: str, path: str, n: int) -> None:
    """One schedule stored by APScheduler 4 itself, copied to ``n`` rows (distinct ids)."""
    subprocess.run([python, "-c", BASELINE, "seed", path], check=True, capture_output=True)
    with sqlite3.connect(path) as db:
        columns = [row[1] for row in db.execute("PRAGMA table_info(schedules)")]
        rest = ", ".join(c for c in columns if c != "id")
        # Not due (as after a stop a moment ago): its stored first fire is DTSTART, six years back.
        db.execute("UPDATE schedules SET next_fire_time = ?", (int((time.time() + 86400) * 1e6),))
        for i in range(1, n):
            db.execute(f"INSERT INTO schedules (id, {rest}) SELECT ?, {rest} FROM schedules WHERE id = 'auto-00000'", (f"auto-{i:05d}",))


def _proc(pid: int) -> tuple[float, float]:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    status = Path(f"/proc/{pid}/status").read_text()
    hwm = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return cpu, hwm / 1024


def floorgate_start(url: str, state: str, imports: list[str] | None = None) -> dict[str, float]:
    """One ``floorgate run`` until it arms its timers; ``imports``: filled with the top modules it
    imported by then (traced with ``-X importtime``: slower, so not a measured start)."""
    argv = [sys.executable, "-m", "floorgate", "run", "--db", url, "--state-dir", state, "--poll", "1h"]
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"} if imports is not None else None
    with tempfile.NamedTemporaryFile("a") as sink, open(sink.name, encoding="utf-8") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=sink, env=env)
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and proc.poll() is None:
                line = err.readline()
                if not line:
                    time.sleep(0.005)
                    continue
                if " armed " in line:
                    cpu, rss = _proc(proc.pid)
                    if imports is not None:
                        imports += top_imports(Path(sink.name).read_text(encoding="utf-8").splitlines())
                    return {"cpu": cpu, "rss_mb": rss, "jobs": float(line.split(" armed ")[1].split()[0])}
            raise SystemExit(f"floorgate run did not arm its timers:\n{Path(sink.name).read_text()[-2000:]}")
        finally:
            proc.terminate()
            proc.wait(60)


def _cpu(argv: list[str]) -> float:
    out = subprocess.run(argv, check=True, capture_output=True, text=True)
    cpu: float = json.loads(out.stdout.strip().splitlines()[-1])["cpu"]
    return cpu


def _bound_rows(
    size: int,
    ours: list[dict[str, float]],
    theirs: list[dict[str, float]],
    our_imports: list[float],
    their_imports: list[float],
    aps3_arm: list[float],
) -> None:
    """What bounds the start's CPU ratio: the two sides' imports alone, and the CPU left per stored
    job once the imports are paid (each round's start minus the same round's imports)."""
    n = f"{size:,}"
    imports = [o / t for o, t in zip(our_imports, their_imports, strict=True)]
    now = f"{spread(imports)}; {spread(our_imports, ' CPU-s')} vs {spread(their_imports, ' CPU-s')}"
    print(f"         bound: the imports alone (what floorgate run loads before arming vs APScheduler 4's): {now}")
    record(
        "bound under host start: CPU of importing what `floorgate run` loads before arming vs APScheduler 4's imports",
        now,
        "-",
        None,
        backend="sqlite",
    )
    per_ours = [(o["cpu"] - i) / size * 1e6 for o, i in zip(ours, our_imports, strict=True)]
    per_theirs = [(t["cpu"] - i) / size * 1e6 for t, i in zip(theirs, their_imports, strict=True)]
    per = [o / t for o, t in zip(per_ours, per_theirs, strict=True)]
    now = f"{spread(per)}; {spread(per_ours, ' us', 0)} vs {spread(per_theirs, ' us', 0)} CPU per job"
    print(f"         bound: CPU per stored job beyond the imports, at {n}: {now}")
    record(f"bound under host start: CPU per stored job beyond the imports, at {n}, vs APScheduler 4's", now, "-", None, backend="sqlite")
    arm = [a / t for a, t in zip(aps3_arm, per_theirs, strict=True)]
    now = f"{spread(arm)}; {spread(aps3_arm, ' us', 0)} vs {spread(per_theirs, ' us', 0)} CPU per job"
    print(f"         bound: APScheduler 3 arming {n} jobs (floorgate's timer host; no floorgate) vs APScheduler 4's resume, per job: {now}")
    record(
        f"bound under host start: APScheduler 3 (floorgate's timer host) arming {n} jobs, no floorgate, vs APScheduler 4's resume, per job",
        now,
        "-",
        None,
        backend="none",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    python = _python()
    with tempfile.TemporaryDirectory(dir=HERE.parent) as tmp:
        url, base = os.path.join(tmp, "host.db"), os.path.join(tmp, "aps4.db")
        seed(url, args.size, max(1, args.size // 10))
        seed_baseline(python, base, args.size)
        # Unmeasured: its recovery settles the seed's reservations, once; its imports are traced.
        modules: list[str] = []
        floorgate_start(url, os.path.join(tmp, "state"), modules)
        print(f"floorgate run imports (top of the tree, before arming): {', '.join(modules)}")
        ours, theirs, our_imports, their_imports, aps3_arm = [], [], [], [], []
        for r in range(args.rounds):
            for kind in ("floorgate", "apscheduler") if r % 2 == 0 else ("apscheduler", "floorgate"):
                if kind == "floorgate":
                    ours.append(floorgate_start(url, os.path.join(tmp, "state")))
                    our_imports.append(_cpu([sys.executable, "-c", import_code(modules) + RUSAGE]))
                    aps3_arm.append(_cpu([sys.executable, "-c", APS3_ARM, str(args.size)]) / args.size * 1e6)
                else:
                    out = subprocess.run([python, "-c", BASELINE, "start", base], check=True, capture_output=True, text=True)
                    theirs.append(json.loads(out.stdout.strip().splitlines()[-1]))
                    their_imports.append(_cpu([python, "-c", BASELINE_IMPORTS]))
    if any(o["jobs"] != args.size for o in ours) or any(t["jobs"] != args.size for t in theirs):
        raise SystemExit(f"bench bug: {[o['jobs'] for o in ours]} / {[t['jobs'] for t in theirs]} timers for {args.size}")
    cpu = [o["cpu"] / t["cpu"] for o, t in zip(ours, theirs, strict=True)]
    rss = [o["rss_mb"] / t["rss_mb"] for o, t in zip(ours, theirs, strict=True)]
    n = f"{args.size:,}"
    print(
        f"[sqlite] whole-process start at {n}: floorgate run CPU {spread([o['cpu'] for o in ours], ' s')}, RSS {spread([o['rss_mb'] for o in ours], ' MB', 0)}"
    )
    print(
        f"         APScheduler 4 resuming: CPU {spread([t['cpu'] for t in theirs], ' s')}, RSS {spread([t['rss_mb'] for t in theirs], ' MB', 0)}"
    )
    print(f"         ratios: CPU {spread(cpu)}, RSS {spread(rss)} (goals <= 1.3x, <= 1.5x)")
    cpu_med, rss_med = sorted(cpu)[len(cpu) // 2], sorted(rss)[len(rss) // 2]
    _bound_rows(args.size, ours, theirs, our_imports, their_imports, aps3_arm)
    record(
        f"host start at {n}, whole process: CPU vs APScheduler 4 resuming {n} stored schedules",
        spread(cpu),
        "<= 1.3x",
        cpu_med <= 1.3,
        backend="sqlite",
    )
    record(
        f"host start at {n}, whole process: peak RSS vs the same",
        f"{spread(rss)}; {spread([o['rss_mb'] for o in ours], ' MB', 0)}",
        "<= 1.5x",
        rss_med <= 1.5,
        backend="sqlite",
    )


if __name__ == "__main__":
    main()
