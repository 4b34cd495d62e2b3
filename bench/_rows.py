"""The rows of the one-run table: each benchmark records its figures here as it prints them.

``bench/all.py`` runs every benchmark with ``FLOORGATE_BENCH_ROWS`` naming a JSON-lines file and
prints what they recorded as one table; run on its own, a benchmark records nothing.
"""

from __future__ import annotations

import json
import os
import statistics

ENV = "FLOORGATE_BENCH_ROWS"


def spread(values: list[float], unit: str = "x", digits: int = 2) -> str:
    """``median (min..max)`` of ``values``, the form every row's figure takes."""
    med, lo, hi = statistics.median(values), min(values), max(values)
    return f"{med:.{digits}f}{unit} ({lo:.{digits}f}..{hi:.{digits}f})"


def record(measure: str, now: str, goal: str, met: bool | None, *, backend: str = "") -> None:
    """One row: what is measured, the figure (ratio with its spread), the goal, whether it is met
    (``None``: the row has no goal of its own, e.g. a curve's point)."""
    path = os.environ.get(ENV)
    if not path:
        return
    row = {"measure": measure, "backend": backend, "now": now, "goal": goal, "met": met}
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")
