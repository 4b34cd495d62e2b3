"""Small builders shared by the timer-host tests."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from basics import T0

from floorgate.admission import AutomationSpec, Automations, CommandHost, FixedClock, Policies, Scope, Store
from floorgate.admission.journal import JournalEntry
from floorgate.hosts import Schedule


def command(script: str, timeout: float = 30.0) -> CommandHost:
    """A host that runs a Python snippet with this interpreter (no shell quoting games)."""
    return CommandHost(argv=(sys.executable, "-c", script), timeout_seconds=timeout)


def add_automation(
    store: Store,
    clock: FixedClock,
    automation_id: str = "x",
    schedule: str = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY",
    script: str = "pass",
    timeout: float = 30.0,
    goal: str = "g",
    agent: str = "a",
    model: str | None = None,
):  # type: ignore[no-untyped-def]
    spec = AutomationSpec(
        goal_id=goal,
        agent_id=agent,
        schedule=Schedule.parse(schedule, now=clock.now()).canonical(),
        host=command(script, timeout),
        model=model,
    )
    return Automations(store, clock).add(automation_id, spec)


def floor(store: Store, clock: FixedClock, path: str, interval: timedelta) -> None:
    Policies(store, clock).configure(Scope.parse(path), min_interval=interval, expected_revision=0, owner_ref="owner")


def marker_script(path: Path, exit_code: int = 0) -> str:
    """A snippet that appends one line to ``path`` per launch, then exits with ``exit_code``."""
    return f"import sys; open({str(path)!r}, 'a').write('launch\\n'); sys.exit({exit_code})"


# Far beyond any time a datetime can hold: decoding it overflows.
OVERFLOWING_US = 9_000_000_000_000_000_000
# 9999-12-31T23:00:00Z: a valid anchor, but anchor + any floor of an hour or more overflows.
NEAR_9999_US = 253_402_297_200_000_000

CORRUPTIONS = ("host_spec", "state", "schedule", "bysecond", "wake", "tick", "anchor")


def corrupt(store: Store, kind: str, automation_id: str) -> None:
    """Damage one stored row of ``automation_id`` the way a hand edit or a bad restore would.

    ``anchor`` needs a floor on the automation's agent (the anchor plus the floor overflows)."""
    from sqlalchemy import text

    updates = {
        "host_spec": "UPDATE fg_automations SET host_spec = '{not json', revision = revision + 1 WHERE automation_id = :x",
        "state": "UPDATE fg_automations SET state = 'bogus', revision = revision + 1 WHERE automation_id = :x",
        "schedule": "UPDATE fg_automations SET schedule = 'garbage', revision = revision + 1 WHERE automation_id = :x",
        "bysecond": "UPDATE fg_automations SET schedule = 'DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;BYSECOND=60', "
        "revision = revision + 1 WHERE automation_id = :x",
        "wake": f"INSERT INTO fg_wake_state (automation_id, backoff_step, backoff_wake_us, updated_at_us) VALUES (:x, 1, {OVERFLOWING_US}, 0)",
        "tick": "INSERT INTO fg_ticks (automation_id, nominal_us, actual_us, decision, reason, turn_id, host) "
        f"VALUES (:x, {OVERFLOWING_US}, 0, 'admitted', 'eligible', NULL, 'hand-edit')",
        "anchor": "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind, "
        f"manual_reason, confirmed_at_us) SELECT 'anchor-' || automation_id, goal_id, agent_id, automation_id, 0, {NEAR_9999_US}, "
        "'confirmed', 'automatic', NULL, NULL FROM fg_automations WHERE automation_id = :x",
    }
    with store.engine.begin() as conn:
        conn.execute(text(updates[kind]), {"x": automation_id})


def start_host(db_url: str, state: Path, *extra: str) -> subprocess.Popen[str]:
    """A real ``floorgate run`` process; its log goes to ``<state>.log`` (a file, so a chatty host
    never blocks on a full pipe)."""
    log = open(state.parent / f"{state.name}.log", "w")  # noqa: SIM115 (the host process writes it until stopped)
    proc = subprocess.Popen(
        [sys.executable, "-m", "floorgate", "run", "--db", db_url, "--state-dir", str(state), "--poll", "1s", *extra],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    log.close()
    proc.log_path = state.parent / f"{state.name}.log"  # type: ignore[attr-defined]
    return proc


def host_log(proc: subprocess.Popen[str]) -> str:
    return proc.log_path.read_text()  # type: ignore[attr-defined,no-any-return]


def wait_for(predicate, timeout: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it returns something truthy; fail the test at the deadline."""
    import pytest

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")


def stop(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> tuple[int, str]:
    """Signal the host, wait for it, and return (exit code, its log)."""
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
    return proc.returncode, host_log(proc)


def lines(path: Path) -> int:
    """How many launches a ``marker_script`` recorded."""
    return len(path.read_text().splitlines()) if path.exists() else 0


def host_running(store: Store, clock: FixedClock) -> None:
    """Record a live `floorgate run` heartbeat at the clock's time (poll 1 day: it stays alive for
    the test), so readbacks of floorgate's own timer show the fires a running host makes."""
    from floorgate.scheduler.runtime._heartbeat import Heartbeat

    Heartbeat(store, clock, "test-host:1", timedelta(days=1)).beat()


def fake_cron_daemon(directory: Path) -> subprocess.Popen[bytes]:
    """A process whose name is ``cron`` (a copy of ``sleep``), so the machine looks like it runs a
    cron daemon; tests of what a crontab host fires use it, the daemon check has its own tests.
    (The real daemon would run every test account's lines, across parallel workers.)"""
    import shutil

    binary = directory / "cron"
    shutil.copy(shutil.which("sleep") or "/bin/sleep", binary)
    return subprocess.Popen([str(binary), "600"])


class Receiver:
    """A stdlib HTTP server in a thread that records every POST and answers ``status``."""

    def __init__(self) -> None:
        self.status = 200
        self.got: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.got.append((dict(self.headers.items()), body))
                self.send_response(receiver.status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def docs(self) -> list[dict]:  # type: ignore[type-arg]
        return [json.loads(body) for _, body in self.got]


def journal_entry(turn_id: str, at: datetime) -> JournalEntry:
    """A managed turn's journal entry for lane g/a/x, written at ``at`` (lease 5 min, deadline 10)."""
    return JournalEntry(
        turn_id=turn_id,
        automation_id="x",
        goal_id="g",
        agent_id="a",
        kind="automatic",
        manual_reason=None,
        runner_host="h",
        runner_pid=1,
        owner_id="runner",
        lease_expires=at + timedelta(minutes=5),
        deadline=at + timedelta(minutes=10),
        log_path=None,
    )


# Five automations over two goals, listed out of order: the status tests' store.
STATUS_NAMES = ("b2", "a1", "c3", "a4", "d5")


def seed_status(store: Store, clock: FixedClock, *, unreadable: str | None = None) -> None:
    """``STATUS_NAMES`` under a floor on g/a, the clock 20 minutes past ``T0``; ``unreadable``: one
    automation whose host spec is damaged (listed first by status, as unreadable)."""

    floor(store, clock, "g/a", timedelta(hours=1))
    for i, name in enumerate(STATUS_NAMES):
        add_automation(store, clock, name, goal="g" if i % 2 else "h", agent="a")
    clock.set(T0 + timedelta(minutes=20))
    if unreadable is not None:
        corrupt(store, "host_spec", unreadable)
