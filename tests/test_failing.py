"""The failure policy on a fake clock: a failing automation slows down, says so, and is held."""

from __future__ import annotations

from datetime import timedelta

import pytest
from basics import T0

from floorgate.admission import AutomationSpec, Automations, Events, FixedClock, HostPolicies
from floorgate.scheduler.app.readback import Readback
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from helpers import command, host_running, lines, marker_script

EVERY_MINUTE = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY"
MINUTE = timedelta(minutes=1)
INITIAL = timedelta(minutes=3)  # the default backoff's initial wait


def _add(store, clock, script: str, hold_after: int | None = 4) -> None:  # type: ignore[no-untyped-def]
    spec = AutomationSpec(goal_id="g", agent_id="a", schedule=EVERY_MINUTE, host=command(script), hold_after=hold_after)
    Automations(store, clock).add("x", spec)


def _host(store, clock, tmp_path) -> HostRuntime:  # type: ignore[no-untyped-def]
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    host.load_policy()
    return host


def _kinds(store) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(e.kind.value for e in Events(store).list())


def test_a_failing_command_slows_down_then_is_held_until_resumed(store, tmp_path) -> None:
    clock = FixedClock(T0)
    marker = tmp_path / "launches"
    _add(store, clock, marker_script(marker, exit_code=7))
    host = _host(store, clock, tmp_path)
    host.scheduler.start(paused=True)
    try:
        host.sync()
        # First failure: no slowdown (one early retry is the backoff's); the next minute runs.
        assert host.tick("x").reason == "failed"
        clock.advance(MINUTE)
        assert host.tick("x").reason == "failed"  # the second consecutive failure
        second = clock.now()
        assert _kinds(store) == ["automation_failing", "turn_failed", "turn_failed"]
        # From here every automatic start, scheduled fires included, waits initial x 2^(2-1).
        until = second + 2 * INITIAL
        assert host.scheduler.get_job("x").next_run_time == until
        host_running(store, clock)
        rb = Readback(store, clock).automation("x")
        assert (rb.state.value, rb.failures, rb.failing_until) == ("failing", 2, until)
        assert "no automatic start before" in rb.detail and rb.next_fire_at == until
        assert next(r.runs_at for r in rb.fires(10, clock.now()) if r.admitted) == until  # preview and show agree
        from floorgate.scheduler.app.root import Floorgate
        from floorgate.scheduler.console.metrics import render

        metrics = render(Floorgate(store, clock=clock)).decode()
        assert 'floorgate_automation_consecutive_failures{agent="a",automation="x",goal="g",state="failing"} 2.0' in metrics
        clock.advance(MINUTE)
        refused = host.tick("x")  # a scheduled fire a minute later is refused, nothing launched
        assert (refused.decision, refused.reason) == ("denied", "failing")
        assert lines(marker) == 2
        clock.set(until)
        assert host.tick("x").reason == "failed"  # third: waits 4 x initial
        assert host.scheduler.get_job("x").next_run_time == until + 4 * INITIAL
        clock.set(until + 4 * INITIAL)
        assert host.tick("x").reason == "failed"  # fourth: hold_after 4 holds it
        held = Automations(store, clock).get("x")
        assert (held.state.value, held.hold_kind.value if held.hold_kind else None) == ("held", "failing")
        assert _kinds(store).count("automation_failing") == 1  # once per streak
        assert _kinds(store).count("automation_held") == 1 and _kinds(store).count("turn_failed") == 4
        clock.advance(timedelta(hours=1))
        assert host.tick("x").reason == "held"
        assert lines(marker) == 4
        rb = Readback(store, clock).automation("x")
        assert (rb.state.value, rb.hold.value if rb.hold else None) == ("held", "failing")
        assert "automation resume x" in rb.detail
    finally:
        host.scheduler.shutdown(wait=False)
    from floorgate.scheduler.app.automations import AutomationService
    from floorgate.scheduler.app.timers import TimerService

    service = AutomationService(store, clock, TimerService(store, clock=clock), Readback(store, clock))
    assert Automations(store, clock).wake_state("x").backoff_step > 0  # the failed turns' backoff chain ran on
    resumed = service.resume("x").readback
    assert resumed.failures == 0 and resumed.state.value != "failing"
    # The resume ends the backoff chain too: no early retry is due, and the next failure is a
    # first one again (retried after the backoff's first wait, not the chain's longest).
    wake = Automations(store, clock).wake_state("x")
    assert (wake.backoff_step, wake.backoff_wake_at) == (0, None)


