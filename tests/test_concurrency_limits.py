"""Counts and budgets under racing real processes, on one agent and across a goal's agents, on
SQLite and PostgreSQL: never one start or one estimated token over a limit."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta
from itertools import pairwise

import pytest
from basics import T0, raw_sql

from floorgate.admission import FixedClock, Policies, Scope, open_store
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window

from race_worker import race_limits

WORKERS = 8
ROUNDS = 2
CASES = [
    # (id, where the limits are set, across agents, the worker's agent)
    ("one-agent", "g/a0", False, lambda w: "a0"),
    ("across-agents", "g", True, lambda w: f"a{w % 4}"),
]


# ``known``: every worker's lane is known limited before the race, so each plain read finds room
# and only the serialized step can refuse (on PostgreSQL the guarded reservation, which finds the
# limits changed by the winner and reads them again under the lock).
KNOWN = pytest.mark.parametrize("known", [False, True], ids=["first-decision", "known-lane"])


@pytest.mark.slow
@KNOWN
@pytest.mark.parametrize(("path", "across", "agent_of"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_racing_processes_never_cross_a_count_or_a_budget(db_url: str, path, across, agent_of, known: bool) -> None:  # type: ignore[no-untyped-def]
    with open_store(db_url) as store:
        Policies(store, FixedClock(T0)).configure(
            Scope.parse(path),
            expected_revision=0,
            owner_ref="o",
            limits=LimitsChange(max_starts=5, per=parse_window("1d"), across_agents=True if across else None),
        )
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=race_limits, args=(db_url, w, ROUNDS, agent_of(w), barrier, results, 1, known)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    decisions = [results.get(timeout=180) for _ in range(WORKERS * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    admitted = [d for d in decisions if d[2]]
    assert len(admitted) == 5  # exactly the count: never one more, and none lost to a conflict
    assert {reason for _r, _w, ok, reason in decisions if not ok} == {"count_exhausted"}
    with open_store(db_url) as store:
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts")[0][0] == 5


@pytest.mark.slow
@KNOWN
@pytest.mark.parametrize(("path", "across", "agent_of"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_racing_processes_never_hold_one_token_over_a_budget(db_url: str, path, across, agent_of, known: bool) -> None:  # type: ignore[no-untyped-def]
    with open_store(db_url) as store:
        Policies(store, FixedClock(T0)).configure(
            Scope.parse(path),
            expected_revision=0,
            owner_ref="o",
            limits=LimitsChange(budget_tokens=700, estimate_tokens=100, per=parse_window("1d"), across_agents=True if across else None),
        )
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    procs = [ctx.Process(target=race_limits, args=(db_url, w, ROUNDS, agent_of(w), barrier, results, 1, known)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    decisions = [results.get(timeout=180) for _ in range(WORKERS * ROUNDS)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(1 for d in decisions if d[2]) == 7  # 7 x 100 estimated tokens fill 700
    assert {reason for _r, _w, ok, reason in decisions if not ok} == {"budget_exhausted"}
    with open_store(db_url) as store:
        assert raw_sql(store, "SELECT SUM(estimate_tokens), COUNT(*) FROM fg_usage WHERE state = 'held'")[0] == (700, 7)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("across", "counts"), [(True, False), (True, True), (False, False)], ids=["across-agents", "across-agents-with-counts", "per-agent"]
)
def test_racing_processes_on_a_goals_agents_never_start_two_within_its_interval(db_url: str, across: bool, counts: bool) -> None:
    """A goal floor of 15 minutes across agents: 8 processes, each its own agent, reserve at the same
    instants 0, 10 and 20 minutes after T0: one start at 0 and one at 20, whoever wins; per agent,
    each agent starts at 0 and 20. With a count on each agent too, the lanes are decided from the
    second round on by the one-statement path of a known limited lane: the goal's lock holds there."""
    with open_store(db_url) as store:
        policies = Policies(store, FixedClock(T0))
        policies.configure(
            Scope.parse("g"),
            min_interval=timedelta(minutes=15),
            expected_revision=0,
            owner_ref="o",
            limits=LimitsChange(across_agents=True) if across else None,
        )
        for w in range(WORKERS if counts else 0):
            policies.configure(
                Scope.parse(f"g/a{w}"), expected_revision=0, owner_ref="o", limits=LimitsChange(max_starts=100, per=parse_window("1d"))
            )
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    results = ctx.Queue()
    rounds, step = 3, 600
    procs = [ctx.Process(target=race_limits, args=(db_url, w, rounds, f"a{w}", barrier, results, step)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    decisions = [results.get(timeout=180) for _ in range(WORKERS * rounds)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    per_round = [sum(1 for r, _w, ok, _reason in decisions if ok and r == n) for n in range(rounds)]
    assert per_round == ([1, 0, 1] if across else [WORKERS, 0, WORKERS])
    assert {reason for _r, _w, ok, reason in decisions if not ok} == {"interval_wait"}
    with open_store(db_url) as store:
        anchors = [row[0] for row in raw_sql(store, "SELECT anchor_us FROM fg_starts ORDER BY anchor_us")]
    if across:  # start to start over all the goal's agents: never two within the floor
        assert all(b - a >= 15 * 60 * 1_000_000 for a, b in pairwise(anchors))
