"""Recovery signals a lost turn's process group only when the group is provably the turn's, and a
lost turn's settlement is a compare-and-set that charges wall time and the latch once.

The victims are real process groups (a ``sleep`` leading its own session, as ``setsid sleep``
does); the recoverers are a real ``floorgate turn run``, a real ``floorgate run`` host, and the
executor resuming a turn id."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from basics import T0, raw_sql
from test_executor import crashed, dead_owner

from floorgate.admission import AutomationSpec, Automations, FixedClock, Journal, Missions, Store, SystemClock, Verdict, open_store
from floorgate.admission.clock import read_clock
from floorgate.hosts import Schedule
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime._process import PID_LIMIT, boot_id, start_ticks
from floorgate.scheduler.runtime.executor import TurnExecutor
from floorgate.scheduler.runtime.host import RuntimeConfig
from floorgate.scheduler.runtime.recovery import Signal, may_signal, settle_lost

from helpers import add_automation, command, start_host, stop, wait_for

TURN = "t-lost"
HERE = socket.gethostname()
BOOT = "8c6f0d6e-2f5b-4a34-9a39-6e0f7d1b2a11"


# -- the decision, from facts alone -----------------------------------------------------------------
def _facts(**changed: object) -> dict[str, object]:
    facts: dict[str, object] = {
        "phase": "launched",
        "child_pid": 4321,
        "ran_on": f"{HERE}:99",
        "child_boot_id": BOOT,
        "child_start_ticks": 5000,
        "this_host": HERE,
        "this_boot_id": BOOT,
        "live_start_ticks": 5000,
        "group_starts": None,
    }
    facts.update(changed)
    return facts


DECISIONS = [
    ("our-own-child-still-running", _facts(), Signal.KILL),
    ("confirmed-never-launched", _facts(phase="confirmed", child_pid=None), Signal.NO_CHILD),
    ("no-pid-recorded", _facts(child_pid=None), Signal.NO_CHILD),
    ("pid-minus-one-every-process", _facts(child_pid=-1), Signal.INVALID_PID),
    ("pid-zero-our-own-group", _facts(child_pid=0), Signal.INVALID_PID),
    ("pid-one-init", _facts(child_pid=1), Signal.INVALID_PID),
    ("pid-beyond-the-kernel-limit", _facts(child_pid=PID_LIMIT + 1), Signal.INVALID_PID),
    ("pid-at-the-kernel-limit", _facts(child_pid=PID_LIMIT), Signal.KILL),
    ("another-machine-same-everything-else", _facts(ran_on="elsewhere:99"), Signal.OTHER_HOST),
    ("hostname-that-only-starts-like-ours", _facts(ran_on=f"{HERE}x:99"), Signal.OTHER_HOST),
    ("old-row-without-identity", _facts(child_boot_id=None, child_start_ticks=None), Signal.NO_IDENTITY),
    ("start-time-not-recorded", _facts(child_start_ticks=None), Signal.NO_IDENTITY),
    ("boot-id-unreadable-now", _facts(this_boot_id=None), Signal.BOOT_UNKNOWN),
    ("spawned-before-a-reboot", _facts(this_boot_id="another-boot"), Signal.OTHER_BOOT),
    ("process-gone-or-proc-unreadable", _facts(live_start_ticks=None), Signal.GONE),
    ("leader-gone-group-empty", _facts(live_start_ticks=None, group_starts=()), Signal.GONE),
    ("leader-gone-its-agent-left-behind", _facts(live_start_ticks=None, group_starts=(5000, 5400)), Signal.KILL_LEFT_BEHIND),
    ("leader-gone-group-holds-an-older-process", _facts(live_start_ticks=None, group_starts=(4999, 5400)), Signal.FOREIGN_GROUP),
    ("leader-gone-another-machine", _facts(ran_on="elsewhere:99", live_start_ticks=None, group_starts=(5400,)), Signal.OTHER_HOST),
    ("leader-gone-before-a-reboot", _facts(this_boot_id="another-boot", live_start_ticks=None, group_starts=(5400,)), Signal.OTHER_BOOT),
    ("pid-reused-by-a-later-process", _facts(live_start_ticks=5001), Signal.REUSED),
    ("pid-reused-by-an-earlier-start", _facts(live_start_ticks=4999), Signal.REUSED),
]


@pytest.mark.parametrize(("facts", "expected"), [pytest.param(f, e, id=i) for i, f, e in DECISIONS])
def test_a_group_is_signalled_only_when_it_is_provably_the_turns(facts: dict[str, object], expected: Signal) -> None:
    assert may_signal(**facts) is expected  # type: ignore[arg-type]


def test_the_start_time_read_from_proc_is_the_processes_own() -> None:
    first = subprocess.Popen(["sleep", "60"])
    try:
        mine, child = start_ticks(os.getpid()), start_ticks(first.pid)
        assert mine is not None and child is not None and child >= mine  # a child starts after its parent
        assert start_ticks(first.pid) == child  # stable while it lives
    finally:
        first.kill()
        first.wait()
    assert start_ticks(-1) is None and start_ticks(0) is None and start_ticks(PID_LIMIT + 1) is None
    assert boot_id() is not None


# -- real victims -------------------------------------------------------------------------------------
@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """An unrelated process leading its own process group and session (as ``setsid sleep``)."""
    proc = subprocess.Popen(["sleep", "120"], start_new_session=True)
    assert os.getpgid(proc.pid) == proc.pid
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


def lost_turn(db_url: str, victim: subprocess.Popen[bytes], scenario: str) -> None:
    """A launched turn whose runner is gone, naming ``victim``'s pid, as ``scenario`` says."""
    clock = SystemClock()
    real = start_ticks(victim.pid)
    assert real is not None
    owner, boot, start = dead_owner(), boot_id(), real  # our own orphaned child, identity matching
    if scenario == "another-host":  # everything matches but the machine (a shared PostgreSQL)
        owner = "other-machine:4242:abc"
    elif scenario == "pid-reused":
        start = real + 1
    elif scenario == "old-row":
        boot, start = None, None
    elif scenario == "other-boot":
        boot = "00000000-0000-0000-0000-000000000000"
    with open_store(db_url) as store:
        add_automation(store, clock, script="pass")  # type: ignore[arg-type]
        crashed(store, clock, TURN, owner, lease=timedelta(seconds=-1))  # its lease has already expired
        now = read_clock(clock)
        Journal(store, clock).launch(
            TURN,
            owner,
            lease_expires=now - timedelta(seconds=1),
            deadline=now + timedelta(minutes=5),
            child_pid=victim.pid,
            child_boot_id=boot,
            child_start_ticks=start,
        )


