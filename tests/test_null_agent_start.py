"""A start without an agent (a store rebuilt without its NOT NULL constraints) holds only the lanes
of its automation, not its whole goal.

Such a start cannot be attributed to an agent, so every agent's lane of its automation reads
``state_unavailable``; for the goal's other lanes its anchor counts as a possible last start of
every agent, so a goal floor still counts from it (deny inside the window, admit after it), and a
lane no floor applies to is admitted. Reserve, readback (one lane and many) and the bulk planner
agree on when each lane is next eligible. Both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from basics import T0, raw_sql
from test_hostile_state import relax

from floorgate.admission import Admission, FixedClock, Reason, Store
from floorgate.admission.clock import to_us
from floorgate.admission.errors import CorruptState

from helpers import floor

H = timedelta(hours=1)
M = timedelta(minutes=1)


_INSERT = (
    "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind)"
    " VALUES (:t, 'g', :a, :x, :at, :at, 'confirmed', 'automatic')"
)


@pytest.fixture
def damaged(store: Store) -> Iterator[Store]:
    """Goal g with agents a1 and a2 (a2's one start on lane z at T0 - 3h, past every floor), and a
    start of automation x at T0 whose agent a rebuild without constraints lost (written as a
    restore would: with no rule, admission writes no start)."""
    relaxed = relax(store, "fg_starts", "agent_id")
    try:
        raw_sql(relaxed, _INSERT, {"t": "a2-z", "a": "a2", "x": "z", "at": to_us(T0 - 3 * H)})
        raw_sql(relaxed, _INSERT, {"t": "lost", "a": None, "x": "x", "at": to_us(T0)})
        yield relaxed
    finally:
        relaxed.close()


def _reserve(store: Store, at: timedelta, agent: str, automation: str | None, turn: str):  # type: ignore[no-untyped-def]
    clock = FixedClock(T0 + at)
    return Admission(store, clock).reserve(goal="g", agent=agent, automation=automation, turn_id=turn, trigger_time=clock.now())


@pytest.mark.parametrize(
    ("agent", "goal_floor"),
    [("a1", True), ("a2", True), ("a2", False), ("a-new", False)],
    ids=["its-own-agent-under-a-floor", "another-agent-under-a-floor", "another-agent-no-floor", "an-agent-with-no-start"],
)
def test_every_agents_lane_of_its_automation_is_held(damaged: Store, agent: str, goal_floor: bool) -> None:
    if goal_floor:
        floor(damaged, FixedClock(T0), "g", H)
    decision = _reserve(damaged, 5 * H, agent, "x", "t-x")
    assert (decision.admitted, decision.reason) == (False, Reason.STATE_UNAVAILABLE)
    admission = Admission(damaged, FixedClock(T0 + 5 * H))
    assert admission.eligibility("g", agent, "x").status == "unavailable"
    assert admission.eligibility_many([("g", agent, "x")])[("g", agent, "x")].status == "unavailable"
    with pytest.raises(CorruptState):
        admission.next_eligible_many([("g", agent, "x")])


@pytest.mark.parametrize(
    ("agent", "automation"), [("a2", "y"), ("a1", "y"), ("a2", None), ("a2", "z")], ids=["a2-y", "a1-y", "a2-agent-wide", "a2-z"]
)
def test_a_goal_floor_counts_from_it_on_every_other_lane(damaged: Store, agent: str, automation: str | None) -> None:
    floor(damaged, FixedClock(T0), "g", H)
    lane = ("g", agent, automation)
    for at in (M, H - timedelta(microseconds=1)):
        decision = _reserve(damaged, at, agent, automation, f"t-{at}")
        assert (decision.admitted, decision.reason) == (False, Reason.INTERVAL_WAIT), at
        assert decision.next_eligible_at == T0 + H
        admission = Admission(damaged, FixedClock(T0 + at))
        own = admission.eligibility(*lane)
        many = admission.eligibility_many([lane])[lane]
        planned = admission.next_eligible_many([lane])[lane]
        assert (own.status, own.next_eligible_at) == ("interval_wait", T0 + H)
        assert many.model_dump() == own.model_dump()
        assert planned == T0 + H
    admitted = _reserve(damaged, H, agent, automation, "t-after")
    assert (admitted.admitted, admitted.reason) == (True, Reason.ELIGIBLE)


@pytest.mark.parametrize("floors", [(), (("g/a1/x", H),), (("g/a2/z", H),)], ids=["no-rule", "a-floor-of-lane-x", "a-floor-of-lane-z"])
def test_a_lane_no_floor_applies_to_is_admitted(damaged: Store, floors: tuple[tuple[str, timedelta], ...]) -> None:
    for path, interval in floors:
        floor(damaged, FixedClock(T0), path, interval)
    decision = _reserve(damaged, M, "a2", "y", "t-y")
    assert (decision.admitted, decision.reason) == (True, Reason.NO_RULE)
    admission = Admission(damaged, FixedClock(T0 + M))
    assert admission.eligibility("g", "a2", "y").status == "eligible"
    assert admission.next_eligible_many([("g", "a2", "y")]) == {("g", "a2", "y"): None}


def test_its_future_anchor_is_a_clock_rollback_for_the_goal(damaged: Store) -> None:
    floor(damaged, FixedClock(T0), "g", H)
    decision = _reserve(damaged, -M, "a2", "y", "t-early")
    assert (decision.admitted, decision.reason) == (False, Reason.CLOCK_ROLLBACK)


@pytest.mark.parametrize(
    ("column", "edit"),
    [("automation_id", "automation_id = NULL"), ("anchor_us", "anchor_us = NULL")],
    ids=["its-automation-missing-too", "its-anchor-missing-too"],
)
def test_one_that_cannot_be_counted_still_holds_its_goal(damaged: Store, column: str, edit: str) -> None:
    floor(damaged, FixedClock(T0), "g", H)
    store = relax(damaged, "fg_starts", column)
    try:
        raw_sql(store, f"UPDATE fg_starts SET {edit} WHERE turn_id = 'lost'")
        decision = _reserve(store, 2 * H, "a2", "y", "t-y")
        assert (decision.admitted, decision.reason) == (False, Reason.STATE_UNAVAILABLE)
        admission = Admission(store, FixedClock(T0 + 2 * H))
        assert admission.eligibility("g", "a2", "y").status == "unavailable"
        with pytest.raises(CorruptState):
            admission.next_eligible_many([("g", "a2", "y")])
    finally:
        store.close()
