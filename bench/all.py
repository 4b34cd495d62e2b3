"""Every figure of issues 12 and 22 in one run: each benchmark in turn, then one table of what they found.

    .venv/bin/python bench/all.py [--pg postgresql://postgres@127.0.0.1/test] [--full] [--big] [--quick] [--markdown]

One after another, on this machine, in this run:
- the counts: round trips and commits per admission, denial, confirm, tick, managed turn and sync,
  from the tests that assert them (their JUnit report carries each count; a failed test is a row
  that says so);
- ``bench/admission.py``; ``bench/ticks.py`` (a tick through APScheduler's loop); ``bench/burst.py``
  (a real ``floorgate run`` deciding ticks due at once, 10 lanes per agent, against a standalone
  APScheduler 3: 200 lanes by default, 1,000 with ``--big`` or ``--full``);
  ``bench/host.py`` and ``bench/status.py`` (10k automations; ``--full`` adds 1k, ``--big`` 50k);
  ``bench/host_start.py`` (``floorgate run``'s whole-process start against APScheduler 4's);
  ``bench/scrape.py`` (``/metrics`` and ``/api/status`` at 10k); ``bench/rrule.py``;
  ``bench/start.py`` (the hook's answer, the read commands' start and ``status`` as processes).
Each prints its own details as it goes (baselines, per-operation times); every figure it reports
is also recorded as a row (``bench/_rows.py``), and the table at the end lists them all: the
median of interleaved per-round ratios or times with their spread (min..max), the goal, met or not,
each row labelled with its backend. The machine is shared: where wall time is noise a row gives
CPU seconds or CPU ratios. ``--pg`` (default ``$FLOORGATE_TEST_PG_URL``) adds PostgreSQL to the
counts, admission, ticks and the burst. The default run is a few rounds each (about 5 minutes on
two cores); ``--full`` runs the longer series; ``--quick`` a smoke run; ``--markdown`` prints the
table as Markdown too (README's Benchmarks). Exit code 1 when a benchmark could not run; missed
goals are figures, not failures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COUNT_TESTS = [
    "tests/test_round_trips.py::test_round_trips_and_commits_per_decision",
    "tests/test_round_trips.py::test_round_trips_and_commits_of_a_managed_reservation",
    "tests/test_tick_path.py::test_a_denied_tick_costs_one_read_beside_its_denial",
    "tests/test_units_of_work.py::test_a_managed_turn_begins_in_one_commit_and_settles_in_one",
    "tests/test_sync.py::test_a_sync_reads_what_changed_not_every_automation",
]


def _benchmarks(args: argparse.Namespace) -> list[tuple[str, list[str]]]:
    """(name, argv) of each benchmark; one line per benchmark, so a new row is one more line."""
    pg = ["--pg", args.pg] if args.pg else []
    if args.quick:
        return [
            ("admission", ["bench/admission.py", "--rounds", "3", "--n", "20", *pg]),
            ("ticks", ["bench/ticks.py", "--rounds", "1", "--samples", "100", *pg]),
            ("burst", ["bench/burst.py", "--rounds", "1", "--cases", "floor"]),
            ("host", ["bench/host.py", "--sizes", "1000", "--rounds", "1", "--samples", "100"]),
            ("host start", ["bench/host_start.py", "--size", "1000", "--rounds", "1"]),
            ("status", ["bench/status.py", "--sizes", "1000", "--rounds", "1"]),
            ("scrape", ["bench/scrape.py", "--automations", "1000", "--rounds", "1"]),
            ("rrule", ["bench/rrule.py", "--rounds", "1"]),
            ("start", ["bench/start.py", "--quick", *pg]),
        ]
    if args.full:
        sizes = ["--sizes", "1000,10000"] + (["--big"] if args.big else [])
        return [
            ("admission", ["bench/admission.py", *pg]),
            ("ticks", ["bench/ticks.py", "--rounds", "3", *pg]),
            ("burst", ["bench/burst.py", "--rounds", "3", *pg]),
            ("host", ["bench/host.py", *sizes]),
            ("host start", ["bench/host_start.py", "--rounds", "5"]),
            ("status", ["bench/status.py", *sizes]),
            ("scrape", ["bench/scrape.py", "--rounds", "5"]),
            ("rrule", ["bench/rrule.py"]),
            ("start", ["bench/start.py", *pg]),
        ]
    sizes = ["--sizes", "10000" + (",50000" if args.big else "")]
    burst = [] if args.big else ["--agents", "20", "--lead", "4"]
    return [
        ("admission", ["bench/admission.py", "--rounds", "5", *pg]),
        ("ticks", ["bench/ticks.py", "--rounds", "3", "--samples", "70", *pg]),
        # Two interleaved rounds of a 200-lane burst (--full: three): a third cost about 40 s of the
        # default's 5 minutes; the row prints its spread, so a round that disagrees shows. The
        # sampled round (the split rows) comes with --big, where the burst's goal is (1,000 lanes):
        # it took the default run to 5.4 minutes.
        ("burst", ["bench/burst.py", "--rounds", "2", *burst, *pg, *([] if args.big else ["--no-split"])]),
        ("host", ["bench/host.py", *sizes, "--rounds", "2", "--samples", "100"]),
        ("host start", ["bench/host_start.py", "--rounds", "2"]),
        ("status", ["bench/status.py", *sizes, "--rounds", "2"]),
        ("scrape", ["bench/scrape.py", "--rounds", "3", "--skip", "metrics ?lanes=all"]),
        ("rrule", ["bench/rrule.py", "--rounds", "2"]),
        ("start", ["bench/start.py", "--quick", *pg, *(["--sizes", "10000,50000"] if args.big else [])]),
    ]


def _counts(pg: str | None, rows_path: Path, tmp: Path) -> bool:
    """Run the counting tests; their rows go to ``rows_path``. True when every one passed."""
    report = tmp / "counts.xml"
    env = dict(os.environ, FLOORGATE_TEST_USER_TAG=os.environ.get("FLOORGATE_TEST_USER_TAG", "bench"))
    if pg:
        env["FLOORGATE_TEST_PG_URL"] = pg
    else:
        env.pop("FLOORGATE_TEST_PG_URL", None)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={report}",
        *COUNT_TESTS,
    ]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr.strip()[-400:])
    if not report.exists():
        return False
    with rows_path.open("a", encoding="utf-8") as out:
        for case in ET.parse(report).getroot().iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"
            failed = case.find("failure") is not None or case.find("error") is not None
            for prop in case.iter("property"):
                if prop.get("name") == "bench_row":
                    out.write(json.dumps(json.loads(prop.get("value", "{}"))) + "\n")
            if failed:
                row = {"measure": f"count test FAILED: {name}", "backend": "", "now": "-", "goal": "passes", "met": False}
                out.write(json.dumps(row) + "\n")
    return done.returncode == 0


def _labelled(row: dict[str, object]) -> dict[str, object]:
    """``row`` with its backend named: a count test's row names it in its measure, '(sqlite)'."""
    if not row["backend"]:
        measure = str(row["measure"])
        row["backend"] = next((b for b in ("sqlite", "postgresql") if measure.endswith(f"({b})")), "none")
    return row


