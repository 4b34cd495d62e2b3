"""What a scrape costs a running ``floorgate serve`` at 10,000 automations: ``/metrics`` (default and
``?lanes=all``) and one ``/api/status`` page (and a ``?state=`` filtered one), against
``/api/whoami`` in the same run.

    .venv/bin/python bench/scrape.py [--automations 10000] [--rounds 3]

Seeds a SQLite store (the host benchmark's automations over agents, a daily floor), starts
``floorgate serve`` and, in rounds with the order rotated, requests each path once over a kept-alive
connection; the figure is the server process's CPU seconds for the request (its /proc counters
before and after: the machine is shared, its wall clock is noise) and the body's size.
Goals: ``/metrics`` and an ``/api/status`` page each <= 1 CPU-s; ``/metrics`` <= 200 KB.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _rows import record, spread
from _serve import serving
from host import seed

from floorgate.admission import open_store
from floorgate.scheduler.app.root import Floorgate, Settings

PATHS = {
    "whoami": "/api/whoami",
    "metrics": "/metrics",
    "metrics ?lanes=all": "/metrics?lanes=all",
    "status page": "/api/status",
    "status ?state=paused": "/api/status?state=paused",
}


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--automations", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip", default="", help="comma-separated names of PATHS not to request (e.g. 'metrics ?lanes=all')")
    args = parser.parse_args()
    paths = {k: v for k, v in PATHS.items() if k not in args.skip.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "scrape.db")
        seed(url, args.automations, max(1, args.automations // 10))
        with open_store(url) as store:
            _, token = Floorgate(store, settings=Settings(db=url)).principals.add("bench", "viewer")
        cpu: dict[str, list[float]] = {k: [] for k in paths}
        size: dict[str, int] = {}
        with serving(url, token, timeout=300, start_within=60, poll=0.2) as served:
            get = served.get
            get("/metrics")  # the first request of each kind imports what it uses
            get("/api/status?limit=1")
            names = list(paths)
            for r in range(args.rounds):
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    before = _cpu(served.pid)
                    body = get(paths[name])
                    cpu[name].append(_cpu(served.pid) - before)
                    size[name] = len(body)
    n = f"{args.automations:,}"
    for name in paths:
        print(f"{name:22} CPU {spread(cpu[name], ' s')}   {size[name] / 1024:8.1f} KB")
    base = statistics.median(cpu["whoami"])
    for name, goal_kb in (("metrics", 200), ("status page", None)):
        if name not in paths:
            continue
        med = statistics.median(cpu[name])
        kb = size[name] / 1024
        now = f"{spread(cpu[name], ' CPU-s')}, {kb:.0f} KB (whoami {base:.2f} CPU-s)"
        goal = "<= 1 CPU-s" + (f", <= {goal_kb} KB" if goal_kb else "")
        record(
            f"GET {paths[name]} at {n} automations (server CPU)",
            now,
            goal,
            med <= 1 and (goal_kb is None or kb <= goal_kb),
            backend="sqlite",
        )
    if "metrics ?lanes=all" in paths:
        lanes = cpu["metrics ?lanes=all"]
        kb = size["metrics ?lanes=all"] / 1024
        record(
            f"GET /metrics?lanes=all (opt-in, every lane) at {n}", f"{spread(lanes, ' CPU-s')}, {kb:.0f} KB", "-", None, backend="sqlite"
        )


if __name__ == "__main__":
    main()
