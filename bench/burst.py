"""A real host's burst: a ``floorgate run`` process deciding the ticks of 10 lanes per agent due in the same second.

    .venv/bin/python bench/burst.py [--pg URL] [--rounds 3] [--cases floor,all] [--agents 100] [--lead 12]

``--agents`` per-minute automations times ten (ten lanes per agent; default 100 agents: 1,000
automations), all due at the same second T, ``--lead`` seconds after seeding (the host starts and
arms before it). Two cases:
- ``floor``: every agent has an agent floor of one hour and no start yet: one lane per agent is
  admitted, its nine siblings are denied by the agent floor;
- ``all``: no floor: every lane admitted (their turns run ``true``, 8 turn workers).
Each round starts, per backend, a real ``floorgate run --log-level debug`` process and, interleaved
with it, the baseline: a standalone process (it does not import floorgate) running bare APScheduler
3.x with the same 1,000 jobs due at T, each making the same statements on the same store
(admission's facts read; when it may admit, a write transaction taking the agent's lock, the facts
read again, the start inserted; a turn ``true`` on 8 workers, then its confirm). Both log one line
per decision with the same format; the time of a decision is its line's time stamp.
Reported: the last decision after T (s), and the process CPU seconds from T to its last decision;
ratios floorgate / baseline per round (median and spread). Goal: last decision <= 2x the baseline.
When py-spy is installed (the ``test`` extra has it), one more round after the timed ones is sampled
on both sides alike and kept out of the ratios (``--no-split``: no sampled round): two "bound under the burst" rows per case split the CPU per decision by
part and the wall time into computing and waiting (see ``_burst_split``).
For digging: ``BURST_KEEP=FILE`` keeps the last process's log, ``BURST_SPLIT_KEEP=DIR`` the raw samples.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from _burst_split import Sampler, Split, cpu_parts, py_spy, wall_parts
from _pg import drop_schema, pg_schema
from _rows import record, spread
from _seed import add_automations

ROOT = Path(__file__).resolve().parents[1]
AGENTS, LANES = 100, 10  # AGENTS: --agents
LEAD = 12.0  # seconds from seeding to T (--lead): the host (or baseline) starts and arms before it
_ARMING: list[float] = []  # seconds from launch to "armed" seen so far: a loaded machine leads by more
LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .*?(decided|armed) ")


# -- the baseline: a standalone process, bare APScheduler 3 (never imports floorgate) ----------
BASELINE = r"""
import json, logging, subprocess, sys, re, threading, zlib
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger

spec = json.loads(sys.argv[1])
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logging.getLogger("apscheduler").setLevel(logging.WARNING)
log = logging.getLogger("baseline")
pg = spec["url"].startswith("postgresql")
if pg:
    import psycopg
    conv = lambda s: re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", s)
    connect = lambda: psycopg.connect(spec["url"].replace("postgresql+psycopg://", "postgresql://"), autocommit=True)
else:
    import sqlite3
    conv = lambda s: s
    def connect():
        c = sqlite3.connect(spec["url"], isolation_level=None, check_same_thread=False, timeout=60)
        c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=FULL")
        return c
FACTS, INSERT, CONFIRM = conv(spec["facts"]), conv(spec["insert"]), conv(spec["confirm"])
local = threading.local()
def conn():
    c = getattr(local, "c", None)
    if c is None:
        c = local.c = connect()
    return c
turns = ThreadPoolExecutor(8)
T = spec["t_us"]
def run_turn(turn_id):
    subprocess.run(["true"])
    conn().execute(CONFIRM, {"t": turn_id, "now": int(datetime.now(timezone.utc).timestamp() * 1e6)})
def tick(aid, agent):
    c = conn()
    p = {"g": "bench", "a": agent, "x": aid, "xr": aid, "t": f"{aid}-{T}", "tr": T, "kind": "scheduled", "reason": None, "lim": None}
    floor = spec["floor_us"]
    row = c.execute(FACTS, p).fetchone()
    if floor and row[2] is not None and row[2] + floor > T:
        log.debug("decided %s: denied agent_interval", aid); return
    if pg:
        c.execute("BEGIN"); c.execute("SELECT pg_advisory_xact_lock(%(k)s)", {"k": zlib.crc32(agent.encode())})
    else:
        c.execute("BEGIN IMMEDIATE")
    row = c.execute(FACTS, p).fetchone()
    if floor and row[2] is not None and row[2] + floor > T:
        c.execute("ROLLBACK"); log.debug("decided %s: denied agent_interval", aid); return
    p["now"] = int(datetime.now(timezone.utc).timestamp() * 1e6)
    c.execute(INSERT, p); c.execute("COMMIT")
    log.debug("decided %s: admitted", aid)
    turns.submit(run_turn, p["t"])
sched = BackgroundScheduler(timezone=timezone.utc)
at = datetime.fromtimestamp(T / 1e6, timezone.utc)
for aid, agent in spec["jobs"]:
    sched.add_job(tick, CronTrigger(second=at.second, start_date=at, timezone=timezone.utc), args=(aid, agent), id=aid,
                  coalesce=True, misfire_grace_time=3600, max_instances=1)
