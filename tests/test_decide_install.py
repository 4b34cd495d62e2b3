"""PostgreSQL's decision functions are installed after the migrations, keyed by their rendered hash;
a store made at the previous release's schema (revision 0020) opens and upgrades in place.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from basics import T0, raw_sql
from sqlalchemy import create_engine, text

from floorgate.admission import Admission, FixedClock, Reason, open_store
from floorgate.admission.decide.render import functions_hash
from floorgate.admission.store import _MIGRATIONS, _VERSION_TABLE

from helpers import floor

H = timedelta(hours=1)


def _migrate_to(url: str, revision: str, *, seed: bool = True) -> None:
    """The schema exactly as migrations up to ``revision`` build it (the previous release's store);
    ``seed``: with what release 0020 wrote in it."""
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory(str(_MIGRATIONS), version_locations=[str(_MIGRATIONS)])
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    sa_url = url if "://" in url else f"sqlite:///{url}"
    engine = create_engine(sa_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.begin() as conn:

            def upgrade(_rev, _context):  # type: ignore[no-untyped-def]
                return script._upgrade_revs(revision, None)

            with EnvironmentContext(cfg, script, fn=upgrade, destination_rev=revision) as env:
                env.configure(connection=conn, version_table=_VERSION_TABLE, transactional_ddl=True)
                env.run_migrations()
            if not seed:
                return
            # What that release wrote: a start of g/a (an hour's floor) and a wake state row.
            conn.execute(
                text(
                    "INSERT INTO fg_rules (goal_id, agent_id, automation_id, min_interval_us, owner_ref, revision, updated_at_us)"
                    " VALUES ('g', 'a', '', :f, 'owner', 1, :t)"
                ),
                {"f": H // timedelta(microseconds=1), "t": _us(T0)},
            )
            conn.execute(
                text(
                    "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind,"
                    " manual_reason, confirmed_at_us) VALUES ('old', 'g', 'a', 'x', :t, :t, 'confirmed', 'automatic', NULL, :t)"
                ),
                {"t": _us(T0)},
            )
            conn.execute(
                text(
                    "INSERT INTO fg_wake_state (automation_id, backoff_step, backoff_wake_us, last_nominal_us, updated_at_us)"
                    " VALUES ('x', 0, NULL, :t, :t)"
                ),
                {"t": _us(T0)},
            )
    finally:
        engine.dispose()


def _us(at) -> int:  # type: ignore[no-untyped-def]
    from floorgate.admission.clock import to_us

    return to_us(at)


def test_a_previous_release_store_opens_and_upgrades_in_place(db_url: str) -> None:
    _migrate_to(db_url, "0020")
    store = open_store(db_url)
    try:
        admission = Admission(store, FixedClock(T0 + timedelta(minutes=1)))
        # Its start still holds the floor, read by this release's facts (and function, on PostgreSQL).
        denied = admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0 + timedelta(minutes=1))
        assert (denied.admitted, denied.reason) == (False, Reason.INTERVAL_WAIT)
        later = Admission(store, FixedClock(T0 + H)).reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=T0 + H)
        assert (later.admitted, later.reason) == (True, Reason.ELIGIBLE)
        columns = [r[0] for r in raw_sql(store, "SELECT * FROM fg_wake_state WHERE automation_id = 'x'")]
        assert columns == ["x"]
        if store.dialect == "postgresql":
            assert raw_sql(store, "SELECT hash FROM fg_installed") == [(functions_hash(),)]
    finally:
        store.close()


def _pg(db_url: str) -> None:
    if "://" not in db_url:
        pytest.skip("PostgreSQL's functions only")


def test_a_changed_function_text_is_installed_at_the_next_open(db_url: str) -> None:
    """A store whose recorded hash is not this release's rendered text gets the functions again
    (here a hand-loosened fg_facts that would admit inside the floor is replaced)."""
    _pg(db_url)
    store = open_store(db_url)
    clock = FixedClock(T0)
    floor(store, clock, "g/a", H)
    assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    raw_sql(store, "CREATE OR REPLACE FUNCTION fg_facts" + _loose().split("CREATE OR REPLACE FUNCTION fg_facts", 1)[1])
    raw_sql(store, "UPDATE fg_installed SET hash = 'an older text'")
    store.close()
    store = open_store(db_url)
    try:
        assert raw_sql(store, "SELECT hash FROM fg_installed") == [(functions_hash(),)]
        clock.advance(timedelta(minutes=1))
        denied = Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=clock.now())
        assert (denied.admitted, denied.reason) == (False, Reason.INTERVAL_WAIT)
    finally:
        store.close()


def test_an_unchanged_function_text_is_not_installed_again(db_url: str) -> None:
    """The step is keyed by the hash: an open that finds this release's hash rewrites nothing (a
    hand edit that keeps the hash stays, which is how the skipped step is seen here)."""
    _pg(db_url)
    store = open_store(db_url)
    raw_sql(store, "CREATE OR REPLACE FUNCTION fg_facts" + _loose().split("CREATE OR REPLACE FUNCTION fg_facts", 1)[1])
    store.close()
    store = open_store(db_url)
    try:
        found = raw_sql(
            store, "SELECT prosrc FROM pg_proc WHERE proname = 'fg_facts' AND pronamespace = CAST(current_schema() AS regnamespace)"
        )
        assert len(found) == 1 and "THEN 'insert'  -- interval_wait" in found[0][0]
    finally:
        store.close()


def _loose() -> str:
    from floorgate.admission.decide.render import facts_function

    return facts_function().replace("THEN 'deny'  -- interval_wait", "THEN 'insert'  -- interval_wait")


def test_the_prepared_reserve_keeps_one_generic_plan(db_url: str) -> None:
    """PostgreSQL plans the rendered decision once for the prepared statement (a generic plan),
    not anew at every reserve: a rendering whose plain-store plan looks costlier than a custom one
    (a relaxed-store branch written as CASE ... ELSE) made every denial pay the planner."""
    _pg(db_url)
    from sqlalchemy import text as sql_text

    from floorgate.admission.clock import to_us

    store = open_store(db_url)
    try:
        rows = [{"t": f"h{a}-{k}", "a": f"hist{a}", "at": to_us(T0) - (k + 1) * 3_600_000_000} for a in range(1000) for k in range(100)]
        with store.write() as conn:
            conn.execute(
                sql_text(
                    "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind,"
                    " manual_reason, confirmed_at_us) VALUES (:t, 'g', :a, 'x', :at, :at, 'confirmed', 'automatic', NULL, :at)"
                ),
                rows,
            )
        clock = FixedClock(T0)
        floor(store, clock, "g/hist0", H)
        admission = Admission(store, clock)
        assert admission.reserve(goal="g", agent="hist0", automation="x", turn_id="t0", trigger_time=T0).admitted
        for i in range(20):  # past psycopg's prepare threshold and PostgreSQL's five custom plans
            clock.advance(timedelta(seconds=1))
            denied = admission.reserve(goal="g", agent="hist0", automation="x", turn_id=f"d{i}", trigger_time=clock.now())
            assert denied.reason is Reason.INTERVAL_WAIT
        plans = store.autocommit.row(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, 'fg_facts(') > 0", {}
        )
        assert plans is not None and plans[0] >= 10, plans
    finally:
        store.close()


def test_a_store_with_the_first_limit_mark_triggers_upgrades_to_marks_it_relies_on(db_url: str) -> None:
    """A store at 0032 (a start's trigger replaced the mark in every goal) opens at 0033 with the
    triggers this release checks for, so its known limited lanes keep their checks as before."""
    if "://" in db_url:
        pytest.skip("the limit mark's triggers are SQLite's")
    _migrate_to(db_url, "0032", seed=False)
    store = open_store(db_url)
    try:
        assert store.marked
        names = {r[0] for r in raw_sql(store, "SELECT name FROM sqlite_master WHERE type = 'trigger' AND sql LIKE '%WHEN%'")}
        assert names == {f"fg_limit_mark_{t}_{e}" for t in ("starts", "usage") for e in ("insert", "update", "delete")}
    finally:
        store.close()
