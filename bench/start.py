"""Start-up cost: a hook's answer and a read command's start, against a bare interpreter, as processes.

    .venv/bin/python bench/start.py [--rounds 7] [--pg URL] [--sizes 10000,50000] [--pairs 4] [--quick]

Every figure is a whole process of the installed ``floorgate`` command, its CPU time (user + system,
from ``wait4``: wall time on this shared machine is noise) against a baseline run in the same round,
rounds interleaved; each row is the median of the per-round ratios with their spread (min..max):
- ``floorgate hook user-prompt-submit`` answering a denial (a floor and a start a moment ago) and an
  admission (a fresh agent each round: reserve and confirm), on SQLite and on PostgreSQL (``--pg``),
  against ``python -c pass``; goal 3x: served by a ``floorgate hook serve`` process of this run (the
  hook process's CPU; the server's own CPU per answer is a row beside it) and in-process (no server);
- ``floorgate --version`` and ``floorgate status`` on an empty store, against ``python -c pass``;
  goal 4x;
- ``floorgate status`` on stores of ``--sizes`` automations (the host benchmark's seed): CPU and peak
  RSS against ``floorgate --version``, and the growth of CPU per automation from size to size (1.0
  is linear); goal RSS at most 150 MB at 50,000;
- ``claude -p`` (the real CLI from ``~/.cache/floorgate-agents``, offline against the tests' stand-in
  provider) in a project with floorgate's hooks installed, served and in-process, against the same
  prompt in one without, interleaved: wall time (what the user waits; CPU beside it); goal 1.15x.
  Skipped when the CLI is not installed.
Beside them, rows without goals that measure what bounds the missed ones (``bound under ...``):
the imports a hook's admission needs; for ``status``, the modules it loads imported alone (read
from ``-X importtime``), SQLAlchemy and pydantic alone, and a bare ``sqlite3`` read of the same
store; for ``claude -p``, the same project with every hook a shell no-op, and the hook calls per
prompt times a served answer's CPU against the plain prompt's CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # before bench/: bench/admission.py is not the package
sys.path.append(str(ROOT / "bench"))

from _imports import import_code, imported_by  # noqa: E402
from _rows import record, spread  # noqa: E402

FLOORGATE = str(Path(sys.executable).parent / "floorgate")  # the console script hooks run
BARE = [sys.executable, "-c", "pass"]
AGENTS = Path(os.environ.get("FLOORGATE_AGENT_CACHE") or Path.home() / ".cache" / "floorgate-agents")
PAYLOAD = b'{"session_id": "bench", "hook_event_name": "UserPromptSubmit", "prompt": "triage the inbox"}'


# Measures one process from a small runner of its own: a child's peak RSS counts the memory of the
# process it was forked from, and this benchmark's own process holds a seeded store's worth.
_RUNNER = """
import json, os, subprocess, sys, time
argv, stdin, cwd, env = json.loads(sys.stdin.readline())
began = time.perf_counter()
proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env)
proc.stdin.write(stdin.encode("latin-1"))
proc.stdin.close()
err = proc.stderr.read()
_, status, usage = os.wait4(proc.pid, 0)
wall = time.perf_counter() - began
print(json.dumps([os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime, usage.ru_maxrss, wall, err.decode("utf-8", "replace")]))
"""


class Ran:
    """One finished process: its exit code, CPU seconds (itself and what it waited for), peak RSS
    and wall time, measured by a runner process of its own (see ``_RUNNER``)."""

    def __init__(self, argv: list[str], stdin: bytes = b"", env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        request = json.dumps([argv, stdin.decode("latin-1"), str(cwd) if cwd else None, env]) + "\n"
        out = subprocess.run([sys.executable, "-S", "-c", _RUNNER], input=request, capture_output=True, text=True, check=True)
        self.code, self.cpu, rss_kb, self.wall, self.stderr = json.loads(out.stdout)
        self.rss_mb = rss_kb / 1024


def _expect(ran: Ran, code: int, what: str) -> Ran:
    if ran.code != code:
        raise SystemExit(f"bench bug: {what} exited {ran.code}, expected {code}: {ran.stderr.strip()[-300:]}")
    return ran


def _hook_argv(db: str, agent: str) -> list[str]:
    return [
        FLOORGATE,
        "hook",
        "user-prompt-submit",
        "--db",
        db,
        "--goal",
        "bench",
        "--agent",
        agent,
        "--automation",
        "x",
        "--wake",
        "automatic",
    ]


def _prepare_hook_store(db: str) -> None:
    """A goal floor of a day; agent 'denied' started a moment ago (its prompts are blocked)."""
    from floorgate.admission import Admission, Policies, Scope, open_store

    with open_store(db) as store:
        Policies(store).configure(Scope.goal("bench"), min_interval=timedelta(days=1), expected_revision=0, owner_ref="bench")
        now = datetime.now(UTC)
        Admission(store).reserve(goal="bench", agent="denied", automation="x", turn_id="seed", trigger_time=now)
        Admission(store).confirm("seed")


def _ratio_row(name: str, ratios: list[float], cpus: list[float], goal: float, backend: str = "") -> None:
    now = f"{spread(ratios)} of python -c pass; {spread(cpus, ' CPU-s', 3)}"
    print(f"  {name}{f' [{backend}]' if backend else ''}: {now}")
    record(name, now, f"<= {goal:g}x python -c pass (CPU)", statistics.median(ratios) <= goal, backend=backend)


class HookServer:
    """A real ``floorgate hook serve`` process for the run, and the CPU it spends (from /proc)."""

    def __init__(self, tmp: Path) -> None:
        self.env = {**os.environ, "FLOORGATE_RUNTIME_DIR": str(tmp / "rt")}
        self.proc = subprocess.Popen([FLOORGATE, "hook", "serve"], env=self.env, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        said = self.proc.stderr.readline()
        if "serving hooks" not in said:
            raise SystemExit(f"bench bug: the hook server did not start: {said.strip()}")

    def cpu(self) -> float:
        """CPU seconds the server has used so far (user + system)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def starts(rounds: int, pg: str | None, tmp: Path) -> float:
    """The hook's answers (served by a ``floorgate hook serve`` process, and in-process) and the
    read commands' starts, each round against ``python -c pass``."""
    from floorgate.admission import open_store
    from floorgate.scheduler.runtime import hook_wire

    stores = {"sqlite": str(tmp / "hook.db")} | ({"postgresql": pg} if pg else {})
    for url in stores.values():
        if url.startswith("postgres"):
            _reset_pg(url)
        _prepare_hook_store(url)
    empty = str(tmp / "empty.db")
    open_store(empty).close()
    cases: dict[str, tuple[Callable[[int], list[str]], bytes, int]] = {
        "floorgate --version|none": (lambda _i: [FLOORGATE, "--version"], b"", 0),
        "floorgate status, empty store|sqlite": (lambda _i: [FLOORGATE, "--db", empty, "status"], b"", 0),
    }
    served_env = {**os.environ, "FLOORGATE_RUNTIME_DIR": str(tmp / "rt")}
    local_env = {**os.environ, "FLOORGATE_RUNTIME_DIR": str(tmp / "no-server")}  # no server there: in-process
    envs: dict[str, dict[str, str] | None] = {}
    for backend, url in stores.items():
        for how, env in (("served", served_env), ("in-process", local_env)):
            cases[f"hook answer {how}, denied|{backend}"] = (lambda _i, u=url: _hook_argv(u, "denied"), PAYLOAD, 2)  # type: ignore[misc]
            cases[f"hook answer {how}, admitted|{backend}"] = (lambda i, u=url, h=how: _hook_argv(u, f"{h}-{i}"), PAYLOAD, 0)  # type: ignore[misc]
            envs[f"hook answer {how}, denied|{backend}"] = envs[f"hook answer {how}, admitted|{backend}"] = env
    server = HookServer(tmp)
    why = hook_wire.probe(served_env)
    if why is not None:
        raise SystemExit(f"bench bug: hooks are not served: {why}")
    ratios: dict[str, list[float]] = {k: [] for k in cases}
    cpus: dict[str, list[float]] = {k: [] for k in cases}
    server_cpu: list[float] = []
    bare: list[float] = []
    try:
        for i in range(rounds):
            base = _expect(Ran(BARE), 0, "python -c pass").cpu
            bare.append(base)
            names = list(cases)
            for name in names[i % len(names) :] + names[: i % len(names)]:  # a different order each round
                argv, stdin, code = cases[name]
                before = server.cpu()
                ran = _expect(Ran(argv(i), stdin, env=envs.get(name)), code, name)
                if "served" in name:
                    server_cpu.append(server.cpu() - before)
                ratios[name].append(ran.cpu / base)
                cpus[name].append(ran.cpu)
    finally:
        server.close()
    print(f"python -c pass: {spread(bare, ' CPU-s', 3)} over {rounds} rounds")
    _bounds(rounds, empty)
    for name in cases:
        label, _, backend = name.partition("|")
        _ratio_row(label, ratios[name], cpus[name], 3.0 if label.startswith("hook") else 4.0, backend)
    # The server's own share of a served answer (clock-tick resolution: 10 ms), beside the hook's.
    now = f"{spread(server_cpu, ' CPU-s', 3)} per served answer ({len(server_cpu)} answers, 10 ms ticks)"
    print(f"  hook server's CPU per answer: {now}")
    record("hook server's CPU per served answer (not in the hook's figure)", now, "-", None, backend="+".join(stores))
    return statistics.median(cpus["hook answer served, admitted|sqlite"]) + statistics.median(server_cpu)


