"""Where each limit stands for a lane (the facts count and budget checks decide from), on SQLite
and PostgreSQL: every limit kind x scope x window type, exact to the microsecond."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from floorgate.admission import Admission, FixedClock, Policies, Reason, Scope, Store
from floorgate.admission.budgets import binding, limit_states
from floorgate.admission.limits import LimitKind, LimitsChange, bound_limits
from floorgate.admission.usage import Prices, Usage
from floorgate.admission.windows import NEVER, parse_window

US = timedelta(microseconds=1)
T0 = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)


def configure(policies: Policies, path: str, change: LimitsChange) -> None:
    scope = Scope.parse(path)
    current = policies.get(scope)
    policies.configure(scope, expected_revision=current.revision if current else 0, owner_ref="o", limits=change)


def states(
    store: Store, policies: Policies, agent: str, automation: str, now: datetime, estimate: int | None = 100, model: str | None = "m"
):  # type: ignore[no-untyped-def]
    rules = [
        (r.scope, r.revision, r.limits)
        for r in policies.list("g")
        if r.scope.agent_id in (None, agent) and r.scope.automation_id in (None, automation)
    ]
    with store.read() as conn:
        return limit_states(conn, bound_limits(rules, agent), now, estimate_tokens=estimate, model=model)


def start(store: Store, clock: FixedClock, at: datetime, agent: str, automation: str, turn: str) -> None:
    clock.set(at)
    decision = Admission(store, clock).reserve(
        goal="g", agent=agent, automation=automation, turn_id=turn, trigger_time=at, manual_reason="test"
    )
    assert decision.admitted, decision


SCOPES = [
    # (id, where the limit is set, whose starts count toward lane a/x, whose do not)
    ("goal-across-agents", "g", True, [("b", "y")], []),
    ("goal-per-agent", "g", False, [("a", "y")], [("b", "y")]),
    ("agent", "g/a", False, [("a", "y")], [("b", "x")]),
    ("automation", "g/a/x", False, [], [("a", "y")]),
]
WINDOWS = [
    ("rolling", "1h", T0 + timedelta(minutes=10), T0 + timedelta(hours=1, minutes=10)),
    (
        "calendar-dst-day",
        "day@Europe/Berlin",
        datetime(2026, 3, 29, 12, tzinfo=timezone.utc),
        datetime(2026, 3, 29, 22, tzinfo=timezone.utc),
    ),
]


@pytest.mark.parametrize(("path", "across", "counted", "ignored"), [x[1:] for x in SCOPES], ids=[x[0] for x in SCOPES])
@pytest.mark.parametrize(("per", "first", "frees"), [w[1:] for w in WINDOWS], ids=[w[0] for w in WINDOWS])
def test_starts_per_window(store: Store, clock: FixedClock, policies: Policies, path, across, counted, ignored, per, first, frees) -> None:  # type: ignore[no-untyped-def]
    # Two starts fill the window: a/x's own, then one that counts only under the limit's series.
    # (Today's admission records starts only under a floor; the count check will record them itself.)
    policies.configure(Scope.goal("g"), min_interval=timedelta(seconds=1), expected_revision=0, owner_ref="o")
    configure(policies, path, LimitsChange(max_starts=2, per=parse_window(per), across_agents=True if across else None))
    start(store, clock, first, "a", "x", "t1")
    for i, (agent, automation) in enumerate(ignored):
        start(store, clock, first + timedelta(minutes=1 + i), agent, automation, f"o{i}")
    now = first + timedelta(minutes=5)
    [open_] = states(store, policies, "a", "x", now)
    assert open_.limit.kind is LimitKind.STARTS and (open_.used, open_.blocked, open_.frees_at) == (1, False, None)
    second = [*counted, ("a", "x")][0]
    start(store, clock, first + timedelta(minutes=6), *second, "t2")
    [full] = states(store, policies, "a", "x", now + timedelta(minutes=2))
    assert full.blocked and full.used == 2 and full.left == 0
    expected = frees  # rolling: the first start leaves; calendar: the next local midnight (a 23 h day)
    assert full.frees_at == expected
    [before] = states(store, policies, "a", "x", expected - US)
    assert before.blocked  # one microsecond before: still full
    [at] = states(store, policies, "a", "x", expected)
    assert not at.blocked  # at it: one more fits


def test_token_budget_counts_settled_and_held_and_frees_exactly(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(budget_tokens=1000, per=parse_window("1d")))
    usage = Usage(store, clock)
    clock.set(T0)
    usage.hold("t1", "g", "a", "x", 900, "m")
    usage.settle("t1", tokens=600)
    clock.set(T0 + timedelta(hours=1))
    usage.hold("t2", "g", "a", "y", 300, "m")  # in flight
    now = T0 + timedelta(hours=2)
    [fits] = states(store, policies, "a", "x", now, estimate=100)
    assert (fits.used, fits.held, fits.need, fits.blocked, fits.left) == (600, 300, 100, False, 100)
    [over] = states(store, policies, "a", "x", now, estimate=101)
    assert over.blocked and over.frees_at == T0 + timedelta(days=1)  # t1's 600 must age out
    assert states(store, policies, "a", "x", T0 + timedelta(days=1) - US, estimate=101)[0].blocked
    assert not states(store, policies, "a", "x", T0 + timedelta(days=1), estimate=101)[0].blocked
    [never] = states(store, policies, "a", "x", now, estimate=1001)
    assert never.blocked and never.frees_at == NEVER
    [unknown] = states(store, policies, "a", "x", now, estimate=None)
    assert unknown.blocked and unknown.problem is not None and "--estimate-tokens" in unknown.problem


def test_usd_budget_fails_closed_without_a_price(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g", LimitsChange(budget_usd=Decimal("1"), per=parse_window("day@UTC"), across_agents=True))
    usage = Usage(store, clock)
    clock.set(T0)
    usage.hold("t1", "g", "b", "y", 1000, "m")
    usage.settle("t1", tokens=1000, usd_micros=400_000)  # $0.40 reported
    [unpriced] = states(store, policies, "a", "x", T0, estimate=100_000, model="m")
    assert unpriced.blocked and unpriced.problem is not None and "policy price" in unpriced.problem
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")  # $3 per million tokens
    [priced] = states(store, policies, "a", "x", T0, estimate=100_000, model="m")  # $0.30 more fits
    assert (priced.used, priced.need, priced.blocked) == (400_000, 300_000, False)
    [over] = states(store, policies, "a", "x", T0, estimate=300_000, model="m")  # $0.90 does not
    assert over.blocked and over.frees_at == datetime(2026, 12, 2, tzinfo=timezone.utc)


def test_the_binding_limit_is_the_one_that_frees_last(store: Store, clock: FixedClock, policies: Policies) -> None:
    policies.configure(Scope.goal("g"), min_interval=timedelta(seconds=1), expected_revision=0, owner_ref="o")
    configure(policies, "g/a", LimitsChange(max_starts=1, per=parse_window("1h")))
    configure(policies, "g/a/x", LimitsChange(max_starts=1, per=parse_window("1d")))
    start(store, clock, T0, "a", "x", "t1")
    found = states(store, policies, "a", "x", T0 + timedelta(minutes=1))
    assert len(found) == 2 and all(s.blocked for s in found)
    chosen = binding(found)
    assert chosen is not None and chosen.limit.window.text() == "1d" and chosen.frees_at == T0 + timedelta(days=1)


@pytest.mark.parametrize("prices", [(), ("3", "6")], ids=["no-price-set", "two-prices"])
def test_a_usd_budget_on_a_lane_without_a_model_holds_its_estimate_at_the_highest_price(
    store: Store, clock: FixedClock, policies: Policies, prices: tuple[str, ...]
) -> None:
    # A hook's lane or a bare admit has no model until its usage is reported: its estimate is held at
    # the highest price the owner set (no model priced here costs more); with no price, it cannot be checked.
    configure(policies, "g/a", LimitsChange(budget_usd=Decimal("1"), per=parse_window("day@UTC"), estimate_tokens=100_000))
    for i, price in enumerate(prices):
        Prices(store, clock).set(f"m{i}", Decimal(price), expected_revision=0, owner_ref="o")
    clock.set(T0)
    admission = Admission(store, clock)
    first = admission.reserve(goal="g", agent="a", automation=None, turn_id="t1", trigger_time=T0)
    if not prices:
        assert not first.admitted and first.detail is not None and "policy price" in first.detail
        return
    assert first.admitted  # $0.60 held of $1
    [held] = states(store, policies, "a", "", T0, estimate=100_000, model=None)
    assert (held.used, held.held, held.need, held.blocked) == (0, 600_000, 600_000, True)
    second = admission.reserve(goal="g", agent="a", automation=None, turn_id="t2", trigger_time=T0 + US)
    assert not second.admitted and second.reason is Reason.BUDGET_EXHAUSTED
    Usage(store, clock).settle("t1", tokens=50_000, model="m0")  # reported: 50k tokens of m0 at $3 = $0.15
    assert admission.reserve(goal="g", agent="a", automation=None, turn_id="t3", trigger_time=T0 + 2 * US).admitted
