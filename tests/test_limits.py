"""Limits across runs stored like floors (CAS, reduction, provenance) and the usage ledger budgets
count, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from sqlalchemy import text

from floorgate.admission import FixedClock, InvalidInput, NotFound, Policies, ReductionNotAuthorized, RevisionConflict, Scope, Store
from floorgate.admission.errors import CorruptState
from floorgate.admission.limits import LimitKind, LimitsChange, Series, bound_limits
from floorgate.admission.usage import Prices, Usage, UsageState, lane_estimate, window_usage
from floorgate.admission.windows import NEVER, parse_window


def raw_sql(store: Store, sql: str) -> None:
    """A hand edit, outside floorgate's API."""
    with store.engine.begin() as conn:
        conn.execute(text(sql))


DAY = parse_window("1d")
BERLIN = parse_window("day@Europe/Berlin")
US = timedelta(microseconds=1)


def test_limits_are_written_read_back_and_kept_in_history(policies: Policies) -> None:
    goal = Scope.goal("g")
    rule = policies.configure(
        goal,
        expected_revision=0,
        owner_ref="alice",
        limits=LimitsChange(max_starts=3, budget_tokens=2_000_000, budget_usd=Decimal("20.5"), per=BERLIN, across_agents=True),
    )
    stored = policies.get(goal)
    assert stored is not None and stored.limits == rule.limits
    assert stored.limits.max_starts == 3 and stored.limits.starts_window == BERLIN and stored.limits.budget_usd == Decimal("20.5")
    assert stored.min_interval == timedelta(0)  # limits alone set no floor
    [change] = policies.history(goal)
    assert change.limits_before is None and change.limits_after is not None and change.limits_after["budget_usd"] == "20.5"
    # A floor written later keeps the limits.
    policies.configure(goal, min_interval=timedelta(hours=1), expected_revision=1, owner_ref="alice")
    kept = policies.get(goal)
    assert kept is not None and kept.limits == rule.limits


LOOSENINGS = [
    ("higher-count", LimitsChange(max_starts=4, per=DAY)),
    ("shorter-window", LimitsChange(max_starts=3, per=parse_window("12h"))),
    ("calendar-instead-of-rolling", LimitsChange(max_starts=3, per=parse_window("day@UTC"))),
    ("count-removed", LimitsChange(max_starts=0)),
    ("higher-token-budget", LimitsChange(budget_tokens=1_000_001, per=DAY)),
    ("token-budget-removed", LimitsChange(budget_tokens=0)),
    ("higher-usd-budget", LimitsChange(budget_usd=Decimal("5.000001"), per=DAY)),
    ("usd-budget-removed", LimitsChange(budget_usd=Decimal(0))),
    ("lower-estimate", LimitsChange(estimate_tokens=999)),
    ("estimate-removed", LimitsChange(estimate_tokens=0)),
    ("across-agents-given-up", LimitsChange(across_agents=False)),
]


@pytest.mark.parametrize("change", [x[1] for x in LOOSENINGS], ids=[x[0] for x in LOOSENINGS])
def test_every_loosening_needs_authorization(policies: Policies, change: LimitsChange) -> None:
    goal = Scope.goal("g")
    start = LimitsChange(max_starts=3, budget_tokens=1_000_000, budget_usd=Decimal(5), estimate_tokens=1000, per=DAY, across_agents=True)
    before = policies.configure(goal, expected_revision=0, owner_ref="alice", limits=start)
    with pytest.raises(ReductionNotAuthorized):
        policies.configure(goal, expected_revision=1, owner_ref="alice", limits=change)
    unchanged = policies.get(goal)
    assert unchanged is not None and unchanged.revision == 1 and unchanged.limits == before.limits
    after = policies.configure(goal, expected_revision=1, owner_ref="alice", limits=change, allow_reduction=True)
    assert after.limits != before.limits
    assert policies.history(goal)[0].reduction_authorized


TIGHTENINGS = [
    ("lower-count", LimitsChange(max_starts=2, per=DAY)),
    ("longer-window", LimitsChange(max_starts=3, per=parse_window("2d"))),
    ("lower-budget", LimitsChange(budget_tokens=10, per=DAY)),
    ("higher-estimate", LimitsChange(estimate_tokens=5000)),
    ("new-usd-budget", LimitsChange(budget_usd=Decimal(1), per=DAY)),
]


@pytest.mark.parametrize("change", [x[1] for x in TIGHTENINGS], ids=[x[0] for x in TIGHTENINGS])
def test_tightening_needs_no_authorization(policies: Policies, change: LimitsChange) -> None:
    agent = Scope.agent("g", "a")
    before = policies.configure(
        agent,
        expected_revision=0,
        owner_ref="alice",
        limits=LimitsChange(max_starts=3, budget_tokens=1_000_000, estimate_tokens=1000, per=DAY),
    )
    after = policies.configure(agent, expected_revision=1, owner_ref="alice", limits=change)
    assert after.limits == change.apply(before.limits, agent) != before.limits
    assert not policies.history(agent)[0].reduction_authorized