# What an answer derived from the admission rule as it is written cannot go below: the libraries
# its modules import, and those modules themselves (what a hook's admission loads, nothing else).
BOUNDS = {
    "import pydantic (the rule's values are pydantic models)": "import pydantic; from pydantic import BaseModel",
    "import sqlalchemy (the store and every repository)": "import sqlalchemy",
    "import the admission modules a hook's admission uses": "import floorgate.admission.gate, floorgate.admission.journal, "
    "floorgate.admission.liveness, floorgate.admission.automations, floorgate.admission.store",
}
# What bounds `status` on an empty store: the least process that can answer it at all (the store's
# file read with bare sqlite3), SQLAlchemy's import (every repository is written on it) and the
# modules `floorgate status` loads, imported alone (its imports without its work).
STATUS_BOUNDS = {
    "open the empty store and count its automations with bare sqlite3 (the least that answers)": (
        "import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute('SELECT count(*) FROM fg_automations').fetchone()"
    ),
    "import sqlalchemy (every repository is written on it)": "import sqlalchemy",
    "import sqlalchemy and pydantic (the libraries its modules are written on)": "import sqlalchemy, pydantic; from pydantic import BaseModel",
}


def _bounds(rounds: int, empty: str) -> None:
    """The floors under the hook's answer and under `status`'s start, each against ``python -c pass``
    in the same round."""
    status_imports = imported_by([FLOORGATE, "--db", empty, "status"])
    cases = {f"bound under the hook: {k}": v for k, v in BOUNDS.items()} | {f"bound under status: {k}": v for k, v in STATUS_BOUNDS.items()}
    cases["bound under status: import the modules `floorgate status` loads, nothing run"] = import_code(status_imports)
    ratios: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(rounds):
        base = _expect(Ran(BARE), 0, "python -c pass").cpu
        for name, code in cases.items():
            ratios[name].append(_expect(Ran([sys.executable, "-c", code, empty]), 0, name).cpu / base)
    print(f"  `floorgate status` imports (top of the tree): {', '.join(status_imports)}")
    for name, values in ratios.items():
        now = f"{spread(values)} of python -c pass"
        print(f"  {name}: {now}")
        record(name, now, "-", None, backend="sqlite" if "status" in name else "none")


