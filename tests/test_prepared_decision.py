"""PostgreSQL decides a denial from a prepared statement: the decision's one statement is planned
once per connection, not on every call.

Planning it costs several times its execution (bench/admission.py prints both), so a driver option
that stopped preparing it (psycopg's ``prepare_threshold=None``, as some poolers need) would make
every denial several times slower without changing a count; this asserts the statement is prepared.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from floorgate.admission import Admission, FixedClock, Store

from helpers import floor

DENIALS = 8  # psycopg prepares a statement on its 5th run (prepare_threshold)


def test_a_denial_runs_the_prepared_decision(store: Store, clock: FixedClock) -> None:
    if store.dialect != "postgresql":
        pytest.skip("prepared statements are PostgreSQL's: SQLite's driver keeps its own statement cache")
    floor(store, clock, "g/a", timedelta(hours=1))
    admission = Admission(store, clock)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t0", trigger_time=clock.now()).admitted
    for i in range(DENIALS):
        decision = admission.reserve(goal="g", agent="a", automation="x", turn_id=f"d{i}", trigger_time=clock.now())
        assert not decision.admitted
    # pg_prepared_statements is the session's own: asked on the hot path's connection.
    row = store.autocommit.row("SELECT count(*) FROM pg_prepared_statements WHERE strpos(statement, 'fg_facts(') > 0", {})
    assert row == (1,)


def test_the_decisions_outcome_is_computed_once_per_row(store: Store, clock: FixedClock) -> None:
    """fg_facts is inlined; its outcome (one CASE over every check) is read three times by the
    statement (the output and the two legs of fg_admit's gate). Read through a subquery the planner
    keeps (a Subquery Scan), it is computed once; flattened, PostgreSQL evaluates the whole CASE at
    each use (a third of a denial's server time)."""
    if store.dialect != "postgresql":
        pytest.skip("the decision's one statement is PostgreSQL's")
    from sqlalchemy import text

    from floorgate.admission._facts import facts_params
    from floorgate.admission._reserve_sql import RESERVE_SQL

    floor(store, clock, "g/a", timedelta(hours=1))
    params = facts_params("g", "a", "x", "t", 1) | {"kind": "automatic", "reason": None, "lock": 1, "goal_lock": None}
    params |= {"guarded": False, "lock_admitted": False, "now": 2, "lim": None}
    with store.engine.connect() as conn:
        plan = [r[0] for r in conn.execute(text("EXPLAIN (COSTS OFF) " + RESERVE_SQL), params)]
    assert any("Subquery Scan on f" in line for line in plan), plan