def settled_verdict(db_url: str) -> str | None:
    with open_store(db_url) as store:
        record = Journal(store).get(TURN)
    return record.verdict.stop_reason if record is not None and record.verdict is not None else None


def recover_with(recoverer: str, db_url: str, tmp_path: Path) -> str:
    """Let ``recoverer`` find the lost turn; its output (the CLI's stdout and stderr, or the host's log)."""
    if recoverer == "turn-run":
        done = subprocess.run(
            [sys.executable, "-m", "floorgate", "turn", "run", "x", "--db", db_url, "--state-dir", str(tmp_path / "s")],
            capture_output=True,
            text=True,
            timeout=120,
            start_new_session=True,  # were our own group ever signalled (pid 0), only this child's would be
        )
        assert done.returncode == 0, done.stderr
        assert "recovered turn t-lost: failed (unknown_outcome)" in done.stdout, done.stdout
        return done.stdout + done.stderr
    if recoverer == "host":
        host = start_host(db_url, tmp_path / "host")
        try:
            wait_for(lambda: settled_verdict(db_url), timeout=60, what="the host's recovery")
        finally:
            code, log = stop(host)
        assert code == 0, log[-2000:]
        return log
    seen: list[str] = []  # "resume": the executor handed the lost turn's id, in this process
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("floorgate.recovery").addHandler(handler)
    try:
        with open_store(db_url) as store:
            outcome = TurnExecutor(store, state_dir=tmp_path / "s").run(Automations(store).get("x"), turn_id=TURN)
    finally:
        logging.getLogger("floorgate.recovery").removeHandler(handler)
    assert outcome.verdict.stop_reason == "unknown_outcome"
    return "\n".join(seen)


