"""Honest accounting around the envelope: an overshoot that succeeds is recorded and emitted; a
turn is not launched with almost no wall budget left; each host records its envelope mode."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from floorgate.admission import AutomationSpec, Automations, EventKind, Events, FixedClock, Missions, Policies, Scope, Store, parse_compute
from floorgate.admission.errors import CorruptState
from floorgate.admission.liveness import HostBeats
from floorgate.hosts import Schedule
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime.executor import TurnExecutor
from floorgate.scheduler.runtime.host import RuntimeConfig
from floorgate.scheduler.views.present import host_doc, hosts_text

from helpers import command


def _automation(store: Store, clock: FixedClock, script: str, meter: str = "none"):  # type: ignore[no-untyped-def]
    spec = AutomationSpec(
        goal_id="g",
        agent_id="a",
        schedule=Schedule.parse("DTSTART:20261201T090000Z RRULE:FREQ=DAILY").canonical(),
        host=command(script, 30.0),
        meter=meter,
    )
    return Automations(store, clock).add("x", spec)


def _envelope(store: Store, clock: FixedClock, text: str) -> None:
    Policies(store, clock).configure(Scope.parse("g/a"), compute=parse_compute(text), expected_revision=0, owner_ref="o")


def _run(store: Store, clock: FixedClock, tmp_path: Path, auto, **kw):  # type: ignore[no-untyped-def]
    return TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce").run(auto, **kw)


def test_a_successful_turn_over_max_tokens_stays_a_success_and_says_so(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    _envelope(store, clock, '{"max_tokens": 100}')
    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "input_tokens": 400, "output_tokens": 100, "model": "m"})
    auto = _automation(store, clock, f"print({line!r})", meter="jsonl")
    outcome = _run(store, clock, tmp_path, auto)
    assert outcome.verdict.status == "succeeded"
    [event] = Events(store).list(EventKind.BOUND_OVERSHOT)
    assert event.data["bound"] == "max_tokens" and (event.data["limit"], event.data["used"], event.data["over"]) == (100, 500, 400)
    assert event.data["turn_id"] == outcome.turn_id
    mission = Missions(store, clock).recent("x", 1)[0]
    assert mission.status == "succeeded" and mission.problems is not None and "overshot max_tokens=100" in mission.problems


def test_within_the_bound_nothing_is_emitted(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    _envelope(store, clock, '{"max_tokens": 1000}')
    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "input_tokens": 400, "output_tokens": 100, "model": "m"})
    assert _run(store, clock, tmp_path, _automation(store, clock, f"print({line!r})", meter="jsonl")).verdict.status == "succeeded"
    assert Events(store).list(EventKind.BOUND_OVERSHOT) == []


def test_no_turn_is_launched_with_less_than_a_second_of_wall_budget(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    _envelope(store, clock, '{"max_wall_seconds": 5}')
    marks = tmp_path / "marks"
    auto = _automation(store, clock, f"open({str(marks)!r}, 'a').write('x'); import sys; sys.exit(1)")
    assert _run(store, clock, tmp_path, auto).verdict.status == "failed"  # the mission stays open
    missions = Missions(store, clock)
    mission = missions.current("x")
    missions.add_wall(mission.mission_id, timedelta(milliseconds=4_800 - mission.wall_ms))  # 0.2 s left
    marks.unlink()
    refused = _run(store, clock, tmp_path, auto)
    assert refused.verdict.status == "stuck" and refused.verdict.bound == "max_wall_seconds", refused.verdict
    assert not marks.exists()  # the host never ran


@pytest.mark.parametrize("mode", ["observe", "enforce", "disabled"])
def test_each_host_records_its_envelope_mode_and_readback_shows_it(store: Store, tmp_path: Path, clock: FixedClock, mode: str) -> None:
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", envelope_mode=mode))
    host.heartbeat.beat()
    [beat] = HostBeats(store).all()
    assert beat.envelope_mode == mode
    assert host_doc(beat, clock.now())["envelope_mode"] == mode
    assert f"envelopes {mode}" in hosts_text([beat], clock.now())


def test_a_damaged_envelope_mode_is_not_read_as_any_mode(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", envelope_mode="observe")).heartbeat.beat()
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE fg_hosts SET envelope_mode = 'enforcing'"))
    with pytest.raises(CorruptState):
        HostBeats(store).all()


def test_a_managed_turns_metered_usage_lands_in_the_budget_ledger(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    from floorgate.admission.usage import Usage, UsageState

    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "input_tokens": 400, "output_tokens": 100, "model": "m"})
    outcome = _run(store, clock, tmp_path, _automation(store, clock, f"print({line!r})", meter="jsonl"))
    entry = Usage(store, clock).get(outcome.turn_id)
    assert entry is not None and (entry.state, entry.tokens, entry.model, entry.source.value) == (UsageState.SETTLED, 500, "m", "meter")


def test_a_turn_whose_usage_cannot_be_read_is_unknown_and_keeps_its_hold(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    from floorgate.admission.usage import Usage, UsageState, settle_turn

    usage = Usage(store, clock)
    usage.hold("t-held", "g", "a", "x", 7000, "m")
    with store.unit() as unit:
        settle_turn(
            unit.connection,
            "t-held",
            goal="g",
            agent="a",
            automation="x",
            at=clock.now(),
            tokens=None,
            usd_micros=None,
            model=None,
            now=clock.now(),
        )
    entry = usage.get("t-held")
    assert entry is not None and entry.state is UsageState.UNKNOWN and entry.counted_tokens == 7000
    with store.unit() as unit:  # reconciled once: a later settlement leaves it
        settle_turn(
            unit.connection,
            "t-held",
            goal="g",
            agent="a",
            automation="x",
            at=clock.now(),
            tokens=5,
            usd_micros=None,
            model=None,
            now=clock.now(),
        )
    again = usage.get("t-held")
    assert again is not None and again.state is UsageState.UNKNOWN
    auto = _automation(store, clock, 'print(\'{"floorgate_usage": 1, "request_id": \')', meter="jsonl")  # a broken meter line
    outcome = _run(store, clock, tmp_path, auto)
    broken = usage.get(outcome.turn_id)
    assert broken is not None and broken.state is UsageState.UNKNOWN and broken.tokens is None


def test_a_managed_turn_holds_its_estimate_at_admission_and_settles_it(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    """Under a token budget the executor's admission holds the lane's estimate (in the reservation's
    transaction) and the turn's settlement reconciles that row to the meter's report."""
    from floorgate.admission.limits import LimitsChange
    from floorgate.admission.usage import Usage, UsageState
    from floorgate.admission.windows import parse_window

    limits = LimitsChange(budget_tokens=100_000, estimate_tokens=7000, per=parse_window("1d"))
    Policies(store, clock).configure(Scope.parse("g/a"), expected_revision=0, owner_ref="o", limits=limits)
    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "input_tokens": 400, "output_tokens": 100, "model": "m"})
    outcome = _run(store, clock, tmp_path, _automation(store, clock, f"print({line!r})", meter="jsonl"))
    entry = Usage(store, clock).get(outcome.turn_id)
    assert entry is not None and (entry.state, entry.estimate_tokens, entry.tokens) == (UsageState.SETTLED, 7000, 500)
    assert entry.source.value == "admission"  # the row its admission held, reconciled (not a second row)


@pytest.mark.parametrize(
    ("mode", "meter", "state", "tokens"),
    [
        ("enforce", "none", "unknown", None),  # nothing reads its usage: the hold settles unknown
        ("disabled", "none", "unknown", None),
        ("disabled", "jsonl", "settled", 500),  # envelopes off: the budget still learns what it used
    ],
    ids=["no-meter", "no-meter-envelopes-off", "meter-envelopes-off"],
)
def test_a_turn_that_ended_holds_nothing_in_flight(
    store: Store, tmp_path: Path, clock: FixedClock, mode: str, meter: str, state: str, tokens: int | None
) -> None:
    from floorgate.admission.limits import LimitsChange
    from floorgate.admission.usage import Usage
    from floorgate.admission.windows import parse_window

    limits = LimitsChange(budget_tokens=100_000, estimate_tokens=7000, per=parse_window("1d"))
    Policies(store, clock).configure(Scope.parse("g/a"), limits=limits, expected_revision=0, owner_ref="o")
    line = json.dumps({"floorgate_usage": 1, "request_id": "r1", "input_tokens": 400, "output_tokens": 100, "model": "m"})
    auto = _automation(store, clock, f"print({line!r})", meter=meter)
    outcome = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode=mode).run(auto)
    assert outcome.verdict.status == "succeeded", outcome.verdict
    entry = Usage(store, clock).get(outcome.turn_id)
    assert entry is not None and (entry.state.value, entry.tokens) == (state, tokens), entry
    assert entry.counted_tokens == (7000 if tokens is None else tokens)  # unknown: the estimate still counts in full
