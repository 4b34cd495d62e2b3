"""Readback of counts and budgets, on SQLite and PostgreSQL: one service (``budget_readback``)
answers used, held, left and when each limit frees; a spent limit never reads as eligible (the
verdict names the binding limit, ``next_eligible_at`` is the latest of floor and limits); a lane
with only limits reads as limited, not ``no_rule``; a status of lanes without limits pays nothing
for them."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from test_round_trips import on_the_wire

from floorgate.admission import Admission, FixedClock, Policies, Reason, Scope, Store
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window
from floorgate.scheduler.app.budget_readback import BudgetReadback
from floorgate.scheduler.app.readback import Readback, ReadbackState
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.views.present import readback_doc
from floorgate.scheduler.views.present_status import status_text

from helpers import add_automation

T0 = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
SECOND = timedelta(seconds=1)


def limit(store: Store, clock: FixedClock, path: str, change: LimitsChange | None, floor: timedelta | None = None) -> None:
    policies = Policies(store, clock)
    scope = Scope.parse(path)
    current = policies.get(scope)
    policies.configure(scope, expected_revision=current.revision if current else 0, owner_ref="o", min_interval=floor, limits=change)


def start(store: Store, clock: FixedClock, at: datetime, turn: str, automation: str = "x") -> None:
    clock.set(at)
    decision = Admission(store, clock).reserve(
        goal="g", agent="a", automation=automation, turn_id=turn, trigger_time=at, manual_reason="test"
    )
    assert decision.admitted, decision


def two_starts_per_day(store: Store, clock: FixedClock, floor: timedelta = SECOND) -> None:
    """Automation g/a/x with a floor (today's admission records starts only under one) and at most
    2 starts per rolling day, both spent: at T0 and T0+1h."""
    add_automation(store, clock)
    limit(store, clock, "g", None, floor=floor)
    limit(store, clock, "g/a", LimitsChange(max_starts=2, per=parse_window("1d")))
    start(store, clock, T0, "t1")
    start(store, clock, T0 + timedelta(hours=1), "t2")


def test_a_spent_count_reads_limit_wait_naming_it_until_the_first_start_leaves_the_window(store: Store, clock: FixedClock) -> None:
    two_starts_per_day(store, clock)
    clock.set(T0 + timedelta(hours=2))
    rb = Readback(store, clock).automation("x")
    assert rb.state is ReadbackState.LIMIT_WAIT
    assert rb.eligibility is not None and rb.eligibility.reason is Reason.COUNT_EXHAUSTED
    assert rb.eligibility.next_eligible_at == T0 + timedelta(days=1)
    assert "2 starts per 1d at g/a" in rb.detail and "count_exhausted" in rb.detail
    [doc] = readback_doc(rb)["limits"]
    assert (doc["kind"], doc["used"], doc["held"], doc["left"], doc["exhausted"]) == ("starts", 2, 0, 0, True)
    assert doc["frees_at"] == "2026-12-02T09:00:00Z"
    rows = rb.fires(3, T0 + timedelta(hours=2))
    assert rows and all(r.runs_at >= T0 + timedelta(days=1) for r in rows if r.runs_at is not None)  # none runs before it frees


def test_the_floor_binds_when_it_opens_after_the_limit_frees(store: Store, clock: FixedClock) -> None:
    two_starts_per_day(store, clock, floor=timedelta(days=2))
    clock.set(T0 + timedelta(hours=2))
    e = Readback(store, clock).automation("x").eligibility
    assert e is not None and (e.status, e.reason) == ("interval_wait", Reason.INTERVAL_WAIT)
    assert e.next_eligible_at == T0 + timedelta(hours=1) + timedelta(days=2)  # the later of the two


def test_a_lane_with_only_limits_reads_limited_not_no_rule(store: Store, clock: FixedClock) -> None:
    add_automation(store, clock)
    limit(store, clock, "g/a", LimitsChange(max_starts=3, per=parse_window("1d")))
    rb = Readback(store, clock).automation("x")
    assert rb.eligibility is not None and rb.eligibility.reason is not Reason.NO_RULE
    assert rb.state is ReadbackState.ELIGIBLE and rb.limits is not None and [x.left for x in rb.limits.states] == [3]
    limit(store, clock, "g/b", LimitsChange(max_starts=3, per=parse_window("1d")))  # an agent with no automation
    [lane] = Readback(store, clock).overview().lanes
    assert (lane.agent_id, lane.reason) == ("b", Reason.ELIGIBLE)


def test_a_budget_with_no_estimate_blocks_and_says_so(store: Store, clock: FixedClock) -> None:
    add_automation(store, clock)
    limit(store, clock, "g/a", LimitsChange(budget_tokens=1000, per=parse_window("1d")))
    rb = Readback(store, clock).automation("x")
    assert rb.state is ReadbackState.LIMIT_WAIT and rb.eligibility is not None
    assert rb.eligibility.reason is Reason.BUDGET_EXHAUSTED and rb.eligibility.next_eligible_at is None
    assert "cannot be checked: no estimate" in rb.detail and "--estimate-tokens" in rb.detail
    assert "raise" not in rb.detail  # raising the budget would not let a start through
    assert rb.fires(3, T0) and not any(row.admitted for row in rb.fires(3, T0))  # fail closed: no fire runs


def test_status_shows_each_limit_of_each_automation(store: Store, clock: FixedClock) -> None:
    two_starts_per_day(store, clock)
    add_automation(store, clock, "y")
    clock.set(T0 + timedelta(hours=2))
    text = status_text(Readback(store, clock).overview())
    assert "  x: limit 2 starts per 1d at g/a: used 2, held 0, left 0; exhausted until 2026-12-02T09:00:00Z" in text
    assert "  y: limit 2 starts per 1d at g/a: used 2, held 0, left 0; exhausted until 2026-12-02T09:00:00Z" in text


def test_lanes_without_limits_never_read_the_limits(store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(3):
        add_automation(store, clock, f"x{i}")
    limit(store, clock, "g", None, floor=SECOND)

    def read(*_a: object) -> object:
        raise AssertionError("a lane without limits read its limit states")

    monkeypatch.setattr(BudgetReadback, "_states", read)
    states = [rb.state for rb in Readback(store, clock).many()]
    assert states == [ReadbackState.ELIGIBLE] * 3


def test_a_status_of_lanes_without_limits_costs_the_same_statements_for_3_and_30(store: Store, clock: FixedClock) -> None:
    limit(store, clock, "g", None, floor=SECOND)
    counts = {}
    for size in (3, 30):
        for i in range(size):
            if i >= 3 or size == 3:
                add_automation(store, clock, f"x{i:02}")
        readback = Readback(store, clock)
        readback.many()  # warm
        with on_the_wire(store) as counts[size]:
            assert len(readback.many()) == size
    assert counts[3] == counts[30]


HOURLY = "DTSTART:20261201T093000Z RRULE:FREQ=HOURLY"


def test_preview_denies_the_fires_a_count_would_deny_its_own_earlier_starts_included(store: Store, clock: FixedClock) -> None:
    add_automation(store, clock, schedule=HOURLY)
    limit(store, clock, "g", None, floor=SECOND)
    limit(store, clock, "g/a", LimitsChange(max_starts=3, per=parse_window("1d")))
    start(store, clock, T0, "t1")  # one of three spent: two of the coming fires run
    preview = Readback(store, clock).preview("x", 4)
    assert [(r.admitted, r.denied_by) for r in preview.rows] == [
        (True, None), (True, None), (False, "count_exhausted"), (False, "count_exhausted"),
    ]  # fmt: skip


def test_preview_of_a_spent_count_denies_every_fire_until_it_frees(store: Store, clock: FixedClock) -> None:
    two_starts_per_day(store, clock)
    clock.set(T0 + timedelta(hours=2))
    add_automation(store, clock, "h", schedule=HOURLY)
    preview = Readback(store, clock).preview("h", 3)
    assert [(r.admitted, r.denied_by, r.eligible_at) for r in preview.rows] == [(False, "count_exhausted", T0 + timedelta(days=1))] * 3


def test_automation_show_names_the_spent_limit_of_a_fire_as_preview_does(store: Store, clock: FixedClock) -> None:
    two_starts_per_day(store, clock)
    clock.set(T0 + timedelta(hours=2))
    add_automation(store, clock, "h", schedule=HOURLY)
    shown = Floorgate(store, clock=clock).automations.show("h", fires=3, ticks=1).fires
    previewed = Readback(store, clock).preview("h", 3).rows
    assert [(r.admitted, r.denied_by) for r in shown] == [(r.admitted, r.denied_by) for r in previewed]
    assert [r.denied_by for r in shown] == ["count_exhausted"] * 3  # not read as the floor


def test_preview_of_a_budget_denies_the_fires_the_estimate_would_cross(store: Store, clock: FixedClock) -> None:
    add_automation(store, clock, schedule=HOURLY)
    limit(store, clock, "g", None, floor=SECOND)
    limit(store, clock, "g/a", LimitsChange(budget_tokens=25_000, per=parse_window("1d"), estimate_tokens=10_000))
    preview = Readback(store, clock).preview("x", 3)
    assert [(r.admitted, r.denied_by) for r in preview.rows] == [(True, None), (True, None), (False, "budget_exhausted")]


def test_preview_says_when_a_limit_its_own_starts_spent_frees(store: Store, clock: FixedClock) -> None:
    """A fire denied by what the preview's own earlier starts spent says when it may run again:
    a calendar budget at the next period's start; a rolling count no earlier than its first start
    leaves the window (here exactly then: the store holds none of the window's starts)."""
    add_automation(store, clock, schedule=HOURLY)
    limit(store, clock, "g", None, floor=SECOND)
    limit(store, clock, "g/a", LimitsChange(budget_tokens=25_000, per=parse_window("day@UTC"), estimate_tokens=10_000))
    rows = Readback(store, clock).preview("x", 3).rows
    assert [(r.admitted, r.denied_by, r.eligible_at) for r in rows][2] == (
        False,
        "budget_exhausted",
        datetime(2026, 12, 2, tzinfo=timezone.utc),
    )
    add_automation(store, clock, "y", schedule=HOURLY, agent="b")
    limit(store, clock, "g/b", LimitsChange(max_starts=2, per=parse_window("6h")))
    rows = Readback(store, clock).preview("y", 3).rows
    first = rows[0].runs_at
    assert first is not None and [(r.admitted, r.denied_by) for r in rows] == [(True, None), (True, None), (False, "count_exhausted")]
    assert rows[2].eligible_at == first + timedelta(hours=6)
