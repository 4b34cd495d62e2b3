"""Counts and budgets under racing real processes, on one agent and across a goal's agents, on
SQLite and PostgreSQL: never one start or one estimated token over a limit."""

from __future__ import annotations

import multiprocessing

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


@pytest.mark.slow
@pytest.mark.parametrize(("path", "across", "agent_of"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_racing_processes_never_cross_a_count_or_a_budget(db_url: str, path, across, agent_of) -> None:  # type: ignore[no-untyped-def]
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
    procs = [ctx.Process(target=race_limits, args=(db_url, w, ROUNDS, agent_of(w), barrier, results)) for w in range(WORKERS)]
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
@pytest.mark.parametrize(("path", "across", "agent_of"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_racing_processes_never_hold_one_token_over_a_budget(db_url: str, path, across, agent_of) -> None:  # type: ignore[no-untyped-def]
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
    procs = [ctx.Process(target=race_limits, args=(db_url, w, ROUNDS, agent_of(w), barrier, results)) for w in range(WORKERS)]
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
