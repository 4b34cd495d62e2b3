"""Limit text in whole seconds, as the rest of the CLI: a coming instant a limit frees at is
rounded up to the second in every text (``policy show``'s and ``status``'s "exhausted until",
``automation show``'s limit line, the readback's detail, reserve's "frees at"), and a past one
(``policy show``'s UPDATED) is the second it fell in; ``--json`` keeps the exact instant. ``policy show`` of a lane with limits and no floor says there is no floor and
its limits apply. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from floorgate.admission import Admission, FixedClock, Policies, Reason, Scope, Store
from floorgate.admission.clock import iso
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window
from floorgate.scheduler.app.readback import Readback

from cli import run_cli
from helpers import add_automation, floor


def _spent_count(store: Store) -> tuple[FixedClock, datetime]:
    """g/a/x with 2 starts per rolling day, both spent an hour ago at a quarter past a second (the
    CLI reads the system clock); returns the clock and when the count frees."""
    first = datetime.now(timezone.utc).replace(microsecond=250_000) - timedelta(hours=1)
    clock = FixedClock(first)
    add_automation(store, clock)
    floor(store, clock, "g", timedelta(seconds=1))  # today's admission records starts only under a floor
    Policies(store, clock).configure(
        Scope.parse("g/a"), expected_revision=0, owner_ref="o", limits=LimitsChange(max_starts=2, per=parse_window("1d"))
    )
    for i, at in enumerate((first, first + timedelta(minutes=1))):
        clock.set(at)
        assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id=f"t{i}", trigger_time=at).admitted
    clock.set(first + timedelta(minutes=2))
    return clock, first + timedelta(days=1)


def test_a_spent_limit_frees_at_a_whole_second_in_text_and_exactly_in_json(store: Store) -> None:
    clock, frees = _spent_count(store)
    exact, shown = iso(frees), iso(frees.replace(microsecond=0) + timedelta(seconds=1))
    assert exact is not None and exact.endswith(".250000Z") and shown is not None and "." not in shown
    line = f"used 2, held 0, left 0; exhausted until {shown}"
    policy = run_cli("policy", "show", "g/a/x", db=store.url).stdout
    assert f"limit 2 starts per 1d at g/a: {line}" in policy and exact not in policy
    # The rules' UPDATED column, a past instant: the second it fell in, never its microseconds.
    assert f"{frees - timedelta(days=1):%Y-%m-%d %H:%M:%S} UTC" in policy and ".250000" not in policy
    assert f"x: limit 2 starts per 1d at g/a: {line}" in run_cli("status", db=store.url).stdout
    assert f"limit:          2 starts per 1d at g/a: {line}" in run_cli("automation", "show", "x", db=store.url).stdout
    doc = json.loads(run_cli("policy", "show", "g/a/x", "--json", db=store.url).stdout)
    assert [x["frees_at"] for x in doc["limits"]] == [exact] and doc["eligibility"]["next_eligible_at"] == exact
    rb = Readback(store, clock).automation("x")
    assert f"until {shown}" in rb.detail and exact not in rb.detail
    decision = Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t9", trigger_time=clock.now())
    assert decision.reason is Reason.COUNT_EXHAUSTED and decision.next_eligible_at == frees  # the value stays exact
    assert f"frees at {shown}" in decision.detail and exact not in decision.detail


def test_policy_show_of_a_lane_with_limits_and_no_floor_says_there_is_no_floor(store: Store) -> None:
    set_limit = run_cli(
        "policy", "set", "g/a", "--max-starts", "3", "--per", "1d", "--revision", "0", "--owner-ref", "o", db=store.url
    )  # fmt: skip
    assert set_limit.returncode == 0, set_limit.stderr
    text = run_cli("policy", "show", "g/a/x", db=store.url).stdout
    assert "effective floor for g/a/x: none (no rule sets a floor); its limits apply" in text
    assert "no rule applies" not in text
    assert "effective floor for h/a/x: 0 (no rule applies)" in run_cli("policy", "show", "h/a/x", db=store.url).stdout


def test_a_budget_with_some_left_says_what_the_next_start_holds(store: Store) -> None:
    """A token budget that blocks with part of it left says why: the next start's estimate (here
    the owner's) does not fit in what is left; in ``policy show``, ``status`` and the denial."""
    clock = FixedClock(datetime(2026, 12, 1, 9, tzinfo=timezone.utc))
    add_automation(store, clock)
    limits = LimitsChange(budget_tokens=100_000, estimate_tokens=40_000, per=parse_window("day@UTC"))
    Policies(store, clock).configure(Scope.parse("g/a"), expected_revision=0, owner_ref="o", limits=limits)
    admission = Admission(store, clock)
    for turn in ("t1", "t2"):  # 80k held of 100k: 20k left, the next start holds 40k
        assert admission.reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=clock.now()).admitted
        clock.advance(timedelta(minutes=1))
    said = "used 0 tokens, held 80000 tokens, left 20000 tokens, the next start holds 40000 tokens"
    decision = admission.reserve(goal="g", agent="a", automation="x", turn_id="t3", trigger_time=clock.now())
    assert decision.reason is Reason.BUDGET_EXHAUSTED and said in decision.detail
    assert said in Readback(store, clock).automation("x").detail