def test_a_success_ends_the_streak(store, tmp_path) -> None:
    clock = FixedClock(T0)
    flag = tmp_path / "fail"
    flag.write_text("1")
    script = f"import os, sys; sys.exit(7 if os.path.exists({str(flag)!r}) else 0)"
    _add(store, clock, script, hold_after=None)
    host = _host(store, clock, tmp_path)
    assert host.tick("x").reason == "failed"
    clock.advance(MINUTE)
    assert host.tick("x").reason == "failed"
    clock.advance(2 * INITIAL)
    flag.unlink()
    assert host.tick("x").reason == "succeeded"
    wake = Automations(store, clock).wake_state("x")
    assert (wake.failures, wake.failing_until) == (0, None)
    clock.advance(MINUTE)
    assert host.tick("x").reason == "succeeded"  # no wait left over
    assert Readback(store, clock).automation("x").state.value != "failing"


def test_the_wait_doubles_to_the_backoff_cap(store, tmp_path) -> None:
    clock = FixedClock(T0)
    stored = HostPolicies(store, clock).get()
    from floorgate.admission import HostPolicy

    HostPolicies(store, clock).set(
        HostPolicy(backoff_initial=MINUTE, backoff_cap=3 * MINUTE), expected_revision=stored.revision, owner_ref="owner"
    )
    _add(store, clock, "import sys; sys.exit(3)", hold_after=0)  # 0: never held
    host = _host(store, clock, tmp_path)
    waits = []
    for _ in range(5):
        assert host.tick("x").reason == "failed"
        wake = Automations(store, clock).wake_state("x")
        waits.append(wake.failing_until - clock.now() if wake.failing_until else None)
        clock.set(wake.failing_until or clock.now() + MINUTE)
    assert waits == [None, 2 * MINUTE, 3 * MINUTE, 3 * MINUTE, 3 * MINUTE]
    assert Automations(store, clock).get("x").state.value == "active"


# -- missed runs: live lateness is not a missed fire; per-automation catch-up ---------------------
def test_a_fire_a_running_host_starts_seconds_late_runs_even_with_catch_up_zero(store, tmp_path) -> None:
    import logging
    from datetime import datetime, timezone

    from apscheduler.events import EVENT_JOB_MISSED
    from apscheduler.executors.base import run_job

    clock = FixedClock(T0)
    _add(store, clock, "pass")
    stored = HostPolicies(store, clock).get()
    from floorgate.admission import HostPolicy

    HostPolicies(store, clock).set(HostPolicy(catch_up=timedelta(0)), expected_revision=stored.revision, owner_ref="owner")
    host = _host(store, clock, tmp_path)
    host.scheduler.start(paused=True)
    try:
        host.sync()
        job = host.scheduler.get_job("x")
        ran: list[str] = []
        job._modify(func=ran.append)  # the armed job, with its grace; its tick itself is not under test
        # What APScheduler's executor does with a fire a busy host reaches 5 s after its time.
        late = datetime.now(timezone.utc) - timedelta(seconds=5)
        events = run_job(job, "default", [late], logging.getLogger("test").name)
    finally:
        host.scheduler.shutdown(wait=False)
    assert [e.code for e in events if e.code == EVENT_JOB_MISSED] == [] and ran == ["x"]