def test_limit_writes_are_exact_revision_cas(policies: Policies) -> None:
    scope = Scope.agent("g", "a")
    policies.configure(scope, expected_revision=0, owner_ref="alice", limits=LimitsChange(max_starts=3, per=DAY))
    with pytest.raises(RevisionConflict):
        policies.configure(scope, expected_revision=0, owner_ref="bob", limits=LimitsChange(max_starts=1, per=DAY))
    stored = policies.get(scope)
    assert stored is not None and stored.limits.max_starts == 3 and len(policies.history(scope)) == 1


BAD_CHANGES = [
    ("count-without-window", Scope.goal("g"), LimitsChange(max_starts=3), "--per"),
    ("window-alone", Scope.goal("g"), LimitsChange(per=DAY), "--per"),
    ("across-on-agent", Scope.agent("g", "a"), LimitsChange(across_agents=True), "--across"),
]


@pytest.mark.parametrize(("scope", "change", "field"), [x[1:] for x in BAD_CHANGES], ids=[x[0] for x in BAD_CHANGES])
def test_bad_limit_writes_write_nothing(policies: Policies, scope: Scope, change: LimitsChange, field: str) -> None:
    with pytest.raises(InvalidInput) as err:
        policies.configure(scope, expected_revision=0, owner_ref="alice", limits=change)
    assert err.value.field == field
    assert policies.get(scope) is None and policies.history() == []


def test_bound_limits_per_lane_goal_wide_and_tightest(policies: Policies) -> None:
    policies.configure(Scope.goal("g"), expected_revision=0, owner_ref="o", limits=LimitsChange(max_starts=10, per=DAY, across_agents=True))
    policies.configure(
        Scope.agent("g", "a"), expected_revision=0, owner_ref="o", limits=LimitsChange(max_starts=5, budget_tokens=900, per=DAY)
    )
    policies.configure(Scope.automation("g", "a", "x"), expected_revision=0, owner_ref="o", limits=LimitsChange(max_starts=2, per=BERLIN))
    rules = [(r.scope, r.revision, r.limits) for r in policies.list("g")]
    bound = bound_limits(rules, "a")
    shown = {(b.kind, b.amount, b.window.text(), b.series) for b in bound}
    assert shown == {
        (LimitKind.STARTS, 10, "1d", Series("g", None, None)),  # one series for the whole goal
        (LimitKind.STARTS, 5, "1d", Series("g", "a", None)),
        (LimitKind.STARTS, 2, "day@Europe/Berlin", Series("g", "a", "x")),
        (LimitKind.TOKENS, 900, "1d", Series("g", "a", None)),
    }


DAMAGE = [
    ("negative-count", "max_starts = -1"),
    ("count-without-window", "max_starts = 3, starts_window = NULL"),
    ("window-unparsable", "max_starts = 3, starts_window = 'fortnight'"),
    ("budget-over-cap", "budget_tokens = 9000000000000000, budget_window = '1d'"),
    ("alert-out-of-range", "max_starts = 3, starts_window = '1d', alert_at = '50,150'"),
]


