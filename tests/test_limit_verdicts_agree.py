"""Readback and reserve give one verdict for a lane a count or budget blocks, on SQLite and
PostgreSQL with a fake clock: at the same instant the readback's reason and ``next_eligible_at``
(``Admission.eligibility``, and the automation readback every surface renders) equal what
``reserve`` returns, for counts and token budgets over rolling and calendar windows; one
microsecond before the window frees both still deny, at it reserve admits and readback said
eligible. Both are judged by the same rows of ``admission.decide.checks``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import NamedTuple

import pytest

from floorgate.admission import Admission, FixedClock, Policies, Reason, Scope, Store
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window
from floorgate.scheduler.app.readback import Readback

from helpers import add_automation

T0 = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)  # 10:00 in Berlin
BERLIN_MIDNIGHT = datetime(2026, 12, 1, 23, tzinfo=timezone.utc)
US = timedelta(microseconds=1)


class Case(NamedTuple):
    limits: LimitsChange
    reason: Reason
    frees_at: datetime | None  # None: not by waiting
    floor: timedelta = timedelta(seconds=1)


def _tokens(per: str) -> LimitsChange:
    # Two starts hold 10k each; a third would cross 25k until the first one's hold ages out.
    return LimitsChange(budget_tokens=25_000, per=parse_window(per), estimate_tokens=10_000)


CASES = {
    "count-rolling": Case(LimitsChange(max_starts=2, per=parse_window("1d")), Reason.COUNT_EXHAUSTED, T0 + timedelta(days=1)),
    "count-calendar": Case(LimitsChange(max_starts=2, per=parse_window("day@Europe/Berlin")), Reason.COUNT_EXHAUSTED, BERLIN_MIDNIGHT),
    "budget-rolling": Case(_tokens("1d"), Reason.BUDGET_EXHAUSTED, T0 + timedelta(days=1)),
    "budget-calendar": Case(_tokens("day@Europe/Berlin"), Reason.BUDGET_EXHAUSTED, BERLIN_MIDNIGHT),
    # The floor opens after the count frees: the floor binds, in both.
    "floor-binds-over-count": Case(
        LimitsChange(max_starts=2, per=parse_window("1d")), Reason.INTERVAL_WAIT, T0 + timedelta(hours=1, days=2), timedelta(days=2)
    ),
}


def _configure(store: Store, clock: FixedClock, floor: timedelta, change: LimitsChange | None) -> None:
    policies = Policies(store, clock)
    policies.configure(Scope.parse("g"), expected_revision=0, owner_ref="o", min_interval=floor)
    if change is not None:
        policies.configure(Scope.parse("g/a"), expected_revision=0, owner_ref="o", limits=change)


def _reserve(store: Store, clock: FixedClock, at: datetime, turn: str, manual: str | None = None):  # type: ignore[no-untyped-def]
    clock.set(at)
    return Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=at, manual_reason=manual)


def _agree(store: Store, clock: FixedClock, at: datetime, turn: str):  # type: ignore[no-untyped-def]
    """Readback's verdicts at ``at``, then reserve's at the same instant: they must be one (an
    admitted decision reports the next start after its own, so only its reason is compared)."""
    clock.set(at)
    lane = Admission(store, clock).eligibility("g", "a", "x")
    shown = Readback(store, clock).automation("x").eligibility
    decision = _reserve(store, clock, at, turn)
    assert shown is not None
    if decision.admitted:
        assert (lane.reason, shown.reason) == (Reason.ELIGIBLE, Reason.ELIGIBLE) == (decision.reason, decision.reason)
        return lane, decision
    assert (lane.reason, lane.next_eligible_at) == (decision.reason, decision.next_eligible_at)
    assert (shown.reason, shown.next_eligible_at) == (decision.reason, decision.next_eligible_at)
    return lane, decision


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_a_blocked_lane_reads_back_what_reserve_decides_until_the_instant_it_frees(store: Store, clock: FixedClock, case: Case) -> None:
    add_automation(store, clock)
    _configure(store, clock, case.floor, case.limits)
    manual = "seed" if case.floor > timedelta(seconds=1) else None  # the second start inside a long floor
    assert _reserve(store, clock, T0, "t1").admitted
    assert _reserve(store, clock, T0 + timedelta(hours=1), "t2", manual).admitted
    lane, decision = _agree(store, clock, T0 + timedelta(hours=2), "t3")
    assert (decision.admitted, decision.reason, decision.next_eligible_at) == (False, case.reason, case.frees_at)
    assert lane.status == ("interval_wait" if case.reason is Reason.INTERVAL_WAIT else "limit_wait")
    assert case.frees_at is not None
    lane, decision = _agree(store, clock, case.frees_at - US, "t4")
    assert (decision.admitted, decision.reason) == (False, case.reason)
    lane, decision = _agree(store, clock, case.frees_at, "t5")
    assert decision.admitted and (lane.status, lane.reason) == ("eligible", Reason.ELIGIBLE)


def test_a_budget_no_wait_frees_reads_no_time_in_both_even_after_a_floor_elapsed(store: Store, clock: FixedClock) -> None:
    """A token budget with no estimate (fail closed) frees by no wait: neither side reports the
    elapsed floor's instant as the time it may start."""
    add_automation(store, clock)
    _configure(store, clock, timedelta(hours=1), None)
    assert _reserve(store, clock, T0, "t1").admitted
    policies = Policies(store, clock)
    current = policies.get(Scope.parse("g/a"))
    policies.configure(
        Scope.parse("g/a"),
        expected_revision=current.revision if current else 0,
        owner_ref="o",
        limits=LimitsChange(budget_tokens=1000, per=parse_window("1d")),
    )
    lane, decision = _agree(store, clock, T0 + timedelta(hours=3), "t2")
    assert (decision.reason, decision.next_eligible_at, lane.status) == (Reason.BUDGET_EXHAUSTED, None, "limit_wait")


def test_the_readback_judges_the_limits_it_shows_without_reading_them_again(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One read of a lane's limits serves the verdict and what is shown beside it: admission's own
    check is not called for a readback (one automation, or a status of many)."""
    from floorgate.admission import gate

    add_automation(store, clock, "y")
    case = CASES["count-rolling"]
    add_automation(store, clock)
    _configure(store, clock, case.floor, case.limits)
    assert _reserve(store, clock, T0, "t1").admitted
    assert _reserve(store, clock, T0 + timedelta(hours=1), "t2").admitted
    clock.set(T0 + timedelta(hours=2))

    def check_lane(*_a: object) -> object:
        raise AssertionError("the readback read the lane's limits twice")

    monkeypatch.setattr(gate, "check_lane", check_lane)
    one = Readback(store, clock).automation("x").eligibility
    many = [rb.eligibility for rb in Readback(store, clock).many()]
    assert one is not None and (one.reason, one.next_eligible_at) == (Reason.COUNT_EXHAUSTED, case.frees_at)
    assert [(e.reason, e.next_eligible_at) for e in many if e is not None] == [(Reason.COUNT_EXHAUSTED, case.frees_at)] * 2
