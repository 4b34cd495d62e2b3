"""Where one process's burst time goes: py-spy samples taken from just before T to its last decision.

Two samplers run side by side on the process, both ``--nonblocking`` (the process is never paused):
- ``--gil``: only the thread holding the GIL, so its samples are the process's Python CPU, split by
  the part of the work its stack is in (``part``); the fraction of sampling instants at which some
  thread held the GIL is how much of the burst's wall time the process ran (or was due to run) Python;
- ``--idle --threads``: every thread at every instant, so a thread's samples are its wall time,
  split by what its innermost frame is doing (``state``: blocked, in a driver call, in Python; a
  thread waiting for the GIL or for a core shows as running).
Beside them, each thread's CPU seconds from ``/proc/<pid>/task/<tid>/stat`` over the same window.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

RATE = 200  # GIL samples per second (one thread per instant: cheap)
IDLE_RATE = 25  # every thread's stack per second (dozens of threads per instant: kept low)


def py_spy() -> str | None:
    """The py-spy binary (the venv's, else on PATH), None when not installed."""
    here = Path(sys.executable).parent / "py-spy"
    return str(here) if here.exists() else shutil.which("py-spy")


def _thread_cpu(pid: int) -> dict[int, float]:
    ticks = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / ticks
    return out


def _frames(line: str) -> tuple[int, str, list[str], int]:
    """A raw py-spy line: thread id, thread name, frames outermost first, sample count."""
    stack, count = line.rstrip("\n").rsplit(" ", 1)
    head, _, rest = stack.partition(";")
    tid = int(head.split("(", 1)[1].split(")", 1)[0], 0)
    name = head.split("): ", 1)[1] if "): " in head else ""
    return tid, name, rest.split(";") if rest else [], int(count)


def part(frames: list[str]) -> str:
    """The part of the burst's work a (GIL-holding) stack is in; the first rule that matches wins."""
    text = ";".join(frames)
    if "logging/" in text:
        return "logging"
    if any(k in text for k in ("_run_queued", "run_turn", "_turn_pool.py", "subprocess.py", "confirmer")):
        return "turns (launch, wait, confirm)"
    if any(f"HostRuntime._{loop}_loop" in text for loop in ("sync", "recovery", "notify", "flush")):
        return "host's own loops (sync, readback, recovery)"
    if "TickRecords.record" in text:
        return "tick records"
    if "replan_after_tick" in text or "_replan_from" in text:
        return "re-arm"
    decision = ("tick (<string>" in text) or ("Ticking." in text) or ("_admit_queue.py" in text)
    if decision and any(lib in text for lib in ("sqlalchemy/", "psycopg/")):
        return "decision: SQLAlchemy and driver Python"
    if decision:
        return "decision: the rest (floorgate's own code, and driver calls in C that show no Python frame)"
    if "apscheduler/" in text or "concurrent/futures" in text:
        return "APScheduler firing"
    return "other"


def own(frames: list[str]) -> str | None:
    """The innermost frame of floorgate's own code under the tick (None: not in a tick)."""
    mine = [f for f in frames if " (scheduler/" in f or " (admission/" in f]
    return mine[-1].split(" (", 1)[0] if mine and any("Ticking." in f for f in frames) else None


def state(frames: list[str]) -> str:
    """What a thread is doing at one instant, from its innermost frame (idle sampler): blocked
    (waiting on a lock, a condition, a queue, a sleep) or running (Python, or inside a driver call:
    the store's own work, its lock or its commit)."""
    leaf = frames[-1].split(" (", 1)[0].rsplit(".", 1)[-1] if frames else ""
    if any("psycopg/" in f for f in frames[-3:]):  # waiting in psycopg is waiting on the server (a lock, a commit, the trip)
        return "driver"
    if leaf in ("wait", "get", "acquire", "sleep", "select", "poll", "_wait_for_tstate_lock", "join", "_worker"):
        return "blocked"
    if leaf in ("execute", "commit", "rollback", "fetchone", "fetchall", "fetchmany", "do_execute", "do_commit", "do_rollback"):
        return "driver"
    return "python"


@dataclass
class Split:
    """One sampled process's burst: GIL samples by part, and each thread's CPU and states."""

    window_s: float
    decisions: int = 0
    gil: Counter[str] = field(default_factory=Counter)
    own: Counter[str] = field(default_factory=Counter)
    threads: dict[int, str] = field(default_factory=dict)
    states: dict[int, Counter[str]] = field(default_factory=dict)
    cpu: dict[int, float] = field(default_factory=dict)
    held: Counter[int] = field(default_factory=Counter)  # GIL samples by thread

    def gil_share(self) -> float:
        """Fraction of the window's sampling instants at which a thread held the GIL."""
        return sum(self.gil.values()) / max(1.0, self.window_s * RATE)

    def busiest(self) -> tuple[str, float, float, Counter[str]]:
        """The thread with the most CPU in the window: its name, CPU seconds, share of the window
        holding the GIL, and sampled states."""
        tid = max(self.cpu, key=lambda t: self.cpu[t])
        held = self.held[tid] / max(1.0, self.window_s * RATE)
        return self.threads.get(tid, str(tid)), self.cpu[tid], held, self.states.get(tid, Counter())


class Sampler:
    """Samples ``pid`` from ``start()`` to ``stop()``; no-op (``stop`` returns None) without py-spy."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.dir = tempfile.mkdtemp(prefix="fg-burst-split-")
        self.procs: list[subprocess.Popen[bytes]] = []
        binary = py_spy()
        if binary is None:
            return
        self.cpu0 = _thread_cpu(pid)
        self.t0 = time.time()
        common = [binary, "record", "-p", str(pid), "-f", "raw", "--nonblocking", "-t"]
        for name, extra in (("gil", ["--gil", "-r", str(RATE)]), ("idle", ["--idle", "-r", str(IDLE_RATE)])):
            self.procs.append(
                subprocess.Popen([*common, *extra, "-o", f"{self.dir}/{name}.raw"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )

    def stop(self) -> Split | None:
        """Stop both samplers (they write their files on SIGINT) and read them."""
        if not self.procs:
            return None
        window = time.time() - self.t0
        cpu1 = _thread_cpu(self.pid)
        for proc in self.procs:
            proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        split = Split(window_s=window)
        split.cpu = {tid: cpu1[tid] - self.cpu0.get(tid, 0.0) for tid in cpu1}
        gil, idle = Path(self.dir, "gil.raw"), Path(self.dir, "idle.raw")
        if gil.exists():
            for line in gil.read_text(errors="replace").splitlines():
                tid, _, frames, count = _frames(line)
                split.held[tid] += count
                split.gil[part(frames)] += count
                where = own(frames)
                if where is not None:
                    split.own[where] += count
        if idle.exists():
            for line in idle.read_text(errors="replace").splitlines():
                tid, name, frames, count = _frames(line)
                if name:
                    split.threads[tid] = name
                split.states.setdefault(tid, Counter())[state(frames)] += count
        keep = os.environ.get("BURST_SPLIT_KEEP")  # a directory: the raw samples, for digging
        if keep:
            shutil.copytree(self.dir, Path(keep, f"{self.pid}"), dirs_exist_ok=True)
        shutil.rmtree(self.dir, ignore_errors=True)
        return split


def cpu_parts(split: Split, cpu_s: float, decisions: int) -> str:
    """The process's CPU per decision, in the proportions of its GIL samples' parts (ms)."""
    total = sum(split.gil.values()) or 1
    per = 1000 * cpu_s / max(1, decisions)
    parts = ", ".join(f"{name} {per * k / total:.2f}" for name, k in split.gil.most_common() if k / total >= 0.02)
    top = ", ".join(f"{name} {100 * k / total:.0f}%" for name, k in split.own.most_common(4))
    return f"{per:.2f} ms: {parts}" + (f" (innermost own frames: {top})" if top else "")


def wall_parts(split: Split, last_s: float, cpu_s: float) -> str:
    """How much of the burst's wall time the process computed, and what its busiest thread did."""
    name, cpu, held, states = split.busiest()
    seen = sum(states.values()) or 1
    return (
        f"process CPU {cpu_s:.2f} s in {last_s:.2f} s ({cpu_s / last_s:.0%} of one core), GIL held {split.gil_share():.0%}"
        f" of the window; busiest thread {name}: {cpu:.2f} CPU-s ({cpu / split.window_s:.0%} of the window), holding the GIL"
        f" {held:.0%}, sampled in Python {states['python'] / seen:.0%} (computing, or waiting for the GIL or a core), in a"
        f" driver call {states['driver'] / seen:.0%} (the store's work, its lock or commit), blocked {states['blocked'] / seen:.0%}"
    )