SPARED = [
    ("another-host", "turn-run"),
    ("another-host", "host"),
    ("another-host", "resume"),
    ("pid-reused", "turn-run"),
    ("pid-reused", "host"),
    ("old-row", "turn-run"),
    ("other-boot", "turn-run"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("scenario", "recoverer"), SPARED, ids=[f"{s}-by-{r}" for s, r in SPARED])
def test_recovery_never_signals_a_group_it_cannot_prove_is_the_turns(
    db_url: str, tmp_path: Path, victim: subprocess.Popen[bytes], scenario: str, recoverer: str
) -> None:
    lost_turn(db_url, victim, scenario)
    output = recover_with(recoverer, db_url, tmp_path)
    assert settled_verdict(db_url) == "unknown_outcome"
    assert victim.poll() is None, f"the unrelated process group was killed by {recoverer}"
    assert f"its recorded process {victim.pid} was not signalled" in output, output[-2000:]
    assert "Traceback" not in output


@pytest.mark.slow
@pytest.mark.parametrize("recoverer", ["turn-run", "host"])
def test_our_own_orphaned_child_is_still_terminated(db_url: str, tmp_path: Path, victim: subprocess.Popen[bytes], recoverer: str) -> None:
    lost_turn(db_url, victim, "ours")
    recover_with(recoverer, db_url, tmp_path)
    assert settled_verdict(db_url) == "unknown_outcome"
    assert victim.wait(timeout=30) < 0  # ended by a signal


def _gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie waiting for its reaper counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] == b"Z"
    except FileNotFoundError:
        return True


@pytest.mark.slow
@pytest.mark.parametrize("older", [False, True], ids=["its-agent-left-behind-is-killed", "a-group-older-than-the-turn-is-spared"])
def test_a_group_whose_host_process_died_is_killed_only_when_nothing_in_it_predates_the_turn(
    db_url: str, tmp_path: Path, older: bool
) -> None:
    """The runner died, PDEATHSIG ended the host script, its agent (a child in its group) lives on."""
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 120 & echo $!; read go"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    assert leader.stdout is not None and leader.stdin is not None
    agent = int(leader.stdout.readline())
    started = start_ticks(leader.pid)
    assert started is not None
    leader.stdin.write(b"go\n")
    leader.stdin.close()
    leader.wait(timeout=30)  # reaped: its pid now names only the group its agent still holds
    try:
        assert os.getpgid(agent) == leader.pid
        owner = dead_owner()
        with open_store(db_url) as store:
            clock = SystemClock()
            add_automation(store, clock, script="pass")  # type: ignore[arg-type]
            crashed(store, clock, TURN, owner, lease=timedelta(seconds=-1))
            now = read_clock(clock)
            recorded = started + 1_000_000 if older else started  # older: the group predates the child recorded
            Journal(store, clock).launch(
                TURN, owner, lease_expires=now - timedelta(seconds=1), deadline=now + timedelta(minutes=5),
                child_pid=leader.pid, child_boot_id=boot_id(), child_start_ticks=recorded,
            )  # fmt: skip
        output = recover_with("turn-run", db_url, tmp_path)
        assert settled_verdict(db_url) == "unknown_outcome"
        if older:
            assert not _gone(agent) and "its group holds a process older than the turn's child" in output, output[-2000:]
        else:
            wait_for(lambda: _gone(agent), timeout=30, what="the agent the lost turn left behind to end")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(agent, signal.SIGKILL)


