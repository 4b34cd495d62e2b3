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