def _reset_pg(url: str) -> None:
    """A schema of its own for this run on the PostgreSQL server (dropped first)."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://").split("?")[0], autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS bench_start CASCADE")
        conn.execute("CREATE SCHEMA bench_start")


def status_curve(sizes: list[int], rounds: int, tmp: Path) -> None:
    """``floorgate status`` as a whole process at each size: CPU and RSS against ``--version``."""
    from host import seed  # the host benchmark's store: automations over agents of one goal

    previous: tuple[int, float] | None = None
    for size in sizes:
        db = str(tmp / f"status-{size}.db")
        seed(db, size, max(1, size // 10))
        cpu, rss, cpu_ratio, rss_ratio = [], [], [], []
        for _ in range(rounds):
            version = _expect(Ran([FLOORGATE, "--version"]), 0, "--version")
            status = _expect(Ran([FLOORGATE, "--db", db, "status"]), 0, "status")
            cpu.append(status.cpu)
            rss.append(status.rss_mb)
            cpu_ratio.append(status.cpu / version.cpu)
            rss_ratio.append(status.rss_mb / version.rss_mb)
        took = statistics.median(cpu)
        growth = f"; CPU growth {took / previous[1] / (size / previous[0]):.2f} from {previous[0]:,} (1.0 linear)" if previous else ""
        now = (
            f"{spread(cpu, ' CPU-s')} ({spread(cpu_ratio, 'x', 0)} --version), peak RSS {spread(rss, ' MB', 0)} "
            f"({spread(rss_ratio, 'x', 1)} --version){growth}"
        )
        print(f"  floorgate status, {size:,} automations (process): {now}")
        met = statistics.median(rss) <= 150 if size >= 50_000 else None
        record(f"floorgate status as a process, {size:,} automations", now, "RSS <= 150 MB at 50,000; CPU linear", met, backend="sqlite")
        previous = (size, took)
        if size == max(sizes):
            status_heap(db, size, statistics.median(rss), tmp)


# What the memory of `status` at a size is: Python's own allocations (tracemalloc) at their peak and
# when the readbacks start streaming (every automation listed, its decoded form let go above a page,
# the lanes read), by the line that allocated them; the rest of the RSS is the interpreter with its imports (`status` on an empty
# store) and what Python's heap does not count (the allocator's slack, SQLite's page cache).
_STATUS_HEAP = r"""
import contextlib, json, os, sys, tracemalloc
tracemalloc.start()
from floorgate.scheduler.app import readback
from floorgate.scheduler.cli.main import main
held = {}
opened = readback.Readback.overview_stream
def overview_stream(self, *args, **kwargs):
    view = opened(self, *args, **kwargs)
    held["streaming"] = tracemalloc.get_traced_memory()[0]
    top = tracemalloc.take_snapshot().statistics("lineno")[:4]
    held["top"] = [["/".join(s.traceback[0].filename.split("/")[-2:]) + f":{s.traceback[0].lineno}", s.size] for s in top]
    return view
