"""``floorgate status`` at scale: the curve at 1k/10k(/50k) automations, against reading the tables once.

    .venv/bin/python bench/status.py [--sizes 1000,10000] [--big] [--rounds 3]

For each size, seeds a fresh SQLite store (the host benchmark's seed: automations over agents of
one goal with a daily floor, every agent started an hour ago), then runs interleaved rounds, each
measurement in a fresh process (so its peak RSS is its own):
- the limit: one bulk read of every table the readback uses, rows fetched and discarded;
- ``Readback.overview()``, what ``status`` renders: wall time and the process's peak RSS;
- the same readback of 100 automations read one by one (the per-automation path).
Prints medians with their spread (min..max over rounds), the ratio to the limit per round, the
cost per automation, and the growth from size to size (time ratio over size ratio; 1.0 is linear).
Goal: under 1 s and 150 MB at 10,000, linear 1k/10k/50k. ``--big`` adds 50,000 (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # before bench/: bench/admission.py is not the package

SAMPLE = 100  # automations read one by one


def _child(kind: str, url: str) -> dict[str, float]:
    """One measurement in this (fresh) process."""
    from sqlalchemy import select

    from floorgate.admission import _schema as tables
    from floorgate.admission import open_store
    from floorgate.scheduler.app.root import Floorgate, Settings

    with open_store(url) as store:
        app = Floorgate(store, settings=Settings())
        start = time.perf_counter()
        count = 0
        if kind == "bulk":
            with store.read() as conn:
                for table in (tables.automations, tables.rules, tables.starts, tables.turns, tables.timer_bindings):
                    count += len(conn.execute(select(table)).all())
                for table in (tables.missions, tables.hook_answers, tables.wake_state, tables.ticks):
                    count += len(conn.execute(select(table)).all())
        elif kind == "status":
            count = len(app.readback.overview().readbacks)
        elif kind == "single":
            ids = [f"auto-{i:05d}" for i in range(0, SAMPLE * 7, 7)]
            start = time.perf_counter()
            for aid in ids:
                app.readback.automation(aid)
            count = len(ids)
        elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "count": count}


def measure(kind: str, url: str) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", kind, url], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def spread(values: list[float], unit: str = "", scale: float = 1.0, digits: int = 2) -> str:
    m, lo, hi = (f"{v * scale:.{digits}f}" for v in (statistics.median(values), min(values), max(values)))
    return f"{m}{unit} ({lo}..{hi})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--big", action="store_true", help="add 50,000 automations")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(*args.child)))
        return
    sys.path.append(str(Path(__file__).resolve().parent))
    from _rows import record
    from host import seed  # the host benchmark's store: the same automations, agents and starts

    sizes = [int(x) for x in args.sizes.split(",")] + ([50_000] if args.big else [])
    previous: tuple[int, float] | None = None
    with tempfile.TemporaryDirectory() as tmp:
        idle = measure("none", str(Path(tmp) / "empty.db"))["rss_mb"]
    print(f"status (Readback.overview) on SQLite; a process that only opens the store peaks at {idle:.0f} MB")
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            url = str(Path(tmp) / "status.db")
            seed(url, size, max(1, size // 10))
            limits, times, rss, ratios, singles = [], [], [], [], []
            for _ in range(args.rounds):  # interleaved: limit, status, one by one
                limit = measure("bulk", url)["seconds"]
                status = measure("status", url)
                if status["count"] != size:
                    raise SystemExit(f"bench bug: {status['count']} readbacks for {size} automations")
                single = measure("single", url)["seconds"] / SAMPLE
                limits.append(limit)
                times.append(status["seconds"])
                rss.append(status["rss_mb"])
                ratios.append(status["seconds"] / limit)
                singles.append(single / (status["seconds"] / size))
        took = statistics.median(times)
        growth = (
            f"; growth {took / previous[1] / (size / previous[0]):.2f} (time x{took / previous[1]:.1f} for size x{size / previous[0]:.0f})"
            if previous
            else ""
        )
        print(
            f"  {size:6d} automations: {spread(times, ' s')}, peak RSS {spread(rss, ' MB', digits=0)}, "
            f"{took / size * 1e6:.0f} us per automation; {spread(ratios, 'x', digits=1)} one bulk read of every table "
            f"({statistics.median(limits) * 1e3:.0f} ms); one automation's own readback costs {spread(singles, 'x', digits=0)} its "
            f"share of the bulk one{growth}"
        )
        goal = "met" if took < 1 and statistics.median(rss) < 150 else "NOT met"
        record(
            f"floorgate status, {size:,} automations",
            f"{spread(times, ' s')}, peak RSS {spread(rss, ' MB', digits=0)}{growth}",
            "< 1 s and < 150 MB at 10,000; < 150 MB at 50,000; linear",
            (took < 1 and statistics.median(rss) < 150) if size == 10_000 else (statistics.median(rss) < 150 if size >= 50_000 else None),
            backend="sqlite",
        )
        if size == 10_000:
            print(f"         goal at 10,000 (< 1 s, < 150 MB): {goal}")
        previous = (size, took)


if __name__ == "__main__":
    main()
