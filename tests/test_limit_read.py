"""A limited lane's one-statement decision (``admission._limit_read``): the definitions a process
keeps for a lane are used only while the store's are the same, so a rule changed by anyone, at any
moment, is seen by the next decision (stale limits never admit), on both backends."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest
from basics import T0, raw_sql
from sqlalchemy import text

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store, open_store
from floorgate.admission import _limit_read as limit_read
from floorgate.admission._rule import _request
from floorgate.admission.clock import to_us
from floorgate.admission.limits import LimitsChange
from floorgate.admission.usage import Prices
from floorgate.admission.windows import parse_window

from helpers import add_automation, journal_entry

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


# Starts and held estimates committed by another process after the decision's plain read (which
# may admit on what it read: 1 of 3 used, no alert due) and before its serialized step are counted
# there: on PostgreSQL the reserving statement finds the lane's limits changed since that read and
# does not admit on it (``_limit_guard``), on SQLite the locked read sees the new rows. Never one
# start or token over.
RACES = [
    pytest.param({"max_starts": 3}, "count_exhausted", id="count"),
    pytest.param({"budget_tokens": 30}, "budget_exhausted", id="tokens"),
]


@pytest.mark.parametrize("managed", [False, True], ids=["bare", "managed"])
@pytest.mark.parametrize(("amounts", "reason"), RACES)
def test_a_start_committed_after_the_plain_read_is_counted(
    store: Store, monkeypatch: pytest.MonkeyPatch, amounts: dict[str, int], reason: str, managed: bool
) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    limits = LimitsChange(**amounts, estimate_tokens=10, per=DAY, alert_at=(90,))
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    add_automation(store, clock, "x", model="m")
    admission = Admission(store, clock)
    assert _reserve(admission, "t1", clock.now()).admitted  # the lane is now known: one start, 10 tokens held
    other = open_store(store.url)
    plain = limit_read.plain
    raced: list[bool] = []

    def read_then_race(*args, **kwargs):  # type: ignore[no-untyped-def]
        found = plain(*args, **kwargs)
        if not raced:  # once, between our plain read and our serialized step (the racers' own reads pass)
            raced.append(False)
            racer = Admission(other, clock)
            raced[:] = [_reserve(racer, f"racer{i}", clock.now() - timedelta(microseconds=3 - i)).admitted for i in (1, 2)]
        return found

    monkeypatch.setattr(limit_read, "plain", read_then_race)
    try:
        clock.advance(timedelta(seconds=1))
        if managed:  # a host's reservation: its journal row in the same unit of work
            at = clock.now()
            ours = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=at, journal=journal_entry("t2", at))
        else:
            ours = _reserve(admission, "t2", clock.now())
    finally:
        other.close()
    assert raced == [True, True]
    assert (ours.admitted, ours.reason.value) == (False, reason)
    assert raw_sql(store, "SELECT count(*) FROM fg_starts") == [(3,)]


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


# A known lane gathers sums (a count and its binding start, usage as groups of equal rows), not the
# rows: each limit kind still frees at the exact instant, one microsecond before it still denies,
# in a rolling and a calendar window (a rolling budget that binds reads its rows by the slow path).
BERLIN_MIDNIGHT = datetime(2026, 12, 1, 23, tzinfo=timezone.utc)  # the day after T0's, in Berlin
FREES = [
    pytest.param("starts", "1d", T0 + timedelta(days=1), "count_exhausted", id="count-rolling"),
    pytest.param("starts", "day@Europe/Berlin", BERLIN_MIDNIGHT, "count_exhausted", id="count-calendar"),
    pytest.param("tokens", "1d", T0 + timedelta(days=1), "budget_exhausted", id="tokens-rolling"),
    pytest.param("tokens", "day@Europe/Berlin", BERLIN_MIDNIGHT, "budget_exhausted", id="tokens-calendar"),
    pytest.param("usd", "1d", T0 + timedelta(days=1), "budget_exhausted", id="usd-rolling"),
    pytest.param("usd", "day@Europe/Berlin", BERLIN_MIDNIGHT, "budget_exhausted", id="usd-calendar"),
]


@pytest.mark.parametrize(("kind", "per", "frees", "reason"), FREES)
def test_a_known_lane_frees_at_the_exact_instant(store: Store, kind: str, per: str, frees: datetime, reason: str) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    amounts = {"starts": {"max_starts": 2}, "tokens": {"budget_tokens": 20}, "usd": {"budget_usd": Decimal("0.00006")}}[kind]
    limits = LimitsChange(**amounts, estimate_tokens=10, per=parse_window(per))  # type: ignore[arg-type]
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")  # 10 tokens: 30 micro-dollars
    add_automation(store, clock, "x", model="m")
    admission = Admission(store, clock)
    for i in range(2):
        assert _reserve(admission, f"t{i}", clock.now()).admitted
        clock.advance(timedelta(hours=1))
    assert limit_read.known("g", "a", "x") is not None
    denied = _reserve(admission, "full", clock.now())
    assert (denied.admitted, denied.reason.value, denied.next_eligible_at) == (False, reason, frees)
    clock.set(frees - timedelta(microseconds=1))
    assert _reserve(admission, "before", clock.now()).reason.value == reason
    clock.set(frees)
    assert _reserve(admission, "at", clock.now()).admitted


# Damage in a known lane's window fails closed though only sums are gathered: every value the
# decoder refuses in a row is refused in a group (a negative amount, an unknown state, a time
# before the epoch, a settled turn that reports nothing, a start's anchor).
DAMAGE = [
    pytest.param("UPDATE fg_usage SET state = 'settled', tokens = -5", id="negative-tokens"),
    pytest.param("UPDATE fg_usage SET state = 'settled', tokens = 5, usd_micros = -1", id="negative-cost"),
    pytest.param("UPDATE fg_usage SET estimate_tokens = -1", id="negative-estimate"),
    pytest.param("UPDATE fg_usage SET state = 'settled'", id="settled-without-usage"),
    pytest.param("UPDATE fg_usage SET state = 'lost'", id="unknown-state"),
    pytest.param("UPDATE fg_usage SET at_us = -1", id="usage-before-epoch"),
    pytest.param("UPDATE fg_starts SET anchor_us = -1", id="start-before-epoch"),
]


@pytest.mark.parametrize("damage", DAMAGE)
def test_damage_in_a_known_lanes_window_denies(store: Store, damage: str) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _lane(store, clock, max_starts=5)
    assert _reserve(admission, "t1", clock.now()).admitted
    with store.write() as conn:
        conn.execute(text(damage))
    clock.advance(timedelta(seconds=1))
    denied = _reserve(admission, "t2", clock.now())
    assert (denied.admitted, denied.reason.value) == (False, "state_unavailable")


# A damaged start fails closed though the window holds no valid start: the window's count is 0
# and its earliest anchor is the damage probe's. Two shapes: the lane's own older start damaged
# (its newest start, which the floor's facts read, is intact), and another agent's start in a goal
# series. Both were once admitted as eligible with the lane known.
@pytest.mark.parametrize("across", [False, True], ids=["lane", "goal-across-agents"])
def test_a_damaged_start_denies_when_the_window_is_otherwise_empty(store: Store, across: bool) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    scope = "g" if across else "g/a"
    limits = LimitsChange(max_starts=3, per=DAY, **({"across_agents": True} if across else {}))
    Policies(store, clock).configure(Scope.parse(scope), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    add_automation(store, clock, "x")
    add_automation(store, clock, "y", agent="b")
    admission = Admission(store, clock)
    assert _reserve(admission, "t0", clock.now()).admitted
    other = admission.reserve(goal="g", agent="b", automation="y", turn_id="u0", trigger_time=clock.now())
    clock.advance(timedelta(hours=1))
    assert _reserve(admission, "t1", clock.now()).admitted
    damaged = "u0" if across else "t0"
    assert other.admitted
    with store.write() as conn:
        conn.execute(text("UPDATE fg_starts SET anchor_us = -1 WHERE turn_id = :t"), {"t": damaged})
    clock.advance(timedelta(days=2))
    assert limit_read.known("g", "a", "x") is not None  # the fast read answers, not the slow one
    denied = _reserve(admission, "t2", clock.now())
    assert (denied.admitted, denied.reason.value) == (False, "state_unavailable")


# A known lane's limit read covers its window, not its history: old starts and settled turns of
# the agent, outside the window, add no work to it. Counted, not timed: on SQLite the steps of its
# virtual machine, on PostgreSQL the rows its plan's scans of the starts and the usage read
# (EXPLAIN ANALYZE, sequential scans off: tables this small would be scanned whole, fairly). The
# series were once read with one OR of the window's range and the damaged one, which SQLite
# answered by walking every start of the agent, and the largest recent turn by reading each of the
# agent's rows of the last 30 days. (The limit read alone: the hot facts before it are the floor's.)
def test_a_known_lanes_limit_read_covers_its_window_not_its_history(store: Store) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    limits = LimitsChange(max_starts=1000, budget_tokens=10**9, budget_usd=Decimal(1000), estimate_tokens=10, per=DAY)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    admission = Admission(store, clock)
    assert _reserve(admission, "t1", clock.now()).admitted  # the slow path: the lane is now known
    clock.advance(timedelta(minutes=1))
    work = _vm_steps if store.dialect == "sqlite" else _rows_read
    before = work(store, admission, clock, "d1")
    old = [{"t": f"old{k}", "at": to_us(T0 - timedelta(days=2, minutes=k))} for k in range(500)]
    with store.write() as conn:
        conn.execute(
            text(
                "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind, confirmed_at_us) "
                "VALUES (:t, 'g', 'a', 'x', :at, :at, 'confirmed', 'automatic', :at)"
            ),
            old,
        )
        conn.execute(
            text(
                "INSERT INTO fg_usage (turn_id, goal_id, agent_id, automation_id, at_us, state, model, estimate_tokens, tokens, source) "
                "VALUES (:t, 'g', 'a', 'x', :at, 'settled', 'm', 10, 5, 'meter')"
            ),
            old,
        )
    after = work(store, admission, clock, "d2")
    assert after < before + 50, (before, after)  # 500 starts and turns read would be far more


def _limit_read(store: Store, admission: Admission, clock: FixedClock, turn: str) -> tuple[str, dict]:  # type: ignore[type-arg]
    """A denial (the lane known), then its limit read's SQL and parameters at that instant."""
    denied = _reserve(admission, turn, clock.now())
    assert (denied.admitted, denied.reason.value) == (False, "interval_wait")
    lane = limit_read.known("g", "a", "x")
    assert lane is not None
    req = _request("g", "a", "x", turn, clock.now(), None)
    sql = limit_read.statement(store.dialect, store.relaxed, lane.shape, False)  # ``:name`` form (``Store.bind`` for PostgreSQL)
    return sql, limit_read.known_params(lane, req, clock.now())