sched.start()
log.info("armed %d jobs", len(spec["jobs"]))
threading.Event().wait()
"""


# -- driver ------------------------------------------------------------------------------------
def _ids() -> list[tuple[str, str]]:
    return [(f"auto-{a:03d}-{k}", f"agent-{a:03d}") for a in range(AGENTS) for k in range(LANES)]


def seed(url: str, t: datetime, floor: bool) -> None:

    from floorgate.admission import CommandHost, Policies, Scope, open_store
    from floorgate.hosts import Schedule

    now = datetime.now(timezone.utc)
    schedule = Schedule.parse(f"DTSTART:{t:%Y%m%dT%H%M%S}Z RRULE:FREQ=MINUTELY").canonical()
    host = CommandHost(argv=("true",), timeout_seconds=60).model_dump_json()
    with open_store(url) as store:
        if floor:
            policies = Policies(store)
            for a in range(AGENTS):
                policies.configure(
                    Scope.agent("bench", f"agent-{a:03d}"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="bench"
                )
        add_automations(store, ((aid, agent, schedule) for aid, agent in _ids()), host, now)


def _statements(dialect: str) -> dict[str, str]:
    from floorgate.admission._facts import CONFIRM_SQL, FACTS_SQL, INSERT_START_SQL

    return {"facts": FACTS_SQL[dialect], "insert": INSERT_START_SQL, "confirm": CONFIRM_SQL}


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").timestamp()  # local time, as logging wrote it


def watch(argv: list[str], t: float, n: int, cap: float, env: dict[str, str], split: bool = False) -> tuple[dict[str, float], Split | None]:
    """Run ``argv`` until it logged ``n`` decisions (or ``cap`` s after T); the last one's delay
    after T, and the process's CPU seconds from just before T to then."""
    # The child appends to its own file description; reading through another never moves its offset.
    with tempfile.NamedTemporaryFile("a") as sink, open(sink.name, encoding="utf-8", errors="replace") as err:
        launched = time.time()
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=sink, env=env, cwd=ROOT)
        try:
            armed_at = None
            cpu0 = None
            sampled = None
            while time.time() < t - 0.3:
                time.sleep(0.05)
                if proc.poll() is not None:
                    break
            if proc.poll() is None:
                cpu0 = _cpu(proc.pid)
            sampler = Sampler(proc.pid) if split and cpu0 is not None else None
            decided: list[float] = []
            while proc.poll() is None and time.time() < t + cap:
                time.sleep(0.1)
                err.seek(0)
                decided = []
                for line in err:
                    m = LINE.match(line)
                    if m and m.group(2) == "decided":
                        decided.append(_stamp(m.group(1)))
                    elif m and armed_at is None:
                        armed_at = _stamp(m.group(1))
                if len(decided) >= n:
                    break
            cpu1 = _cpu(proc.pid) if proc.poll() is None else float("nan")
            if sampler is not None:
                sampled = sampler.stop()
            if os.environ.get("BURST_KEEP"):
                err.seek(0)
                Path(os.environ["BURST_KEEP"]).write_text(err.read())
            if proc.poll() is not None or cpu0 is None:
                err.seek(0)
                raise SystemExit(f"{argv[:4]} exited early:\n{err.read()[-3000:]}")
            if not decided:  # a broken side (a statement it cannot run) must not read as a slow one
                err.seek(0)
                raise SystemExit(f"{argv[:4]} decided nothing before the cap:\n{err.read()[-3000:]}")
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    if armed_at is not None:
        _ARMING.append(armed_at - launched)
        if armed_at > t:
            print(f"   (armed {armed_at - t:.2f} s after T: this round is late; the next ones lead by more)", flush=True)
    last = max(decided) - t if len(decided) >= n else cap
    return {"last_s": last, "cpu_s": cpu1 - cpu0, "decided": len(decided)}, sampled


def one(code: str, backend: str, case: str, pg: str | None, cap: float, split: bool = False) -> tuple[dict[str, float], Split | None]:
    n = AGENTS * LANES
    with tempfile.TemporaryDirectory(prefix="fg-burst-") as tmp:
        schema = None
        url = os.path.join(tmp, "burst.db")
        if backend == "postgresql":
            url, schema = pg_schema(pg, "fgburst")  # type: ignore[arg-type]
        try:
            # Seeding and arming must end before T: at least --lead, more when a start took longer.
            # Under a minute: the automations fire every minute, and a late arm waits for the next.
            lead = min(55.0, max([LEAD, *(1.5 * a + 1.5 for a in _ARMING)]))
            t = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=lead)
            seed(url, t, case == "floor")
            env = dict(os.environ, FLOORGATE_OWNER_TOKEN="", HOME=tmp)
            if code == "floorgate":
                argv = [sys.executable, "-m", "floorgate", "run", "--db", url, "--state-dir", f"{tmp}/state", "--log-level", "debug"]
            else:
                dialect = "postgresql" if backend == "postgresql" else "sqlite"
                spec = {
                    "url": url,
                    "t_us": int(t.timestamp() * 1e6),
                    "floor_us": 3600 * 10**6 if case == "floor" else 0,
                    "jobs": _ids(),
                    **_statements(dialect),
                }
                argv = [sys.executable, "-c", BASELINE, json.dumps(spec)]
            return watch(argv, t.timestamp(), n, cap, env, split)
        finally:
            if schema is not None:
                drop_schema(pg, schema)  # type: ignore[arg-type]


