"""The failure policy on a fake clock: a failing automation slows down, says so, and is held."""

from __future__ import annotations

from datetime import timedelta

from floorgate.admission import AutomationSpec, Automations, Events, FixedClock, HostPolicies
from floorgate.scheduler.readback import Readback
from floorgate.scheduler.runtime import HostRuntime, RuntimeConfig

from conftest import T0
from helpers import command, host_running, lines, marker_script

EVERY_MINUTE = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY"
MINUTE = timedelta(minutes=1)
INITIAL = timedelta(minutes=3)  # the default backoff's initial wait


def _add(store, clock, script: str, hold_after: int | None = 4) -> None:  # type: ignore[no-untyped-def]
    spec = AutomationSpec(goal_id="g", agent_id="a", schedule=EVERY_MINUTE, host=command(script), hold_after=hold_after)
    Automations(store, clock).add("x", spec)


def _host(store, clock, tmp_path) -> HostRuntime:  # type: ignore[no-untyped-def]
    host = HostRuntime(store, RuntimeConfig(state_dir=tmp_path / "state"), clock=clock)
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
    from floorgate.scheduler.automations import AutomationService
    from floorgate.scheduler.timers import TimerService

    service = AutomationService(store, clock, TimerService(store, clock=clock), Readback(store, clock))
    resumed = service.resume("x")
    assert resumed.failures == 0 and resumed.state.value != "failing"


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