@pytest.mark.parametrize("edit", [d[1] for d in DAMAGE], ids=[d[0] for d in DAMAGE])
def test_damaged_limits_are_corrupt_state_never_no_limit(store: Store, policies: Policies, edit: str) -> None:
    scope = Scope.agent("g", "a")
    policies.configure(scope, min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    raw_sql(store, f"UPDATE fg_rules SET {edit} WHERE goal_id = 'g'")
    with pytest.raises(CorruptState):
        policies.get(scope)
    good, bad = policies.scan()
    assert good == [] and len(bad) == 1
    with pytest.raises(CorruptState):  # a write cannot silently replace it either
        policies.configure(scope, expected_revision=1, owner_ref="o", limits=LimitsChange(max_starts=1, per=DAY))


# -- the usage ledger --------------------------------------------------------------------------


def test_hold_then_settle_is_idempotent_by_turn(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    assert usage.hold("t1", "g", "a", "x", 1000, "m")
    assert not usage.hold("t1", "g", "a", "x", 5, "m")  # the same turn again keeps its row
    entry, changed = usage.settle("t1", tokens=420, usd_micros=7000)
    assert changed and entry.state is UsageState.SETTLED and entry.tokens == 420 and entry.counted_tokens == 420
    again, changed = usage.settle("t1", tokens=420, usd_micros=7000)
    assert not changed and again == entry
    with pytest.raises(InvalidInput):
        usage.settle("t1", tokens=421, usd_micros=7000)
    with pytest.raises(NotFound):
        usage.settle("never-held", tokens=1)


def test_unknown_usage_keeps_its_estimate_held(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    usage.hold("t1", "g", "a", "x", 1000, "m")
    entry, _ = usage.settle("t1", tokens=None)
    assert entry.state is UsageState.UNKNOWN and entry.counted_tokens == 1000 and entry.held
    totals = usage.in_window(Series("g", "a", None), DAY)
    assert (totals.settled_tokens, totals.held_tokens) == (0, 1000)


def test_window_usage_counts_settled_and_held_and_ages_out(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    t0 = clock.now()
    usage.hold("t1", "g", "a", "x", 1000, "m")
    usage.settle("t1", tokens=600)
    clock.advance(timedelta(hours=2))
    usage.hold("t2", "g", "a", "y", 300, "m")  # in flight on another lane of the agent
    usage.hold("t3", "g", "b", "x", 50, "m")  # another agent: only goal-wide series see it
    totals = usage.in_window(Series("g", "a", None), DAY)
    assert (totals.settled_tokens, totals.held_tokens, totals.tokens) == (600, 300, 900)
    assert usage.in_window(Series("g", None, None), DAY).tokens == 950
    assert usage.in_window(Series("g", "a", "x"), DAY).tokens == 600
    assert totals.tokens_frees_at(1000, 100) is None
    assert totals.tokens_frees_at(1000, 200) == t0 + timedelta(days=1)  # t1's 600 must age out
    assert totals.tokens_frees_at(1000, 2000) == NEVER
    clock.set(t0 + timedelta(days=1) - US)
    assert usage.in_window(Series("g", "a", None), DAY).tokens == 900
    clock.set(t0 + timedelta(days=1))
    assert usage.in_window(Series("g", "a", None), DAY).tokens == 300


def test_usd_counts_reported_cost_else_the_owner_price_else_unpriced(store: Store, clock: FixedClock) -> None:
    usage, prices = Usage(store, clock), Prices(store, clock)
    usage.hold("t1", "g", "a", "x", 1000, "m")
    usage.settle("t1", tokens=500, usd_micros=12_345)  # reported cost
    usage.hold("t2", "g", "a", "x", 2_000_000, "m")  # held, priced by m
    totals = usage.in_window(Series("g", "a", None), DAY)
    assert totals.unpriced == {"m"} and totals.usd_frees_at(10**9, 0) == NEVER  # no price: fail closed
    prices.set("m", Decimal("3"), expected_revision=0, owner_ref="alice")
    totals = usage.in_window(Series("g", "a", None), DAY)
    assert totals.unpriced == frozenset() and totals.settled_usd_micros == 12_345 and totals.held_usd_micros == 6_000_000
    assert totals.usd_frees_at(10**9, 0) is None
    with pytest.raises(ReductionNotAuthorized):
        prices.set("m", Decimal("2"), expected_revision=1, owner_ref="alice")
    with pytest.raises(RevisionConflict):
        prices.set("m", Decimal("4"), expected_revision=0, owner_ref="alice")
    assert [p.usd_per_mtok_micros for p in prices.list()] == [3_000_000]


DAMAGED_USAGE = [
    ("negative-tokens", "tokens = -5, state = 'settled'"),
    ("unknown-state", "state = 'maybe'"),
    ("settled-without-usage", "state = 'settled', tokens = NULL, usd_micros = NULL"),
    ("time-out-of-range", "at_us = -1"),
]


@pytest.mark.parametrize("edit", [d[1] for d in DAMAGED_USAGE], ids=[d[0] for d in DAMAGED_USAGE])
def test_damaged_usage_is_corrupt_state(store: Store, clock: FixedClock, edit: str) -> None:
    usage = Usage(store, clock)
    usage.hold("t1", "g", "a", "x", 1000, "m")
    raw_sql(store, f"UPDATE fg_usage SET {edit} WHERE turn_id = 't1'")
    with pytest.raises(CorruptState):
        usage.in_window(Series("g", "a", None), DAY)


def test_lane_estimate_prefers_envelope_then_largest_turn_then_owner(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    now = clock.now()
    with store.read() as conn:
        assert lane_estimate(conn, "g", "a", "x", now, envelope_max_tokens=0, owner_estimate=None) is None
        assert lane_estimate(conn, "g", "a", "x", now, envelope_max_tokens=0, owner_estimate=700) == 700
    usage.hold("t1", "g", "a", "x", 10, "m")
    usage.settle("t1", tokens=1500)
    usage.hold("t2", "g", "a", "x", 10, "m")
    usage.settle("t2", tokens=900)
    with store.read() as conn:
        assert lane_estimate(conn, "g", "a", "x", now, envelope_max_tokens=0, owner_estimate=700) == 1500
        assert lane_estimate(conn, "g", "a", "x", now, envelope_max_tokens=4000, owner_estimate=700) == 4000
        later = now + timedelta(days=31)
        assert lane_estimate(conn, "g", "a", "x", later, envelope_max_tokens=0, owner_estimate=700) == 700


def test_an_app_report_settles_its_session_hold_once(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    usage.hold("hook-abc-1", "g", "a", "x", 5000, None)
    entry, changed = usage.report("stop-abc-u1", goal="g", agent="a", automation="x", tokens=321, model="m", turn_prefix="hook-abc-")
    assert changed and entry.turn_id == "hook-abc-1" and entry.tokens == 321 and entry.state is UsageState.SETTLED
    assert entry.source.value == "hook"  # the hold's row, its figures now the hook's
    again, changed = usage.report("stop-abc-u1", goal="g", agent="a", automation="x", tokens=999, model="m", turn_prefix="hook-abc-")
    assert not changed and again.tokens == 321
    other, _ = usage.report("stop-abc-u2", goal="g", agent="a", automation="x", tokens=10, turn_prefix="hook-abc-")
    assert other.turn_id == "stop-abc-u2" and other.source.value == "hook"  # no hold left: its own row
    with store.read() as conn:
        assert window_usage(conn, Series("g", "a", "x"), DAY, clock.now()).tokens == 331


def _report(usage: Usage, key: str, tokens: int | None, estimate: int = 0):  # type: ignore[no-untyped-def]
    """An end-of-turn report of session abc, as the Stop hook sends it."""
    return usage.report(
        key, goal="g", agent="a", automation="x", tokens=tokens, turn_prefix="hook-abc-", unread_key="stop-abc-unknown",
        estimate_tokens=estimate,
    )  # fmt: skip


def _states(usage: Usage) -> dict[str, tuple[str, int | None]]:
    return {e.turn_id: (e.state.value, e.tokens) for e in usage.in_window(Series("g", "a", "x"), DAY).entries}


def test_a_report_settles_its_sessions_newest_hold_and_an_interrupted_prompts_stays_held(store: Store, clock: FixedClock) -> None:
    """A prompt that never reported (interrupted) must not shift later reports onto the wrong hold."""
    usage = Usage(store, clock)
    usage.hold("hook-abc-1", "g", "a", "x", 5000, None)  # interrupted: no report ever comes
    clock.advance(timedelta(minutes=1))
    usage.hold("hook-abc-2", "g", "a", "x", 5000, None)
    entry, _ = _report(usage, "stop-abc-u2", 321)
    assert entry.turn_id == "hook-abc-2"
    assert _states(usage) == {"hook-abc-1": ("held", None), "hook-abc-2": ("settled", 321)}


@pytest.mark.parametrize("held", [True, False], ids=["its-prompt-held-an-estimate", "no-hold"])
def test_a_readable_report_corrects_the_row_an_unreadable_one_left(store: Store, clock: FixedClock, held: bool) -> None:
    """The same turn reported again once its transcript reads: one row, the reported figure."""
    usage = Usage(store, clock)
    if held:
        usage.hold("hook-abc-1", "g", "a", "x", 5000, None)
    first, _ = _report(usage, "stop-abc-unknown", None, estimate=5000)
    assert first.state is UsageState.UNKNOWN
    entry, changed = _report(usage, "stop-abc-u1", 321)
    assert changed and entry.turn_id == first.turn_id
    assert _states(usage) == {first.turn_id: ("settled", 321)}
    with store.read() as conn:
        counted = window_usage(conn, Series("g", "a", "x"), DAY, clock.now())
    assert (counted.tokens, counted.held_tokens) == (321, 0)


def test_a_newer_hold_is_settled_before_an_older_unknown_row(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    usage.hold("hook-abc-1", "g", "a", "x", 5000, None)
    _report(usage, "stop-abc-unknown", None)
    clock.advance(timedelta(minutes=1))
    usage.hold("hook-abc-2", "g", "a", "x", 5000, None)
    _report(usage, "stop-abc-u2", 321)
    assert _states(usage) == {"hook-abc-1": ("unknown", None), "hook-abc-2": ("settled", 321)}


def test_usage_recorded_after_now_still_counts(store: Store, clock: FixedClock) -> None:
    usage = Usage(store, clock)
    usage.hold("t1", "g", "a", "x", 1000, "m")
    clock.advance(-timedelta(hours=3))  # the clock went back
    assert usage.in_window(Series("g", "a", None), parse_window("1h")).held_tokens == 1000