readback.Readback.overview_stream = overview_stream
sys.argv = ["floorgate", "--db", sys.argv[1], "status"]
with open(os.devnull, "w") as out, contextlib.redirect_stdout(out):
    try:
        main()
    except SystemExit:
        pass
held["peak"] = tracemalloc.get_traced_memory()[1]
print(json.dumps(held), file=sys.stderr)
"""


def status_heap(db: str, size: int, rss_mb: float, tmp: Path) -> None:
    """The bound row under `status`'s RSS at ``size``: what the memory is (one run: no spread)."""
    from floorgate.admission import open_store

    empty = str(tmp / "heap-empty.db")
    open_store(empty).close()
    imports = _expect(Ran([FLOORGATE, "--db", empty, "status"]), 0, "status on an empty store").rss_mb
    traced = json.loads(
        _expect(Ran([sys.executable, "-c", _STATUS_HEAP, db]), 0, "status under tracemalloc").stderr.strip().splitlines()[-1]
    )
    mb = 1024 * 1024
    top = ", ".join(f"{where} {n / mb:.1f} MB" for where, n in traced.get("top", []))
    now = (
        f"peak RSS {rss_mb:.0f} MB = the process on an empty store {imports:.0f} MB + {rss_mb - imports:.0f} MB; Python's "
        f"allocations (tracemalloc, the imported code's included) peak at {traced['peak'] / mb:.0f} MB ({traced['peak'] / size / 1024:.1f} KB per automation), "
        f"{traced.get('streaming', 0) / mb:.0f} MB held as the readbacks start streaming (every automation listed, its decoded form let go, the lanes "
        f"read; largest lines: {top})"
    )
    print(f"  bound under status at {size:,}: {now}")
    record(f"bound under status as a process at {size:,} automations: what the memory is (one run)", now, "-", None, backend="sqlite")