def main() -> None:
    global AGENTS, LEAD  # the size and lead every helper reads, set once from the arguments
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", help="also on this PostgreSQL database")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="floor,all")
    parser.add_argument("--agents", type=int, default=AGENTS, help="agents, ten lanes each (default 100: 1,000 automations)")
    parser.add_argument("--lead", type=float, default=LEAD, help="seconds from seeding to the burst (the start must arm inside it)")
    parser.add_argument("--no-split", action="store_true", help="no extra round sampled with py-spy (the split rows)")
    parser.add_argument("--cap", type=float, default=60.0, help="stop waiting for decisions this many seconds after T")
    args = parser.parse_args()
    AGENTS, LEAD = args.agents, args.lead
    backends = ["sqlite"] + (["postgresql"] if args.pg else [])
    cases = args.cases.split(",")
    results: dict[tuple[str, str, str], list[dict[str, float]]] = {}
    splits: dict[tuple[str, str, str], Split] = {}
    sampled_rounds: dict[tuple[str, str, str], dict[str, float]] = {}
    # One more round, sampled on both sides alike, when py-spy is here: the sampler's own CPU and
    # its pauses never enter the timed rounds' ratios.
    extra = 0 if args.no_split or py_spy() is None else 1
    for r in range(args.rounds + extra):
        sample = r == args.rounds
        order = ["baseline", "floorgate"] if r % 2 == 0 else ["floorgate", "baseline"]
        for backend in backends:
            for case in cases:
                for code in order:
                    out, sampled = one(code, backend, case, args.pg, args.cap, sample)
                    if not sample:
                        results.setdefault((backend, case, code), []).append(out)
                    elif sampled is not None:
                        splits[(backend, case, code)], sampled_rounds[(backend, case, code)] = sampled, out
                    label = "sampled" if sample else f"round {r + 1}"
                    print(f"  {label} [{backend}] {case:5} {code:9} {json.dumps(out)}", flush=True)
    n = AGENTS * LANES
    labels = {"floor": f"{AGENTS:,} admitted, {n - AGENTS:,} denied by the agent floor", "all": f"all {n:,} admitted"}
    for backend in backends:
        for case in cases:
            fg, base = results[(backend, case, "floorgate")], results[(backend, case, "baseline")]
            ratio = [f["last_s"] / b["last_s"] for f, b in zip(fg, base, strict=True)]
            cpu = [f["cpu_s"] / b["cpu_s"] for f, b in zip(fg, base, strict=True) if b["cpu_s"] > 0]
            size = f"{n:,} due at once over {AGENTS:,} agents x {LANES} lanes" + ("" if AGENTS == 100 else " (1,000: bench/all.py --big)")
            name = f"real `floorgate run`, {size}, {labels[case]}: last decision"
            print(
                f"[{backend}] {labels[case]}: last decision floorgate {spread([f['last_s'] for f in fg], ' s')}, "
                f"baseline {spread([b['last_s'] for b in base], ' s')}; ratio {spread(ratio)}; CPU ratio {spread(cpu) if cpu else 'n/a'}"
            )
            record(
                f"{name} vs bare APScheduler 3 (same statements)",
                f"{spread(ratio)}; {statistics.median(f['last_s'] for f in fg):.2f} s vs {statistics.median(b['last_s'] for b in base):.2f} s"
                + (f"; CPU {spread(cpu)}" if cpu else ""),
                "<= 2x",
                statistics.median(ratio) <= 2,
                backend=backend,
            )
            fs, bs = splits.get((backend, case, "floorgate")), splits.get((backend, case, "baseline"))
            if fs is None or bs is None:
                continue
            f1, b1 = sampled_rounds[(backend, case, "floorgate")], sampled_rounds[(backend, case, "baseline")]
            for what, figure in (
                (
                    "CPU per decision by part (py-spy's GIL samples; the process's CPU in their proportions)",
                    f"floorgate {cpu_parts(fs, f1['cpu_s'], n)}; baseline {cpu_parts(bs, b1['cpu_s'], n)}",
                ),
                (
                    "wall time computing vs waiting (process CPU, GIL samples, the busiest thread's CPU and sampled state)",
                    f"floorgate {wall_parts(fs, f1['last_s'], f1['cpu_s'])}; baseline {wall_parts(bs, b1['last_s'], b1['cpu_s'])}",
                ),
            ):
                print(f"[{backend}] {labels[case]}: bound under the burst: {what}: {figure}")
                record(
                    f"bound under the burst, {labels[case]}: {what}, a sampled round beside the timed ones",
                    figure,
                    "-",
                    None,
                    backend=backend,
                )


if __name__ == "__main__":
    main()
