"""What a console request costs against the CLI: ``GET /api/status`` and ``GET /api/eligibility``
over HTTP to a running ``floorgate serve``, against ``floorgate status --json`` as a subprocess
(what a script without the console runs) and against the in-process service call.

    .venv/bin/python bench/console.py [--automations 50] [--rounds 15]

Seeds a SQLite store (the host benchmark's: automations over agents of one goal with a daily
floor), starts ``floorgate serve`` on a loopback port, and in each round measures every variant
once, in an order rotated from round to round (A/B interleaved in one run). Prints, per request,
the median of each variant and the medians of the per-round ratios with their spread (min..max).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _serve import serving
from host import seed

from floorgate.admission import open_store
from floorgate.scheduler.app.root import Floorgate, Settings
from floorgate.scheduler.console.api import _eligibility, _status


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}x (spread {min(values):.2f}..{max(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--automations", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = str(Path(tmp) / "console.db")
        seed(url, args.automations, max(1, args.automations // 10))
        with open_store(url) as store:
            fg = Floorgate(store, settings=Settings(db=url))
            _, token = fg.principals.add("bench", "viewer")
            with serving(url, token, timeout=60, start_within=30, poll=0.1) as served:

                def http_get(path: str) -> dict:  # type: ignore[type-arg]
                    return json.loads(served.get(path))  # type: ignore[no-any-return]

                def cli_status() -> None:
                    subprocess.run([sys.executable, "-m", "floorgate", "--db", url, "status", "--json"], check=True, capture_output=True)

                class Req:
                    def __init__(self, params: dict[str, str]) -> None:
                        self.query_params = params

                lane = {"goal": "bench", "agent": "agent-0000"}
                query = "&".join(f"{k}={v}" for k, v in lane.items())
                variants: dict[str, dict[str, Callable[[], object]]] = {
                    "status": {
                        "api": lambda: http_get("/api/status"),
                        "cli": cli_status,
                        "service": lambda: _status(fg, None, Req({}), {}),  # type: ignore[arg-type]
                    },
                    "eligibility": {
                        "api": lambda: http_get(f"/api/eligibility?{query}"),
                        "service": lambda: _eligibility(fg, None, Req(lane), {}),  # type: ignore[arg-type]
                    },
                }
                # The same document each way (a bench measuring different work would be a bench bug).
                over_http, in_process = http_get(f"/api/eligibility?{query}"), _eligibility(fg, None, Req(lane), {})  # type: ignore[arg-type]
                if {**over_http, "evaluated_at": None} != {**in_process, "evaluated_at": None}:
                    raise SystemExit("bench bug: the API and the service disagree")
                for name, ways in variants.items():
                    samples: dict[str, list[float]] = {k: [] for k in ways}
                    order = list(ways)
                    for fn in ways.values():  # warm-up, not measured
                        fn()
                    for r in range(args.rounds):
                        for key in order[r % len(order) :] + order[: r % len(order)]:
                            samples[key].append(timed(ways[key]))
                    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
                    print(
                        f"{name}, {args.automations} automations (SQLite), {args.rounds} rounds: "
                        + ", ".join(f"{k} {v:.1f} ms" for k, v in med.items())
                    )
                    api = samples["api"]
                    print(
                        f"  api / service (HTTP, auth, JSON on top of the call): {spread([a / s for a, s in zip(api, samples['service'], strict=True)])}"
                    )
                    if "cli" in samples:
                        print(f"  cli subprocess / api: {spread([c / a for c, a in zip(samples['cli'], api, strict=True)])}")


if __name__ == "__main__":
    main()
