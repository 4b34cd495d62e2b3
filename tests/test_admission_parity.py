"""PostgreSQL's one-statement decision (``fg_facts`` / ``fg_admit``) and the in-process one read alike.

The rule's rows are held together by tests/test_decide_table.py (every check, Python and SQL, on
generated facts). The cases here are about the facts the two read: the same state, hand edits and
rebuilt stores in a SQLite store and a PostgreSQL store, the same request at the same instant, and
the two decisions equal in every field (admitted, reason, anchor, next eligible time, floor,
detail) and the starts tables equal afterwards; a few plain cases run the whole path once.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from basics import T0, pg_or_skip, pg_schema_url, psycopg_dsn, raw_sql, replay
from test_hostile_state import relax

from floorgate.admission import Admission, FixedClock, Reason, Store, open_store
from floorgate.admission.decide.facts import FACTS
from floorgate.admission.decide.render import facts_function

from helpers import floor

H = timedelta(hours=1)
M = timedelta(minutes=1)


@dataclass(frozen=True)
class Prior:
    """A start made through admission before the request (at T0 + ``at``)."""

    turn: str
    at: timedelta
    automation: str | None = "x"
    trigger: timedelta | None = None  # default: ``at``
    confirm: bool = True
    manual_reason: str | None = None


@dataclass(frozen=True)
class Case:
    id: str
    floors: tuple[tuple[str, timedelta], ...] = ()
    priors: tuple[Prior, ...] = ()
    edits: tuple[str, ...] = ()  # hand edits after the priors, the same SQL on both backends
    relaxed: tuple[tuple[str, str], ...] = ()  # (table, column) whose NOT NULL a hand rebuild dropped
    now: timedelta = timedelta(0)
    turn: str = "t-new"
    automation: str | None = "x"
    trigger: timedelta | None = None  # default: ``now``
    manual_reason: str | None = None
    request: dict[str, object] = field(default_factory=dict)
    expect: Reason | None = None  # the reason both must give, where the case is about it


CASES = [
    Case("no rule admits", now=M),
    Case("agent floor waits", floors=(("g/a", H),), priors=(Prior("p1", timedelta(0)),), now=M),
    Case("manual bypasses the interval", floors=(("g/a", H),), priors=(Prior("p1", timedelta(0)),), now=M, manual_reason="owner asked"),
    Case(
        "resumed reservation",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0), confirm=False),),
        now=M,
        turn="p1",
        trigger=timedelta(0),
    ),
    Case(
        "phase missing reads confirmed",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0), confirm=False),),
        edits=("UPDATE fg_starts SET phase = NULL WHERE turn_id = 'p1'",),
        now=M,
        turn="p1",
    ),
    Case(
        "unknown phase",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0)),),
        edits=("UPDATE fg_starts SET phase = 'launched' WHERE turn_id = 'p1'",),
        now=2 * H,
        turn="p1",
    ),
    Case("negative floor", floors=(("g/a", H),), edits=("UPDATE fg_rules SET min_interval_us = -1",), now=M),
    Case("floor beyond the cap", floors=(("g/a", H),), edits=("UPDATE fg_rules SET min_interval_us = 316224000000001",), now=M),
    Case(
        "floor at the cap",
        floors=(("g/a", H),),
        edits=("UPDATE fg_rules SET min_interval_us = 316224000000000",),
        priors=(Prior("p1", timedelta(0)),),
        now=M,
    ),
    Case("revision zero", floors=(("g/a/x", H),), edits=("UPDATE fg_rules SET revision = 0",), now=M),
    Case(
        "negative anchor", floors=(("g/a", H),), priors=(Prior("p1", timedelta(0)),), edits=("UPDATE fg_starts SET anchor_us = -5",), now=M
    ),
    Case(
        "anchor beyond year 9000",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0)),),
        edits=("UPDATE fg_starts SET anchor_us = 221845392000000000",),
        now=M,
    ),
    Case(
        "trigger beyond year 9000",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0)),),
        edits=("UPDATE fg_starts SET trigger_us = 221845392000000000",),
        now=2 * H,
    ),
    Case(
        "rebuilt store, intact rows",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0)),),
        relaxed=(("fg_starts", "anchor_us"),),
        now=2 * H,
    ),
    Case(
        "rebuilt store, start without anchor",
        floors=(("g/a", H),),
        priors=(Prior("p1", timedelta(0)),),
        relaxed=(("fg_starts", "anchor_us"),),
        edits=("UPDATE fg_starts SET anchor_us = NULL",),
        now=2 * H,
    ),
    Case(
        "rebuilt store, rule without floor",
        floors=(("g/a", H),),
        relaxed=(("fg_rules", "min_interval_us"),),
        edits=("UPDATE fg_rules SET min_interval_us = NULL",),
        now=M,
    ),
    Case(
        "rebuilt store, lane start without trigger",
        floors=(("g/a/x", H),),
        priors=(Prior("p1", timedelta(0)),),
        relaxed=(("fg_starts", "trigger_us"),),
        edits=("UPDATE fg_starts SET trigger_us = NULL",),
        now=2 * H,
    ),
    # A start without an agent holds every agent's lane of its automation; on the goal's other lanes
    # it is a possible last start of every agent (the goal floor counts from it).
    *(
        Case(
            f"rebuilt store, start without agent, {name}",
            floors=(("g", H),),
            priors=(Prior("p1", timedelta(0), automation=prior_lane),),
            relaxed=(("fg_starts", "agent_id"), *more),
            edits=(f"UPDATE fg_starts SET agent_id = NULL{also} WHERE turn_id = 'p1'",),
            now=now,
            automation=lane,
            expect=expect,
        )
        for name, prior_lane, lane, now, more, also, expect in [
            ("in the lane's automation", "x", "x", 2 * H, (), "", Reason.STATE_UNAVAILABLE),
            ("another automation inside the goal floor", "y", "x", M, (), "", Reason.INTERVAL_WAIT),
            ("another automation, agent-wide request", "y", None, M, (), "", Reason.INTERVAL_WAIT),
            ("another automation after the goal floor", "y", "x", H, (), "", Reason.ELIGIBLE),
            ("another automation in the future", "y", "x", -M, (), "", Reason.CLOCK_ROLLBACK),
            ("nor automation", "y", "x", 2 * H, (("fg_starts", "automation_id"),), ", automation_id = NULL", Reason.STATE_UNAVAILABLE),
            ("nor anchor", "y", "x", 2 * H, (("fg_starts", "anchor_us"),), ", anchor_us = NULL", Reason.STATE_UNAVAILABLE),
        ]
    ),
    Case(
        "rebuilt store, start without agent, no rule for the lane",
        floors=(("g/a/y", H),),
        priors=(Prior("p1", timedelta(0), automation="y"),),
        relaxed=(("fg_starts", "agent_id"),),
        edits=("UPDATE fg_starts SET agent_id = NULL WHERE turn_id = 'p1'",),
        now=M,
        expect=Reason.NO_RULE,
    ),
]


@pytest.fixture
def sqlite_store(tmp_path: Path, _sqlite_template: Path) -> Iterator[Store]:
    path = tmp_path / "floorgate.db"
    shutil.copy(_sqlite_template, path)
    s = open_store(str(path))
    yield s
    s.close()


@pytest.fixture
def pg_store(_pg_template: list) -> Iterator[Store]:  # type: ignore[type-arg]
    import psycopg

    base = pg_or_skip()
    schema = f"fgt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = pg_schema_url(base, schema)
    replay(url, _pg_template)
    s = open_store(url)
    yield s
    s.close()
    with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _decide(store: Store, case: Case, reopened: Callable[[Store], None]) -> tuple[object, list[tuple]]:  # type: ignore[type-arg]
    clock = FixedClock(T0)
    for scope, interval in case.floors:
        floor(store, clock, scope, interval)
    for prior in case.priors:
        at = FixedClock(T0 + prior.at)
        admission = Admission(store, at)
        trigger = T0 + (prior.trigger if prior.trigger is not None else prior.at)
        made = admission.reserve(
            goal="g", agent="a", automation=prior.automation, turn_id=prior.turn, trigger_time=trigger, manual_reason=prior.manual_reason
        )
        assert made.admitted, made
        if prior.confirm:
            admission.confirm(prior.turn)
    for table, column in case.relaxed:
        store = relax(store, table, column)
        reopened(store)
    for sql in case.edits:
        raw_sql(store, sql)
    clock = FixedClock(T0 + case.now)
    trigger = T0 + (case.trigger if case.trigger is not None else case.now)
    decision = Admission(store, clock).reserve(
        goal="g", agent="a", automation=case.automation, turn_id=case.turn, trigger_time=trigger, manual_reason=case.manual_reason
    )
    starts = raw_sql(
        store,
        "SELECT turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind, manual_reason, confirmed_at_us "
        "FROM fg_starts ORDER BY turn_id",
    )
    return decision, starts


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_postgresql_and_sqlite_decide_alike(sqlite_store: Store, pg_store: Store, case: Case) -> None:
    opened: list[Store] = []
    try:
        lite, lite_starts = _decide(sqlite_store, case, opened.append)
        pg, pg_starts = _decide(pg_store, case, opened.append)
    finally:
        for s in opened:
            s.close()
    assert pg == lite
    assert pg_starts == lite_starts
    if case.expect is not None:
        assert lite.reason is case.expect  # type: ignore[attr-defined]


def test_a_function_that_disagrees_with_this_floorgate_fails_closed(pg_store: Store) -> None:
    """A store whose fg_facts inserts where this floorgate's rule denies (a hand-edited or
    mismatched function) answers state_unavailable, never the function's admission."""
    clock = FixedClock(T0)
    floor(pg_store, clock, "g/a", H)
    admission = Admission(pg_store, clock)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    function = facts_function()  # the text the store installed after its migrations
    loose = function.replace("THEN 'deny'  -- interval_wait", "THEN 'insert'  -- interval_wait")
    assert loose != function
    raw_sql(pg_store, loose)
    clock.advance(M)
    decision = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=T0 + M)
    assert (decision.admitted, decision.reason) == (False, Reason.STATE_UNAVAILABLE)
    assert "fg_facts decided 'insert'" in decision.detail