def claude_pairs(pairs: int, tmp: Path, hook_cpu: float) -> None:
    """``claude -p`` with floorgate's hooks installed against without, in interleaved pairs; and
    the bound under it: the same prompt with every installed hook replaced by a shell no-op (what
    the CLI's running hooks at all costs), and the hook calls per prompt times ``hook_cpu`` (a
    served answer's CPU, the hook process's and the server's)."""
    cli = AGENTS / "node_modules" / ".bin" / "claude"
    if not os.access(cli, os.X_OK):
        print(f"  claude -p: skipped ({cli} is not installed)")
        return
    sys.path.insert(0, str(ROOT / "tests" / "agents"))
    from anthropic_standin import AnthropicStandIn

    with AnthropicStandIn() as standin:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp / "home"),
            "LANG": "C.UTF-8",
            "ANTHROPIC_BASE_URL": standin.url,
            "ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key",
            "HTTPS_PROXY": standin.url,
            "HTTP_PROXY": standin.url,
            "NO_PROXY": "127.0.0.1,localhost",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        (tmp / "home").mkdir()
        hooked, plain = tmp / "hooked", tmp / "plain"
        hooked.mkdir()
        plain.mkdir()
        db = str(tmp / "claude.db")
        # A floor the pairs never meet (each prompt is admitted: reserve and confirm), as a real lane's.
        setup = [
            [FLOORGATE, "--db", db, "init"],
            [FLOORGATE, "--db", db, *"policy set g/a --min-interval 1s --revision 0 --owner-ref bench".split()],
            [FLOORGATE, "--db", db, "hook", "install", "claude", "--project", str(hooked), "--goal", "g", "--agent", "a"],
        ]
        setup[-1] += ["--automation", "x", "--wake", "automatic"]
        for argv in setup:
            _expect(Ran(argv, env=env, cwd=tmp), 0, " ".join(argv[1:4]))
        calls_file = tmp / "hook-calls"
        noop = tmp / "noop"
        _noop_hooks(hooked, noop, f"echo . >> {calls_file}")
        argv = [str(cli), "-p", "triage the inbox", "--output-format", "stream-json", "--verbose"]
        # The same hooked project with its hooks served (a hook server in this run's runtime
        # directory) and answered in-process (a directory with none), each against no hooks.
        runs = {
            "plain": (plain, {**env, "FLOORGATE_RUNTIME_DIR": str(tmp / "no-server")}),
            "served": (hooked, {**env, "FLOORGATE_RUNTIME_DIR": str(tmp / "rt")}),
            "in-process": (hooked, {**env, "FLOORGATE_RUNTIME_DIR": str(tmp / "no-server")}),
            "no-op": (noop, {**env, "FLOORGATE_RUNTIME_DIR": str(tmp / "no-server")}),
        }
        server = HookServer(tmp)
        walls: dict[str, list[float]] = {"served": [], "in-process": [], "no-op": []}
        cpus: dict[str, list[float]] = {"served": [], "in-process": [], "no-op": []}
        plain_cpu: list[float] = []
        try:
            for i in range(pairs + 1):  # the first round warms the CLI's caches: not counted
                order = list(runs)[i % len(runs) :] + list(runs)[: i % len(runs)]
                took = {}
                for how in order:
                    project, run_env = runs[how]
                    took[how] = _expect(Ran(argv, env=run_env, cwd=project), 0, f"claude -p {how}")
                if i:
                    plain_cpu.append(took["plain"].cpu)
                    for how in walls:
                        walls[how].append(took[how].wall / took["plain"].wall)
                        cpus[how].append(took[how].cpu / took["plain"].cpu)
        finally:
            server.close()
        calls = len(standin.model_calls)
    if calls != len(runs) * (pairs + 1):
        raise SystemExit(f"bench bug: {calls} model calls for {pairs + 1} rounds of {len(runs)} (a hooked prompt was blocked?)")
    per_prompt = len(calls_file.read_text().splitlines()) / (pairs + 1)
    for how, name in (
        ("served", "claude -p with the installed hooks (served) vs without"),
        ("in-process", "claude -p with the installed hooks (in-process) vs without"),
    ):
        now = f"{spread(walls[how])} wall, {spread(cpus[how])} CPU ({pairs} interleaved rounds)"
        print(f"  {name}: {now}")
        record(f"{name} (real CLI, stand-in provider)", now, "<= 1.15x (wall)", statistics.median(walls[how]) <= 1.15, backend="sqlite")
    now = f"{spread(walls['no-op'])} wall, {spread(cpus['no-op'])} CPU ({pairs} interleaved rounds)"
    print(f"  bound: claude -p with the same hooks as shell no-ops vs without: {now}")
    record(
        "bound under claude -p: the same hooks, each a shell no-op, vs without (what the CLI's hooks cost at all)",
        now,
        "-",
        None,
        backend="none",
    )
    share = per_prompt * hook_cpu / statistics.median(plain_cpu)
    now = (
        f"{per_prompt:g} hook calls per prompt x {hook_cpu:.3f} CPU-s (a served answer, hook and server) = "
        f"{share:.1%} of a plain prompt's {statistics.median(plain_cpu):.2f} CPU-s"
    )
    print(f"  bound: the hooks' own CPU: {now}")
    record("bound under claude -p: the hook processes' own CPU against the prompt's", now, "-", None, backend="sqlite")


