"""Admission checks counts and budgets: every limit kind x scope x window type, on SQLite and
PostgreSQL, with a fake clock, exact to the microsecond (denied one microsecond before the window
frees, admitted at it), on the 23 h and 25 h days of a calendar window; manual runs bypass only the
interval; a budget that cannot be checked denies; an admitted turn holds its estimate."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from pathlib import Path

import pytest

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store
from floorgate.admission.decisions import Decision, Reason
from floorgate.admission.limits import LimitsChange
from floorgate.admission.usage import Prices, Usage, UsageState
from floorgate.admission.windows import parse_window

from helpers import add_automation

US = timedelta(microseconds=1)
T0 = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)


def configure(policies: Policies, path: str, change: LimitsChange, min_interval: timedelta | None = None) -> None:
    scope = Scope.parse(path)
    current = policies.get(scope)
    policies.configure(scope, min_interval=min_interval, expected_revision=current.revision if current else 0, owner_ref="o", limits=change)


def reserve(store: Store, clock: FixedClock, at: datetime, lane: tuple[str, str], turn: str, manual: str | None = None) -> Decision:
    clock.set(at)
    agent, automation = lane
    return Admission(store, clock).reserve(
        goal="g", agent=agent, automation=automation, turn_id=turn, trigger_time=at, manual_reason=manual
    )


SCOPES = [
    # (id, where the limit is set, across agents, the lane whose start counts toward a/x's series, a lane it does not bind)
    ("goal-across-agents", "g", True, ("b", "y"), None),
    ("goal-per-agent", "g", False, ("a", "y"), ("b", "y")),
    ("agent", "g/a", False, ("a", "y"), ("b", "x")),
    ("automation", "g/a/x", False, ("a", "x"), ("a", "y")),
]
# (id, --per, the first start, when the first of two starts leaves the window)
WINDOWS = [
    ("rolling", "1h", T0, T0 + timedelta(hours=1)),
    # Berlin's 23 h day (clocks forward): local midnight to local midnight is 23 hours.
    (
        "calendar-23h-day",
        "day@Europe/Berlin",
        datetime(2026, 3, 29, 10, tzinfo=timezone.utc),
        datetime(2026, 3, 29, 22, tzinfo=timezone.utc),
    ),
    # Berlin's 25 h day (clocks back).
    (
        "calendar-25h-day",
        "day@Europe/Berlin",
        datetime(2026, 10, 25, 10, tzinfo=timezone.utc),
        datetime(2026, 10, 25, 23, tzinfo=timezone.utc),
    ),
]
KINDS = [
    # (id, the limit, the reason it denies with): two turns fill it (each holds an estimate of 100 tokens)
    ("starts", LimitsChange(max_starts=2), Reason.COUNT_EXHAUSTED),
    ("tokens", LimitsChange(budget_tokens=250, estimate_tokens=100), Reason.BUDGET_EXHAUSTED),
]


@pytest.mark.parametrize(("kind", "reason"), [k[1:] for k in KINDS], ids=[k[0] for k in KINDS])
@pytest.mark.parametrize(("path", "across", "counted", "free"), [x[1:] for x in SCOPES], ids=[x[0] for x in SCOPES])
@pytest.mark.parametrize(("per", "first", "frees"), [w[1:] for w in WINDOWS], ids=[w[0] for w in WINDOWS])
def test_a_full_window_denies_until_the_exact_instant_it_frees(  # type: ignore[no-untyped-def]
    store: Store, clock: FixedClock, policies: Policies, kind, reason, path, across, counted, free, per, first, frees
) -> None:
    change = kind.model_copy(update={"per": parse_window(per), "across_agents": True if across else None})
    configure(policies, path, change)
    assert reserve(store, clock, first, ("a", "x"), "t1").admitted
    assert reserve(store, clock, first + timedelta(minutes=10), counted, "t2").admitted
    if free is not None:  # a lane outside the limit's series is not bound by it
        assert reserve(store, clock, first + timedelta(minutes=11), free, "f1").admitted
    denied = reserve(store, clock, first + timedelta(minutes=20), ("a", "x"), "t3")
    assert (denied.admitted, denied.reason, denied.next_eligible_at) == (False, reason, frees), denied.detail
    assert reserve(store, clock, frees - US, ("a", "x"), "t4").reason is reason
    assert reserve(store, clock, frees, ("a", "x"), "t5").admitted


def test_manual_runs_bypass_the_interval_but_not_a_count(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(max_starts=1, per=parse_window("1d")), min_interval=timedelta(hours=1))
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    # The floor alone would let a manual run through; the count does not.
    manual = reserve(store, clock, T0 + timedelta(minutes=5), ("a", "x"), "m1", manual="owner asked")
    assert (manual.admitted, manual.reason, manual.next_eligible_at) == (False, Reason.COUNT_EXHAUSTED, T0 + timedelta(days=1))
    command = 'floorgate policy set g/a --max-starts 2 --per 1d --revision 1 --owner-ref "$(id -un)" --allow-reduction'
    assert command in manual.detail
    # The command runs as printed, in a shell where $USER is unset (cron, a container).
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "FLOORGATE_DB": store.url}
    ran = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert policies.get(Scope.parse("g/a")).limits.max_starts == 2


def test_the_reported_time_is_the_latest_of_the_floor_and_the_limits(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(max_starts=1, per=parse_window("1d")), min_interval=timedelta(hours=1))
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    waiting = reserve(store, clock, T0 + timedelta(minutes=5), ("a", "x"), "t2")
    assert not waiting.admitted and waiting.next_eligible_at == T0 + timedelta(days=1)
    counted = reserve(store, clock, T0 + timedelta(hours=2), ("a", "x"), "t3")  # the floor has elapsed
    assert (counted.reason, counted.next_eligible_at) == (Reason.COUNT_EXHAUSTED, T0 + timedelta(days=1))


def test_a_limit_without_a_floor_records_its_starts(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a/x", LimitsChange(max_starts=1, per=parse_window("1h")))
    first = reserve(store, clock, T0, ("a", "x"), "t1")
    assert (first.admitted, first.reason) == (True, Reason.ELIGIBLE)  # not no_rule: the start is counted
    assert reserve(store, clock, T0 + timedelta(minutes=1), ("a", "x"), "t2").reason is Reason.COUNT_EXHAUSTED


def test_admission_holds_the_estimate_in_the_ledger(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(budget_tokens=1000, per=parse_window("1d"), estimate_tokens=400))
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    held = Usage(store, clock).get("t1")
    assert held is not None and (held.state, held.estimate_tokens, held.at) == (UsageState.HELD, 400, T0)
    # The hold counts: a second turn fits (800), a third would cross 1000.
    assert reserve(store, clock, T0 + timedelta(minutes=1), ("a", "x"), "t2").admitted
    assert reserve(store, clock, T0 + timedelta(minutes=2), ("a", "x"), "t3").reason is Reason.BUDGET_EXHAUSTED
    # Settled below the estimate, the freed tokens let the third through.
    Usage(store, clock).settle("t1", tokens=100)
    assert reserve(store, clock, T0 + timedelta(minutes=3), ("a", "x"), "t4").admitted


def test_a_denial_holds_nothing(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(budget_tokens=100, per=parse_window("1d"), estimate_tokens=100))
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    assert reserve(store, clock, T0 + timedelta(minutes=1), ("a", "x"), "t2").reason is Reason.BUDGET_EXHAUSTED
    assert Usage(store, clock).get("t2") is None


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (LimitsChange(budget_tokens=1000, per=parse_window("1d")), "--estimate-tokens"),
        (LimitsChange(budget_usd=Decimal(5), per=parse_window("1d"), estimate_tokens=100), "policy price"),
    ],
    ids=["tokens-without-estimate", "usd-without-price"],
)
def test_a_budget_that_cannot_be_checked_denies(store: Store, clock: FixedClock, policies: Policies, change, problem) -> None:  # type: ignore[no-untyped-def]
    configure(policies, "g/a", change)
    denied = reserve(store, clock, T0, ("a", "x"), "t1")
    assert (denied.admitted, denied.reason) == (False, Reason.BUDGET_EXHAUSTED)
    assert problem in denied.detail and denied.next_eligible_at is None  # waiting does not free it
    manual = reserve(store, clock, T0, ("a", "x"), "t2", manual="owner")
    assert problem in manual.detail and "--allow-reduction" not in manual.detail  # raising it would not help


# (id, the limit, what one turn reports, how the denial shows the amount used): a denial names
# its amounts in the limit's unit, never USD's micro-dollars.
SPENT = [
    ("starts", LimitsChange(max_starts=1), {}, "1 start per 1d at g/a: used 1, held 0;"),
    (
        "tokens",
        LimitsChange(budget_tokens=1000, estimate_tokens=600),
        {"tokens": 600},
        "used 600 tokens, held 0 tokens, left 400 tokens, the next start holds 600 tokens;",
    ),
    (
        "usd",
        LimitsChange(budget_usd=Decimal(1), estimate_tokens=100_000),
        {"tokens": 100_000, "usd_micros": 600_000, "model": "m"},
        "$1.00 per 1d at g/a: used $0.60, held $0.00, left $0.40, the next start holds $0.60;",
    ),
]


@pytest.mark.parametrize(("change", "report", "shown"), [s[1:] for s in SPENT], ids=[s[0] for s in SPENT])
def test_a_denial_shows_the_amounts_in_the_limits_unit(  # type: ignore[no-untyped-def]
    store: Store, clock: FixedClock, policies: Policies, change, report, shown
) -> None:
    clock.set(T0)
    add_automation(store, clock, model="m")
    Prices(store, clock).set("m", Decimal(6), expected_revision=0, owner_ref="o")
    configure(policies, "g/a", change.model_copy(update={"per": parse_window("1d")}))
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    if report:
        Usage(store, clock).settle("t1", **report)
    denied = reserve(store, clock, T0 + timedelta(minutes=1), ("a", "x"), "t2")
    assert not denied.admitted and shown in denied.detail, denied.detail