@pytest.mark.parametrize(
    ("own", "window", "expected"),
    [
        pytest.param(None, None, timedelta(hours=2), id="the-deployment's"),
        pytest.param("skip", None, timedelta(0), id="skip"),
        pytest.param("latest", timedelta(minutes=10), timedelta(minutes=10), id="latest-own-window"),
        pytest.param(None, timedelta(minutes=5), timedelta(minutes=5), id="own-window"),
    ],
)
def test_an_automation_s_catch_up_overrides_the_deployment_s(store, tmp_path, own, window, expected) -> None:
    from floorgate.admission import CatchUp, HostPolicy

    clock = FixedClock(T0 + timedelta(minutes=30) + timedelta(seconds=1))
    HostPolicies(store, clock).set(HostPolicy(catch_up=timedelta(hours=2)), expected_revision=0, owner_ref="owner")
    spec = AutomationSpec(
        goal_id="g",
        agent_id="a",
        schedule="DTSTART:20261201T090000Z\nRRULE:FREQ=HOURLY",
        host=command("pass"),
        catch_up=CatchUp(own) if own else None,
        catch_up_window=window,
    )
    Automations(store, FixedClock(T0 - timedelta(days=1))).add("x", spec)  # the 09:00 fire was missed while no host ran
    host = _host(store, clock, tmp_path)
    host.sync()
    automation = Automations(store, clock).get("x")
    from floorgate.hosts import Schedule

    planned = host.plan(automation, Schedule.parse(automation.spec.schedule), None, clock.now())
    due = T0 if expected > clock.now() - T0 else T0 + timedelta(hours=1)
    assert planned == due


def test_a_timed_out_turn_is_a_failure_with_its_own_event(store, tmp_path) -> None:
    from floorgate.scheduler.runtime.executor import TurnExecutor

    clock = FixedClock(T0)
    spec = AutomationSpec(goal_id="g", agent_id="a", schedule=EVERY_MINUTE, host=command("import time; time.sleep(60)", timeout=0.5))
    automation = Automations(store, clock).add("x", spec)
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
    try:
        assert executor.run(automation).verdict.status == "timed_out"
    finally:
        executor.close()
    assert _kinds(store) == ["turn_timed_out"]
    assert Automations(store, clock).wake_state("x").failures == 1


@pytest.mark.parametrize(
    ("kind", "released"),
    [
        pytest.param("timer", True, id="timer-hold-ends-once-the-host-can-express-it"),
        pytest.param("failing", False, id="failure-streak-waits-for-resume"),
        pytest.param("mission_stuck", False, id="stuck-mission-waits-for-resume"),
    ],
)
def test_an_edit_ends_only_the_timer_s_own_hold(store, kind: str, released: bool) -> None:  # type: ignore[no-untyped-def]
    """Raising --hold-after (or any edit) re-arms the timer; it is not the owner's resume, so a
    failing or stuck automation stays held with its kind; a timer hold the host can now express ends."""
    from floorgate.admission import AutomationState, HoldKind
    from floorgate.scheduler.app.automations import AutomationService
    from floorgate.scheduler.app.timers import TimerService

    clock = FixedClock(T0)
    _add(store, clock, "exit 7")
    repo = Automations(store, clock)
    repo.set_state("x", AutomationState.HELD, "held for the test", HoldKind(kind))
    service = AutomationService(store, clock, TimerService(store, clock=clock), Readback(store, clock))
    service.edit("x", repo.get("x").spec.model_copy(update={"hold_after": 9}))
    after = repo.get("x")
    assert after.spec.hold_after == 9
    if released:
        assert (after.state, after.hold_kind) == (AutomationState.ACTIVE, None)
    else:
        assert (after.state, after.hold_kind) == (AutomationState.HELD, HoldKind(kind))
        service.resume("x")
        assert (repo.get("x").state, repo.get("x").hold_kind) == (AutomationState.ACTIVE, None)