def _noop_hooks(hooked: Path, noop: Path, command: str) -> None:
    """A project whose Claude Code settings are ``hooked``'s with every hook's command replaced by ``command``."""
    doc = json.loads((hooked / ".claude" / "settings.json").read_text())
    for groups in doc.get("hooks", {}).values():
        for group in groups:
            for entry in group.get("hooks", []):
                entry["command"] = command
    (noop / ".claude").mkdir(parents=True)
    (noop / ".claude" / "settings.json").write_text(json.dumps(doc))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--pg", default=os.environ.get("FLOORGATE_TEST_PG_URL"), help="PostgreSQL URL (skipped when absent)")
    parser.add_argument("--sizes", help="status sizes (automations; default 10000,50000, with --quick 1000,5000)")
    parser.add_argument("--pairs", type=int, default=4, help="claude -p pairs")
    parser.add_argument("--quick", action="store_true", help="fewer rounds, 1,000 and 5,000 automations, 2 pairs")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.pairs = 3, 2
    if args.sizes is None:
        args.sizes = "1000,5000" if args.quick else "10000,50000"
    pg = args.pg
    if pg:
        pg = ("postgresql+psycopg://" + pg.split("://", 1)[1]) if "://" in pg else pg
        pg += ("&" if "?" in pg else "?") + "options=-csearch_path%3Dbench_start"
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        print(f"== starts: CPU of whole processes against python -c pass ({args.rounds} interleaved rounds)")
        hook_cpu = starts(args.rounds, pg, tmp)
        print("== floorgate status as a process")
        status_curve([int(s) for s in args.sizes.split(",")], 3, tmp)  # three rounds: a spread, not one value
        print("== claude -p with and without the hooks")
        claude_pairs(args.pairs, tmp, hook_cpu)


if __name__ == "__main__":
    main()
