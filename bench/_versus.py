"""This tree's admission against another checkout's, interleaved (``bench/admission.py --baseline DIR``).

Each code runs in a child process of its own (``python bench/_versus.py CODE URL DIR``) that
imports only that code: a checkout from before the ``floorgate`` namespace is imported as its
top-level ``admission`` package, a later one through a ``floorgate`` folder of links to its three
folders (a checkout has none: the install maps the names). Both children take the same lanes (one
agent with a one-hour floor, on a store of their own: a SQLite file, or a PostgreSQL schema of
their own) through the public API both codes share, and answer each request line ``OP N`` with the
wall and CPU seconds of N operations. The parent sends each round's blocks to both, the order
alternating, and reports the median of the per-round ratios (this tree over the baseline) with
their spread.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)
OPS = ("deny", "cycle", "reserve", "limited-deny", "limited-cycle")


def _import(code: str, tmp: str) -> Any:
    """The ``admission`` package of ``code`` (see the module docstring)."""
    root = Path(code).resolve()
    if (root / "scheduler" / "_root").is_dir():
        linked = Path(tmp) / "code" / "floorgate"
        linked.mkdir(parents=True)
        for name in ("__init__.py", "__main__.py"):
            (linked / name).symlink_to(root / "scheduler" / "_root" / name)
        for package in ("admission", "hosts", "scheduler"):
            (linked / package).symlink_to(root / package)
        sys.path.insert(0, str(linked.parent))
        import floorgate.admission as admission
    else:
        sys.path.insert(0, str(root))
        import admission  # type: ignore[import-not-found, no-redef]
    loaded = Path(admission.__file__).resolve()
    if not loaded.is_relative_to(root):
        raise SystemExit(f"imported {loaded}, not the code under {root}")
    return admission


def _child(code: str, url: str, tmp: str, limited: bool) -> None:
    adm = _import(code, tmp)
    store = adm.open_store(url or os.path.join(tmp, "versus.db"))
    clock = adm.FixedClock(T0)
    adm.Policies(store, clock).configure(adm.Scope.agent("g", "a"), min_interval=HOUR, expected_revision=0, owner_ref="bench")
    admission = adm.Admission(store, clock)
    admitted, deny = _lane_ops(admission, clock, ("g", "a", "x"), "")
    ops = {"deny": deny, "cycle": lambda i: admission.confirm(admitted("c")), "reserve": lambda i: admitted("r")}
    if limited:  # only then: the floor-only rows' stores hold what they always held
        ops |= _limited_ops(adm, store)
    ops["cycle"](0)
    print("ready", flush=True)
    for line in sys.stdin:
        op, n = line.split()
        run = ops[op]
        wall, cpu = time.perf_counter(), time.process_time()
        for i in range(int(n)):
            run(i)
        print(json.dumps([time.perf_counter() - wall, time.process_time() - cpu]), flush=True)
    store.close()


def _lane_ops(admission: Any, clock: Any, lane: tuple[str, str, str], prefix: str) -> tuple[Any, Any]:
    """One lane's admitted reserve (an hour on; returns its turn id) and denial (within the hour),
    each stopping the bench if it is decided otherwise; turn ids start with ``prefix``."""
    goal, agent, automation = lane
    turns = iter(range(10**9))

    def admitted(tag: str) -> str:
        clock.advance(HOUR)
        turn = f"{prefix}{tag}{next(turns)}"
        if not admission.reserve(goal=goal, agent=agent, automation=automation, turn_id=turn, trigger_time=clock.now()).admitted:
            raise SystemExit(f"bench bug: {turn} denied")
        return turn

    def deny(i: int) -> None:
        trigger = clock.now() + timedelta(microseconds=i + 1)
        if admission.reserve(goal=goal, agent=agent, automation=automation, turn_id=f"{prefix}d{i}", trigger_time=trigger).admitted:
            raise SystemExit(f"bench bug: a denial of {agent} was admitted")

    return admitted, deny


def _limited_ops(adm: Any, store: Any) -> dict[str, Any]:
    """``limited-deny`` and ``limited-cycle``: the same on a lane of its own whose agent also has a
    count, a token and a USD budget per day (``bench/admission.py``'s ``LimitedLane``), for a
    baseline that has limits (issue 20); none for one that has not."""
    import importlib
    from decimal import Decimal

    top = adm.__name__.rpartition(".")[0]  # the code's own packages, never this tree's installed ones
    try:
        LimitsChange = importlib.import_module(f"{adm.__name__}.limits").LimitsChange
        Prices = importlib.import_module(f"{adm.__name__}.usage").Prices
        parse_window = importlib.import_module(f"{adm.__name__}.windows").parse_window
    except (ImportError, AttributeError):
        return {}
    Schedule = importlib.import_module(f"{top}.hosts" if top else "hosts").Schedule

    clock = adm.FixedClock(T0)
    spec = adm.AutomationSpec(
        goal_id="g",
        agent_id="b",
        schedule=Schedule.parse("DTSTART:20261201T090000Z RRULE:FREQ=DAILY", now=T0).canonical(),
        host=adm.CommandHost(argv=(sys.executable, "-c", "pass"), timeout_seconds=30.0),
        model="m",
    )
    adm.Automations(store, clock).add("y", spec)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="bench")
    limits = LimitsChange(max_starts=1000, budget_tokens=10**9, budget_usd=Decimal(1000), estimate_tokens=10, per=parse_window("1d"))
    adm.Policies(store, clock).configure(
        adm.Scope.agent("g", "b"), min_interval=HOUR, expected_revision=0, owner_ref="bench", limits=limits
    )
    admission = adm.Admission(store, clock)
    admitted, deny = _lane_ops(admission, clock, ("g", "b", "y"), "l")

    def cycle(_i: int) -> None:
        admission.confirm(admitted("c"))

    cycle(0)  # the lane known limited from here on
    return {"limited-cycle": cycle, "limited-deny": deny}


class Child:
    """One code's child process (see the module docstring)."""

    def __init__(self, code: str, url: str, tmp: str, limited: bool = False) -> None:
        os.makedirs(tmp)
        argv = [sys.executable, __file__, code, url, tmp, *(["limited"] if limited else [])]
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        if self.proc.stdout is None or self.proc.stdin is None:
            raise SystemExit("no pipe to the child")
        self.out, self.inp = self.proc.stdout, self.proc.stdin
        if self.out.readline().strip() != "ready":
            raise SystemExit(f"the child for {code} did not start")

    def block(self, op: str, n: int) -> tuple[float, float]:
        """Wall and CPU seconds of ``n`` operations ``op``."""
        self.inp.write(f"{op} {n}\n")
        self.inp.flush()
        wall, cpu = json.loads(self.out.readline())
        return wall / n, cpu / n

    def close(self) -> None:
        self.inp.close()
        self.proc.wait(timeout=60)


def versus(base: Child, ours: Child, op: str, n: int, rounds: int) -> tuple[list[float], list[float], float, float]:
    """Per-round ratios (ours over the baseline) of wall and CPU time per operation, and the
    median wall microseconds of each (baseline, ours)."""
    base.block(op, max(1, n // 10))  # warm both
    ours.block(op, max(1, n // 10))
    walls, cpus, bw, ow = [], [], [], []
    for i in range(rounds):
        first, second = (base, ours) if i % 2 == 0 else (ours, base)
        a, b = first.block(op, n), second.block(op, n)
        (b_wall, b_cpu), (o_wall, o_cpu) = (a, b) if first is base else (b, a)
        walls.append(o_wall / b_wall)
        cpus.append(o_cpu / b_cpu)
        bw.append(b_wall)
        ow.append(o_wall)
    bw.sort()
    ow.sort()
    return walls, cpus, bw[len(bw) // 2] * 1e6, ow[len(ow) // 2] * 1e6


if __name__ == "__main__":
    _child(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:] == ["limited"])
