"""A limited lane's one-statement decision (``admission._limit_read``): the definitions a process
keeps for a lane are used only while the store's are the same, so a rule changed by anyone, at any
moment, is seen by the next decision (stale limits never admit), on both backends."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal

from basics import T0
from sqlalchemy import text

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store, open_store
from floorgate.admission import _limit_read as limit_read
from floorgate.admission.limits import LimitsChange
from floorgate.admission.usage import Prices
from floorgate.admission.windows import parse_window

from helpers import add_automation

DAY = parse_window("1d")


def _lane(store: Store, clock: FixedClock, max_starts: int) -> Admission:
    limits = LimitsChange(max_starts=max_starts, budget_tokens=10_000, budget_usd=Decimal(5), estimate_tokens=10, per=DAY)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    return Admission(store, clock)


def _reserve(admission: Admission, turn: str, at: datetime):  # type: ignore[no-untyped-def]
    return admission.reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=at)


def _tighten(url: str, clock: FixedClock) -> None:
    """Another process lowers the count to one start a day."""
    other = open_store(url)
    try:
        Policies(other, clock).configure(Scope.parse("g/a"), expected_revision=1, owner_ref="o", limits=LimitsChange(max_starts=1, per=DAY))
    finally:
        other.close()


def test_a_rule_changed_between_decisions_denies_the_next(store: Store) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _lane(store, clock, max_starts=5)
    assert _reserve(admission, "t1", clock.now()).admitted  # the slow path: the lane is now known
    assert limit_read.known("g", "a", "x") is not None
    _tighten(store.url, clock)
    clock.advance(timedelta(seconds=1))
    denied = _reserve(admission, "t2", clock.now())
    assert (denied.admitted, denied.reason.value) == (False, "count_exhausted")
    known = limit_read.known("g", "a", "x")
    assert known is not None and [b.amount for b in known.bound if b.kind.value == "starts"] == [1]  # learnt again


class _RacingClock(FixedClock):
    """Runs ``race`` once, at its ``at``-th reading (a change committed in the middle of a decision)."""

    def __init__(self, start: datetime, at: int) -> None:
        super().__init__(start)
        self.readings = 0
        self.at = at
        self.race = lambda: None

    def now(self) -> datetime:
        self.readings += 1
        if self.readings == self.at:
            self.race()
        return super().now()


def test_a_rule_changed_after_the_plain_read_is_seen_under_the_lock(store: Store) -> None:
    """The change commits after the decision's plain read (which may admit on the old count) and
    before its serialized read: that read's definitions differ from the kept ones, so it is checked
    by the slow path and denies."""
    limit_read.forget_all()
    admission = _lane(store, FixedClock(T0), max_starts=5)
    assert _reserve(admission, "t1", T0).admitted
    clock = _RacingClock(T0 + timedelta(seconds=1), at=3)  # 1-2: the plain read's; 3: the serialized one's
    clock.race = lambda: _tighten(store.url, FixedClock(T0))
    denied = _reserve(Admission(store, clock), "t2", clock.now())
    assert clock.readings >= 3
    assert (denied.admitted, denied.reason.value) == (False, "count_exhausted")


def test_a_hand_damaged_limit_denies_even_when_the_lane_is_known(store: Store) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _lane(store, clock, max_starts=5)
    assert _reserve(admission, "t1", clock.now()).admitted
    with store.write() as conn:
        conn.execute(text("UPDATE fg_rules SET budget_window = 'fortnight' WHERE goal_id = 'g'"))
    clock.advance(timedelta(seconds=1))
    denied = _reserve(admission, "t2", clock.now())
    assert (denied.admitted, denied.reason.value) == (False, "state_unavailable")


def test_limits_removed_leave_the_floor_alone(store: Store) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _lane(store, clock, max_starts=1)
    assert _reserve(admission, "t1", clock.now()).admitted
    Policies(store, clock).configure(
        Scope.parse("g/a"),
        expected_revision=1,
        owner_ref="o",
        limits=LimitsChange(max_starts=0, budget_tokens=0, budget_usd=Decimal(0)),
        allow_reduction=True,
    )
    clock.advance(timedelta(seconds=1))
    assert _reserve(admission, "t2", clock.now()).admitted
    assert limit_read.known("g", "a", "x") is None


def test_a_known_lane_decides_as_the_slow_path_does(store: Store) -> None:
    """The same decisions, day after day, with the lane known and with it forgotten before each."""
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _lane(store, clock, max_starts=3)
    days = []
    for forget in (False, True):
        found = []
        for i in range(4):
            if forget:
                limit_read.forget_all()
            d = _reserve(admission, f"{forget}-{i}", clock.now())
            found.append((d.admitted, d.reason.value, d.next_eligible_at - d.decided_at if d.next_eligible_at else None))
            clock.advance(timedelta(minutes=1))
        days.append(found)
        clock.advance(timedelta(days=1))
    assert days[0] == days[1]
    assert [x[1] for x in days[0]] == ["eligible", "eligible", "eligible", "count_exhausted"]
