"""``floorgate status`` at scale: the readback of every automation, against reading the tables once.

    .venv/bin/python bench/status.py [--sizes 1000,10000] [--pg URL]

For each size, seeds a fresh store (the host benchmark's seed: automations over agents of one goal
with a daily floor, every agent started an hour ago), then in the same run measures:
- the limit: one bulk read of every table the readback uses (automations, rules, starts, turns,
  bindings, missions, hook answers, wake state, ticks), rows fetched and discarded;
- ``Readback.overview()`` (what ``status`` renders), its wall time and the process's peak RSS;
- the same readbacks read automation by automation (the per-automation path),
and prints the ratio, per automation cost, and how it grows from size to size.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from host import seed  # the host benchmark's store: the same automations, agents and starts
from sqlalchemy import select

from admission import _schema as tables
from admission import open_store
from scheduler.app import Floorgate, Settings

TABLES = (
    tables.automations,
    tables.rules,
    tables.starts,
    tables.turns,
    tables.timer_bindings,
    tables.missions,
    tables.hook_answers,
    tables.wake_state,
    tables.ticks,
)


def bulk_read(url: str) -> float:
    with open_store(url) as store:
        start = time.perf_counter()
        with store.read() as conn:
            for table in TABLES:
                conn.execute(select(table)).all()
        return time.perf_counter() - start


def overview(url: str) -> tuple[float, int]:
    with open_store(url) as store:
        app = Floorgate(store, settings=Settings())
        start = time.perf_counter()
        view = app.readback.overview()
        return time.perf_counter() - start, len(view.readbacks)


def one_by_one(url: str) -> float:
    """The same readbacks, each automation read on its own (what ``status`` did before bulk reads)."""
    with open_store(url) as store:
        app = Floorgate(store, settings=Settings())
        ids = [a.automation_id for a in app.automations.list()[0]]
        start = time.perf_counter()
        for aid in ids:
            app.readback.automation(aid)
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--pg", help="also run on this PostgreSQL URL (an empty schema or database)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    previous: tuple[int, float] | None = None
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            url = str(Path(tmp) / "status.db")
            seed(url, size, max(1, size // 10))
            limit = statistics.median(bulk_read(url) for _ in range(3))
            took, count = overview(url)
            single = one_by_one(url)
            if count != size:
                raise SystemExit(f"bench bug: {count} readbacks for {size} automations")
            rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            growth = f", {took / previous[1]:.1f}x the time for {size / previous[0]:.0f}x the automations" if previous else ""
            print(
                f"status, {size} automations (SQLite): {took:.2f} s = {took / limit:.0f}x one bulk read of every table "
                f"({limit * 1000:.0f} ms); {took / size * 1e3:.2f} ms per automation; {took / single:.2f}x reading each "
                f"automation on its own; peak RSS {rss_mb:.0f} MB{growth}"
            )
            previous = (size, took)


if __name__ == "__main__":
    main()