@pytest.mark.parametrize("pid", [-1, 0, 2**31 - 1], ids=["minus-one", "zero", "absurdly-large"])
def test_a_damaged_child_pid_is_never_signalled_and_turn_run_says_one_line(db_url: str, tmp_path: Path, pid: int) -> None:
    clock = SystemClock()
    with open_store(db_url) as store:
        add_automation(store, clock, script="pass")  # type: ignore[arg-type]
        crashed(store, clock, TURN, dead_owner(), phase="launched")
        raw_sql(store, "UPDATE fg_turns SET child_pid = :p", {"p": pid})
    output = recover_with("turn-run", db_url, tmp_path)
    assert settled_verdict(db_url) == "unknown_outcome"
    assert "Traceback" not in output
    assert f"its recorded process {pid} was not signalled: the recorded pid is not a valid process id" in output


# -- a settlement that lost the race charges nothing ------------------------------------------------
SUCCEEDED = Verdict(status="succeeded", stop_reason="completed", retryable=False, failure_category="none")


def metered_turn(store: Store, clock: FixedClock, owner: str) -> str:
    """A launched turn of a metered automation, owned by ``owner``, counted against a mission."""
    spec = AutomationSpec(
        goal_id="g",
        agent_id="a",
        schedule=Schedule.parse("DTSTART:20261201T090000Z RRULE:FREQ=DAILY").canonical(),
        host=command("pass"),
        meter="jsonl",
    )
    Automations(store, clock).add("x", spec)
    crashed(store, clock, TURN, owner, phase="launched")
    mission = Missions(store, clock).open("x", "g", "a")
    raw_sql(store, "UPDATE fg_turns SET mission_id = :m WHERE turn_id = :t", {"m": mission.mission_id, "t": TURN})
    clock.advance(timedelta(seconds=40))  # it has run 40 s: what a lost settlement would charge
    return mission.mission_id


def charged(store: Store, clock: FixedClock, mission_id: str) -> tuple[int, str | None]:
    mission = Missions(store, clock).get(mission_id)
    return mission.wall_ms, mission.latch


def test_a_host_never_settles_as_lost_a_turn_that_settled_after_its_read(store: Store, caplog: pytest.LogCaptureFixture, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    mine = host.executor.owner
    mission_id = metered_turn(store, clock, mine)
    read = host.journal.unsettled

    def read_then_the_turn_settles(automation_id: str | None = None):  # type: ignore[no-untyped-def]
        records = read(automation_id)
        Journal(store, clock).settle(TURN, SUCCEEDED, owner=mine)  # its executor finished in between
        return records

    host.journal.unsettled = read_then_the_turn_settles  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        host.ticking.unsettled(None)
    record = Journal(store, clock).get(TURN)
    assert record.verdict == SUCCEEDED  # not re-settled
    assert charged(store, clock, mission_id) == (0, None)  # no extra wall time, no latch
    assert "settled as unknown outcome" not in caplog.text


def test_only_the_settlement_that_won_charges_wall_time_and_the_latch(store: Store) -> None:
    clock = FixedClock(T0)
    owner = dead_owner()
    mission_id = metered_turn(store, clock, owner)
    stale = Journal(store, clock).get(TURN)
    first = settle_lost(store, clock, stale, owner, ran_on=stale.runner_host)
    second = settle_lost(store, clock, stale, owner, ran_on=stale.runner_host)  # the same stale read, again
    assert (first.won, second.won) == (True, False)
    assert first.record.verdict == second.record.verdict and first.record.settled_at == second.record.settled_at
    wall_ms, latch = charged(store, clock, mission_id)
    assert wall_ms == 40_000 and latch is not None  # charged once


def test_a_launch_records_who_its_child_is(store: Store, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    seen = tmp_path / "stat"
    script = f"open({str(seen)!r}, 'w').write(open('/proc/self/stat').read())"
    automation = add_automation(store, clock, script=script)
    outcome = TurnExecutor(store, state_dir=tmp_path / "s", clock=clock).run(automation, turn_id=TURN)
    assert outcome.verdict.status == "succeeded"
    own = seen.read_text().rpartition(")")[2].split()
    record = Journal(store, clock).get(TURN)
    assert record.child_pid is not None and str(record.child_pid) == seen.read_text().split()[0]
    assert (record.child_boot_id, record.child_start_ticks) == (boot_id(), int(own[19]))  # field 22, as the child saw it