def _markdown(rows: list[dict[str, object]], seconds: float) -> None:
    print(
        f"\nOne `bench/all.py` run ({seconds / 60:.0f} min) on a 2-core machine shared with other work: figures are medians"
        " of interleaved rounds with their spread (min..max); where wall time is noise the row gives CPU seconds or CPU ratios."
    )
    print("\n| measure | backend | now: median (min..max) | goal | met? |\n|---|---|---|---|---|")
    for r in rows:
        met = {True: "yes", False: "**no**", None: "-"}[r["met"]]  # type: ignore[index]
        print(f"| {r['measure']} | {r['backend'] or '-'} | {r['now']} | {r['goal']} | {met} |")


def _table(rows: list[dict[str, object]]) -> None:
    width = min(100, max(len(str(r["measure"])) + len(str(r["backend"])) + 3 for r in rows))
    print(f"\n{'measure':<{width}}  {'now: median (min..max)':<44} {'goal':<40} met?")
    for r in rows:
        label = str(r["measure"]) + (f" [{r['backend']}]" if r["backend"] else "")
        met = {True: "yes", False: "NO", None: "-"}[r["met"]]  # type: ignore[index]
        print(f"{label:<{width}}  {r['now']!s:<44} {r['goal']!s:<40} {met}")
    judged = [r for r in rows if r["met"] is not None]
    print(f"\n{sum(1 for r in judged if r['met'])} of {len(judged)} goals met; {len(rows)} rows")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg", default=os.environ.get("FLOORGATE_TEST_PG_URL"), help="PostgreSQL URL (skipped when absent)")
    parser.add_argument(
        "--big", action="store_true", help="add 50,000 automations to host and status; the burst at 1,000 lanes (default: 200)"
    )
    parser.add_argument("--full", action="store_true", help="more rounds, 1k and 10k (longer than the default's 5 minutes)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds: a smoke run of the whole table")
    parser.add_argument("--markdown", action="store_true", help="also print the table as Markdown (README's Benchmarks)")
    args = parser.parse_args()
    broken: list[str] = []
    began = time.monotonic()
    with tempfile.TemporaryDirectory(dir=ROOT) as tmp_dir:
        tmp = Path(tmp_dir)
        rows_path = tmp / "rows.jsonl"
        rows_path.touch()
        print("== counts (tests/: round trips and commits, asserted)", flush=True)
        if not _counts(args.pg, rows_path, tmp):
            broken.append("counts")
        for name, cmd in _benchmarks(args):
            print(f"\n== {' '.join(cmd)}", flush=True)
            started = time.monotonic()
            done = subprocess.run([sys.executable, *cmd], cwd=ROOT, env=dict(os.environ, FLOORGATE_BENCH_ROWS=str(rows_path)))
            print(f"   ({time.monotonic() - started:.0f} s)", flush=True)
            if done.returncode != 0:
                broken.append(name)
        rows = [_labelled(json.loads(line)) for line in rows_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    took = time.monotonic() - began
    mode = "--quick" if args.quick else "--full" if args.full else "default" + (" --big" if args.big else "")
    default = not (args.quick or args.full or args.big)
    rows.append(
        {
            "measure": f"bench/all.py ({mode}), this run, whole wall time (one run: no spread)",
            "backend": "sqlite+postgresql" if args.pg else "sqlite",
            "now": f"{took / 60:.1f} min",
            "goal": "<= 5 min (default)",
            "met": took <= 300 if default else None,
        }
    )
    _table(rows)
    if args.markdown:
        _markdown(rows, time.monotonic() - began)
    print(f"whole run {time.monotonic() - began:.0f} s" + (f"; could not run: {', '.join(broken)}" if broken else ""))
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
