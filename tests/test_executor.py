"""Managed turns with real subprocesses: verdicts, deadlines, replay, no retry storm."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from basics import DAY, T0, raw_sql

from floorgate.admission import Admission, Automations, FixedClock, Journal, Phase
from floorgate.admission.journal import JournalEntry
from floorgate.scheduler.runtime.executor import TurnExecutor
from floorgate.scheduler.runtime.recovery import Recovered, recover

from helpers import add_automation, floor, marker_script


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock(T0)


def executor(store, clock, tmp_path, **kw) -> TurnExecutor:  # type: ignore[no-untyped-def]
    return TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, **kw)


def launches(path) -> int:  # type: ignore[no-untyped-def]
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize(
    "script, status, category, retryable, stop_reason",
    [
        pytest.param("print('done')", "succeeded", "none", False, "completed", id="success"),
        pytest.param("import sys; sys.exit(3)", "failed", "task", False, "exit_code_3", id="nonzero-exit-is-task"),
        pytest.param(
            "import os, signal; os.kill(os.getpid(), signal.SIGKILL)", "failed", "infra", True, "killed_by_SIGKILL", id="signal-is-infra"
        ),
    ],
)
def test_verdicts(store, clock, tmp_path, script, status, category, retryable, stop_reason) -> None:
    automation = add_automation(store, clock, script=script)
    outcome = executor(store, clock, tmp_path).run(automation)
    v = outcome.verdict
    assert (v.status, v.failure_category, v.retryable, v.stop_reason) == (status, category, retryable, stop_reason)
    record = Journal(store, clock).get(outcome.turn_id)
    assert record.phase == "settled" and record.verdict == v and record.child_pid is not None


def test_missing_host_is_a_retryable_infra_failure(store, clock, tmp_path) -> None:
    automation = add_automation(store, clock)
    spec = automation.spec.model_copy(update={"host": automation.spec.host.model_copy(update={"argv": ("/no/such/agent-cli",)})})
    automation = Automations(store, clock).edit("x", spec)
    v = executor(store, clock, tmp_path).run(automation).verdict
    assert (v.status, v.failure_category, v.retryable, v.stop_reason) == ("failed", "infra", True, "host_missing")


def test_deadline_kills_the_whole_process_group(store, clock, tmp_path) -> None:
    pidfile = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time; "
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); open({str(pidfile)!r}, 'w').write(str(p.pid)); "
        "time.sleep(60)"
    )
    automation = add_automation(store, clock, script=script, timeout=1.5)
    v = executor(store, clock, tmp_path).run(automation).verdict
    assert (v.status, v.failure_category, v.stop_reason) == ("timed_out", "task", "deadline_exceeded")
    grandchild = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the grandchild outlived the deadline")


def test_result_before_the_deadline_is_a_success(store, clock, tmp_path) -> None:
    automation = add_automation(store, clock, script="import time; time.sleep(0.5)", timeout=3)
    assert executor(store, clock, tmp_path).run(automation).verdict.status == "succeeded"


def test_settled_turn_replays_without_admission_or_launch(store, clock, tmp_path) -> None:
    marks = tmp_path / "marks"
    floor(store, clock, "g/a", DAY)
    automation = add_automation(store, clock, script=marker_script(marks, exit_code=1))
    first = executor(store, clock, tmp_path).run(automation, turn_id="t-1")
    assert first.verdict.status == "failed" and launches(marks) == 1
    replay = executor(store, clock, tmp_path).run(automation, turn_id="t-1")
    assert replay.replayed and replay.decision is None and replay.verdict == first.verdict
    assert launches(marks) == 1


def test_retrying_a_failure_inside_the_floor_is_denied_without_launch(store, clock, tmp_path) -> None:
    marks = tmp_path / "marks"
    floor(store, clock, "g/a", DAY)
    automation = add_automation(store, clock, script=marker_script(marks, exit_code=1))
    run = executor(store, clock, tmp_path)
    assert run.run(automation).verdict.status == "failed"
    for _ in range(5):  # a retry loop: every attempt is a new turn that must pass admission
        clock.advance(timedelta(minutes=3))
        retry = run.run(automation)
        assert retry.verdict.status == "denied" and retry.verdict.failure_category == "policy"
        assert retry.record is None
    assert launches(marks) == 1
    assert len(Admission(store, clock).starts()) == 1


def test_manual_run_bypasses_only_the_interval(store, clock, tmp_path) -> None:
    floor(store, clock, "g/a", DAY)
    automation = add_automation(store, clock)
    run = executor(store, clock, tmp_path)
    run.run(automation)
    clock.advance(timedelta(hours=1))
    assert run.run(automation).verdict.status == "denied"
    manual = run.run(automation, manual_reason="owner asked")
    assert manual.verdict.status == "succeeded"
    record = Journal(store, clock).get(manual.turn_id)
    assert record.kind == "manual" and record.manual_reason == "owner asked"


def test_output_goes_to_a_capped_log_not_the_database(store, clock, tmp_path) -> None:
    automation = add_automation(store, clock, script="print('secret-token-' * 10000)")
    outcome = executor(store, clock, tmp_path, log_cap=1000).run(automation)
    log = outcome.record.log_path
    data = Path(log).read_bytes()
    assert data.startswith(b"secret-token-") and b"truncated at 1000 bytes" in data and len(data) < 1200
    dumped = raw_sql(store, "SELECT * FROM fg_turns") + raw_sql(store, "SELECT * FROM fg_starts")
    assert "secret-token" not in repr(dumped)


def crashed(
    store,
    clock,
    turn_id: str,
    owner: str,
    *,
    automation: str = "x",
    agent: str = "a",
    phase: str = "journaled",
    lease=timedelta(seconds=30),
):  # type: ignore[no-untyped-def]
    """A turn left behind by a runner ``owner``: reserved and journaled in one commit (as the
    executor does), then optionally confirmed and launched with a pid that does not exist."""
    now = clock.now()
    entry = JournalEntry(
        turn_id=turn_id,
        automation_id=automation,
        goal_id="g",
        agent_id=agent,
        kind="automatic",
        manual_reason=None,
        runner_host=owner.rpartition(":")[0],
        runner_pid=int(owner.split(":")[1]),
        owner_id=owner,
        lease_expires=now + lease,
        deadline=now + timedelta(minutes=5),
        log_path=None,
    )
    decision = Admission(store, clock).reserve(
        goal="g", agent=agent, automation=automation, turn_id=turn_id, trigger_time=now, journal=entry
    )
    assert decision.admitted, decision
    journal = Journal(store, clock)
    if phase == "confirmed":
        journal.confirm(turn_id, owner, lease_expires=now + lease, deadline=now + timedelta(minutes=5))
    if phase == "launched":  # confirmed with a pid that does not exist
        journal.launch(turn_id, owner, lease_expires=now + lease, deadline=now + timedelta(minutes=5), child_pid=2**22 + 12345)
    return journal.get(turn_id)


def dead_owner() -> str:
    dead = subprocess.Popen(["true"])
    dead.wait()
    return f"{socket.gethostname()}:{dead.pid}:crashed"  # a runner on this machine that is gone


def test_recovery_resumes_unlaunched_and_settles_lost_launches(store, clock, tmp_path) -> None:
    floor(store, clock, "g", DAY)
    automation = add_automation(store, clock)
    add_automation(store, clock, automation_id="y", agent="b")
    admission, journal = Admission(store, clock), Journal(store, clock)
    owner = dead_owner()
    crashed(store, clock, "t-unlaunched", owner)  # crash 1: reserved and journaled, never confirmed
    crashed(store, clock, "t-lost", owner, automation="y", agent="b", phase="launched")  # crash 2: launched, gone
    result = recover(store, clock)
    assert [r.turn_id for r in result.resumable] == ["t-unlaunched"]
    assert [r.turn_id for r in result.settled] == ["t-lost"]
    lost = journal.get("t-lost")
    assert lost.verdict.stop_reason == "unknown_outcome" and lost.verdict.failure_category == "infra" and lost.verdict.retryable
    assert admission.start("t-lost").phase is Phase.CONFIRMED  # not refunded
    resumed = executor(store, clock, tmp_path).run(automation, turn_id="t-unlaunched")
    assert resumed.decision.reason.value == "resumed" and resumed.verdict.status == "succeeded"
    assert [s.anchor_at for s in admission.starts(agent="a")] == [T0]  # anchor unmoved
    assert journal.unsettled() == [] and recover(store, clock) == Recovered([], [])


def test_recovery_leaves_turns_of_live_runners_alone(store, clock, tmp_path) -> None:
    add_automation(store, clock)
    here = f"{socket.gethostname()}:{os.getppid()}:alive"
    crashed(store, clock, "t-here", here, phase="launched")
    crashed(store, clock, "t-elsewhere", "other-machine:12345:abc", phase="launched")
    result = recover(store, clock)
    assert result.settled == [] and result.resumable == []
    assert {r.turn_id for r in Journal(store, clock).unsettled()} == {"t-here", "t-elsewhere"}


def test_a_fire_just_before_the_floor_waits_for_it_instead_of_losing_the_period(store, clock, tmp_path) -> None:
    floor(store, clock, "g/a", timedelta(hours=1))
    automation = add_automation(store, clock)
    slept = []

    def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(timedelta(seconds=seconds))

    run = TurnExecutor(store, state_dir=tmp_path / "s", clock=clock, sleep=fake_sleep)
    assert run.run(automation).verdict.status == "succeeded"
    clock.advance(timedelta(hours=1) - timedelta(milliseconds=300))  # cron fired; python started a bit early
    assert run.run(automation).verdict.status == "denied" and slept == []  # no waiting unless asked
    late = run.run(automation, wait_eligible=timedelta(minutes=2))
    assert late.verdict.status == "succeeded" and slept == [pytest.approx(0.3)]
    clock.advance(timedelta(minutes=10))
    far = run.run(automation, wait_eligible=timedelta(minutes=2))  # 50 minutes away: denied, no wait
    assert far.verdict.status == "denied" and len(slept) == 1


@pytest.mark.parametrize(
    "text, limit, expected",
    [
        pytest.param("short", 10, "short", id="fits"),
        pytest.param("one two three", 9, "one two…", id="at-a-word"),
        pytest.param("abcdefghijkl", 6, "abcde…", id="one-long-word"),
    ],
)
def test_reasons_are_shortened_only_at_word_boundaries(text: str, limit: int, expected: str) -> None:
    from floorgate.admission.journal import clip_words

    assert clip_words(text, limit) == expected and len(clip_words(text, limit)) <= limit


def test_a_stop_reason_with_its_command_is_stored_whole(store) -> None:  # type: ignore[no-untyped-def]
    from floorgate.admission import Journal, Verdict

    clock = FixedClock(T0)
    crashed(store, clock, "t-long", "me:1:a")
    reason = "compute bound exhausted: max_tool_calls=3; awaiting owner: " + " ".join(
        ["floorgate approve auth-0123456789abcdef0123456789abcdef or floorgate deny auth-0123456789abcdef0123456789abcdef"] * 2
    )
    assert len(reason) > 200
    Journal(store, clock).settle(
        "t-long", Verdict(status="stuck", stop_reason=reason, retryable=False, failure_category="policy"), owner="me:1:a"
    )
    assert Journal(store, clock).get("t-long").verdict.stop_reason == reason  # type: ignore[union-attr]
