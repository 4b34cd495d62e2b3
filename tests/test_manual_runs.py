"""A manual run bypasses only the interval: never a pause, a hold or a stuck mission's wall."""

from __future__ import annotations

from datetime import timedelta

import pytest
from basics import T0
from test_envelope import automation, envelope

from floorgate.admission import Automations, FixedClock, HoldKind, Missions
from floorgate.scheduler.runtime.executor import TurnExecutor

from cli import run_cli
from helpers import lines


def _run(store, clock, tmp_path, auto, **kw):  # type: ignore[no-untyped-def]
    return TurnExecutor(store, state_dir=tmp_path / "state", clock=clock).run(auto, **kw)


def test_a_manual_run_continues_the_stuck_mission_never_a_fresh_one(store, tmp_path) -> None:
    clock = FixedClock(T0)
    marks = tmp_path / "marks"
    envelope(store, clock, '{"max_turns": 2}')
    automation(store, clock, f"open({str(marks)!r}, 'a').write('x\\n'); import sys; sys.exit(1)")
    outcomes = []
    for _ in range(4):  # the owner keeps pressing "Run now"
        clock.advance(timedelta(minutes=1))
        outcomes.append(_run(store, clock, tmp_path, Automations(store, clock).get("x"), manual_reason="owner asked"))
    assert lines(marks) == 2  # max_turns 2: the host ran twice, not four times
    assert len(Missions(store, clock).recent("x", 10)) == 1
    held = Automations(store, clock).get("x")
    assert held.state.value == "held" and held.hold_kind is HoldKind.MISSION_STUCK
    last = outcomes[-1]
    assert last.verdict.status == "denied" and last.verdict.stop_reason == "automation_held"
    assert "\n" not in last.detail and "bypasses only the interval" in last.detail and "automation resume x" in last.detail


@pytest.mark.parametrize(
    ("state", "kind", "clear"),
    [
        pytest.param("paused", None, "resume it with 'floorgate automation resume x'", id="paused"),
        pytest.param("held", HoldKind.TIMER, "'floorgate automation apply x'", id="held-timer"),
        pytest.param("held", HoldKind.FAILING, "release the hold with 'floorgate automation resume x'", id="held-failing"),
        pytest.param("held", HoldKind.MISSION_STUCK, "decide the mission first", id="held-stuck"),
    ],
)
def test_a_manual_run_of_a_paused_or_held_automation_is_refused_naming_how_to_clear_it(store, tmp_path, state, kind, clear) -> None:
    clock = FixedClock(T0)
    marks = tmp_path / "marks"
    automation(store, clock, f"open({str(marks)!r}, 'a').write('x\\n')")
    auto = Automations(store, clock).set_state("x", state, "a note", kind)
    outcome = _run(store, clock, tmp_path, auto, manual_reason="owner asked")
    assert outcome.verdict.status == "denied" and outcome.record is None and lines(marks) == 0
    assert f"x is {state}" in outcome.detail and clear in outcome.detail, outcome.detail


def test_turn_run_of_a_paused_automation_says_so_in_one_line(sqlite_db, tmp_path) -> None:
    clock = FixedClock(T0)
    from floorgate.admission import open_store

    store = open_store(sqlite_db)
    automation(store, clock, "pass")
    Automations(store, clock).set_state("x", "paused", None)
    done = run_cli("turn", "run", "x", "--manual-reason", "owner asked", "--db", sqlite_db)
    assert done.returncode == 3, done.stdout + done.stderr
    assert done.stdout.strip().splitlines() == [
        "not run: x is paused; a manual run bypasses only the interval, not this: resume it with 'floorgate automation resume x'"
    ]