def _vm_steps(store: Store, admission: Admission, clock: FixedClock, turn: str) -> int:
    """SQLite: the virtual-machine steps of the limit read."""
    sql, params = _limit_read(store, admission, clock, turn)
    raw = store._hot_connection().driver_connection
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    raw.set_progress_handler(step, 1)
    try:
        raw.execute(sql, params).fetchone()
    finally:
        raw.set_progress_handler(None, 1)
    return steps[0]


def _rows_read(store: Store, admission: Admission, clock: FixedClock, turn: str) -> int:
    """PostgreSQL: the rows the limit read reads from the starts and the usage (each scan's rows,
    and those its filters removed), as EXPLAIN ANALYZE counts them."""
    import psycopg

    text, args = store.bind(*_limit_read(store, admission, clock, turn))
    with store.engine.begin() as conn:
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")
        cur = psycopg.RawCursor(conn.connection.driver_connection)  # the store's own ``$n`` text
        cur.execute("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, FORMAT JSON) " + text, args)
        plan = cur.fetchone()[0]
    found = plan if isinstance(plan, list) else json.loads(plan)

    def read(node: dict) -> int:  # type: ignore[type-arg]
        own = 0
        if node.get("Relation Name") in ("fg_starts", "fg_usage"):
            own = (
                node["Actual Rows"] * node["Actual Loops"]
                + node.get("Rows Removed by Filter", 0)
                + node.get("Rows Removed by Index Recheck", 0)
            )
        return own + sum(read(child) for child in node.get("Plans", []))

    return read(found[0]["Plan"])


def test_a_lane_without_an_automation_has_no_model(store: Store) -> None:
    """A lane with no automation prices its usage with no model (the highest price known), on the
    slow path and the one statement alike, even when an automation's id is the empty text."""
    clock = FixedClock(T0)
    limits = LimitsChange(budget_usd=Decimal("0.05"), estimate_tokens=10_000, per=parse_window("1d"))
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    prices = Prices(store, clock)
    prices.set("m", Decimal(1), expected_revision=0, owner_ref="o")
    prices.set("big", Decimal(1000), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    raw_sql(store, "UPDATE fg_automations SET automation_id = '' WHERE automation_id = 'x'")
    admission = Admission(store, clock)
    limit_read.forget_all()
    for turn in ("d0", "d1", "d2"):  # learnt, then the one statement
        clock.advance(timedelta(minutes=1))
        found = admission.denial(goal="g", agent="a", automation=None, turn_id=turn, trigger_time=clock.now())
        assert found is not None and found.reason.value == "budget_exhausted"
    assert limit_read.known("g", "a", None) is not None
    assert not admission.reserve(goal="g", agent="a", automation=None, turn_id="t1", trigger_time=clock.now()).admitted