def test_a_denial_never_calls_the_locking_function(pg_store: Store) -> None:
    """A denial is decided by fg_facts alone: fg_admit (the lock, the second read, the insert) runs
    only when the unlocked read may admit. Here fg_admit fails whenever it is called."""
    clock = FixedClock(T0)
    floor(pg_store, clock, "g/a", H)
    admission = Admission(pg_store, clock)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    raw_sql(
        pg_store,
        "CREATE OR REPLACE FUNCTION fg_admit(p_g text, p_a text, p_x text, p_xr text, p_t text, p_tr bigint, p_now bigint,"
        " p_kind text, p_reason text, p_lock bigint, p_goal_lock bigint, p_guarded boolean, p_lim integer, "
        + "".join(f"OUT {f.name} {f.pg_type}, " for f in FACTS)  # its columns as the release's fg_admit has them
        + "OUT outcome text)"
        " LANGUAGE plpgsql VOLATILE AS $fn$ BEGIN RAISE EXCEPTION 'fg_admit called'; END $fn$",
    )
    for i in range(12):  # past psycopg's prepare threshold and PostgreSQL's switch to a generic plan
        clock.advance(M)
        denied = admission.reserve(goal="g", agent="a", automation="x", turn_id=f"d{i}", trigger_time=clock.now())
        assert (denied.admitted, denied.reason) == (False, Reason.INTERVAL_WAIT)
    clock.advance(H)
    refused = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=clock.now())
    assert (refused.admitted, refused.reason) == (False, Reason.STATE_UNAVAILABLE)
    assert "fg_admit called" in refused.detail
