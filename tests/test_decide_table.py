"""Every row of the decision's table decides alike in Python and in SQL, on both backends.

``decide.checks.CHECKS`` carries each check twice: ``holds`` (reserve and readback in process,
SQLite's decision) and ``sql`` (the CASE branch PostgreSQL's rendered ``fg_facts`` decides with).
On generated facts and requests, each row's two predicates must agree, and the whole table (the
first row that holds) must give the same outcome as the rendered CASE, evaluated by SQLite and by
PostgreSQL over the same values. A new row is covered without touching this test, and so is a new
fact: fg_facts' columns are read from the rendering (``render.row_columns``) and each plain fact
(``decide.facts.PLAIN``) is drawn from its declared type and decoder into its ``Facts`` field.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import Phase as Stage
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from sqlalchemy import text

from floorgate.admission import Store
from floorgate.admission.clock import from_us
from floorgate.admission.decide import CHECKS, Facts
from floorgate.admission.decide.checks import PLANNED_BY_DECISION, Check, Outcome, Request, first, next_us_of, until
from floorgate.admission.decide.facts import FACT, FACTS, PARAMS, PLAIN, Fact, LimitCode, field_problems
from floorgate.admission.decide.floors import RuleRef, combine
from floorgate.admission.decide.render import case_whens, row_columns
from floorgate.admission.decisions import Phase, Reason
from floorgate.admission.errors import CorruptState
from floorgate.admission.scope import Scope

# The columns of fg_facts' row (the checks' SQL reads them as ``f.<name>``), with their types:
# rendered from the declared facts, so a new fact's column is here without touching this test.
_COLUMNS = row_columns()
_PARAM_TYPES = {p.name: p.pg_type for p in PARAMS}
_P = re.compile(r"\bp_(\w+)\b")


def _bound(sql: str) -> str:
    """``sql`` with the function's ``p_<name>`` arguments as typed bind parameters."""
    return _P.sub(lambda m: f"CAST(:p_{m.group(1)} AS {_PARAM_TYPES[m.group(1)]})", sql)


_ROW = "(SELECT " + ", ".join(f"CAST(:f_{c} AS {t}) AS {c}" for c, t in _COLUMNS.items()) + ") f"


def _select(expression: str) -> Any:
    return text(f"SELECT {_bound(expression)} FROM {_ROW}")


_HOLDS = {c.id: _select(f"CASE WHEN {c.sql} THEN 1 ELSE 0 END") for c in CHECKS}
_CASE = _select(f"CASE\n             {case_whens()}\n           END")

_floors = st.sampled_from([0, 1, 5, 10])
# The plain facts this generator builds itself (the limits' count and the code the client found go
# with the request's ``lim``); every other plain fact is drawn from ``stored``.
_OWN = ("limited", "limit_code")
_DRAWN = tuple(f for f in PLAIN if f.name not in _OWN)


def _decodes(fact: Fact, value: object) -> bool:
    if fact.decode is None:
        return True
    try:
        fact.decode(value, "g/a")
    except CorruptState:
        return False
    return True


def stored(fact: Fact) -> st.SearchStrategy[object]:
    """A plain fact's stored values: NULL or a small value of its type (a time within the cases'
    40 microseconds); one its decoder refuses is drawn as NULL."""
    values: st.SearchStrategy[object] = {
        "bigint": st.integers(0, 40),
        "integer": st.integers(0, 2),
        "text": st.just("t0"),
        "boolean": st.booleans(),
    }[fact.pg_type]
    return (st.none() | values).map(lambda v: v if _decodes(fact, v) else None)


def _decoded(fact: Fact, value: object) -> object:
    return value if fact.decode is None else fact.decode(value, "g/a")


@st.composite
def cases(draw: st.DrawFn) -> tuple[Facts, Request, int, dict[str, object]]:
    """Facts and a request, and the same values as fg_facts' row and arguments."""
    automation = draw(st.sampled_from([None, "x"]))
    agent_floor = draw(_floors)
    lane_floor = draw(_floors) if automation else 0
    goal_floor = draw(_floors)  # a goal rule across agents: its floor counts from the goal's latest start
    refs = []
    if goal_floor:
        goal_rule = Scope(goal_id="g")
        refs.append(RuleRef(scope=goal_rule, min_interval=timedelta(microseconds=goal_floor), revision=1, across_agents=True))
    if agent_floor or draw(st.booleans()):  # an inactive (zero) rule is no rule
        refs.append(RuleRef(scope=Scope(goal_id="g", agent_id="a"), min_interval=timedelta(microseconds=agent_floor), revision=1))
    if lane_floor:
        refs.append(
            RuleRef(scope=Scope(goal_id="g", agent_id="a", automation_id="x"), min_interval=timedelta(microseconds=lane_floor), revision=1)
        )
    floor = combine("g", "a", automation, refs)
    agent_floor = floor.agent_floor // timedelta(microseconds=1)  # the goal's floor binds each agent too
    phases, agents, lanes = st.sampled_from(["reserved", "confirmed", ""]), st.sampled_from(["a", "b"]), st.sampled_from(["x", "", "y"])
    turn = draw(st.none() | st.tuples(phases, lanes, st.integers(0, 40), agents))
    raw = {f.name: draw(stored(f)) for f in _DRAWN}
    now, trigger = draw(st.integers(0, 40)), draw(st.integers(0, 40))
    manual = draw(st.none() | st.just("owner asked"))
    limited = draw(st.sampled_from([0, 0, 1, 2]))  # applicable rules with a count or budget
    lim = draw(st.none() | st.sampled_from(list(LimitCode)))  # what the client found (None: unchecked)
    phase = None if turn is None else Phase(turn[0]) if turn[0] else Phase.CONFIRMED
    plain = {f.field: _decoded(f, raw[f.name]) for f in _DRAWN if f.field is not None}
    facts = Facts(
        floor=floor,
        turn_phase=phase,
        turn_lane=None if turn is None else f"g/{turn[3]}/{turn[1]}",
        turn_anchor_us=None if turn is None else turn[2],
        agent_floor_us=agent_floor,
        lane_floor_us=lane_floor,
        goal_floor_us=goal_floor,
        limited=limited,
        limit_code=lim,
        **plain,
    )
    req = Request("g", "a", automation, "t1", from_us(trigger), trigger, manual)
    values: dict[str, object] = {f"f_{c}": None for c in _COLUMNS}
    values.update({f"f_{f.short}": raw[f.name] for f in _DRAWN})
    values.update(
        {
            "f_turn": None if turn is None else json.dumps([turn[0] or None, "g", turn[3], turn[1], turn[2]]),
            "f_t_phase": None if turn is None else turn[0],
            "f_t_goal": None if turn is None else "g",
            "f_t_agent": None if turn is None else turn[3],
            "f_t_lane": None if turn is None else turn[1],
            "f_t_anchor": None if turn is None else turn[2],
            "f_active_rules": len(floor.rules),
            "f_agent_floor": agent_floor,
            "f_lane_floor": lane_floor,
            "f_goal_floor": goal_floor,
            "f_limited": limited,
            "f_lim": None if lim is None else int(lim),
            "p_g": "g",
            "p_a": "a",
            "p_x": automation or "",
            "p_xr": automation or "/",
            "p_t": "t1",
            "p_tr": trigger,
            "p_now": now,
            "p_reason": manual,
            "p_guarded": False,
            "p_lim": None if lim is None else int(lim),
        }
    )
    return facts, req, now, values


def _holds_in_python(check: Check, facts: Facts, req: Request, now: int) -> bool:
    return check.holds(facts, req, now, next_us_of(facts, req))


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_each_check_holds_alike_in_python_and_sql(store: Store, check: Check) -> None:
    with store.engine.connect() as conn:

        @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(cases())
        def agree(case: tuple[Facts, Request, int, dict[str, object]]) -> None:
            facts, req, now, values = case
            in_sql = conn.execute(_HOLDS[check.id], values).scalar()
            assert bool(in_sql) == _holds_in_python(check, facts, req, now), (check.id, facts, req, now)

        agree()


def test_the_table_decides_alike_in_python_and_sql(store: Store) -> None:
    """The first row that holds (Python) gives the outcome the rendered CASE gives (SQL)."""
    with store.engine.connect() as conn:

        @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(cases())
        def agree(case: tuple[Facts, Request, int, dict[str, object]]) -> None:
            facts, req, now, values = case
            check, _ = first(CHECKS, facts, req, now)
            assert conn.execute(_CASE, values).scalar() == check.outcome.value, (check.id, facts, req, now)

        agree()


@pytest.mark.parametrize("check", CHECKS, ids=[c.id for c in CHECKS])
def test_the_generated_facts_reach_every_row(store: Store, check: Check) -> None:
    """Each row decides some generated case (so a row whose two forms drift cannot hide behind
    an earlier one), and there the rendered CASE gives its outcome too."""

    def decided_by_it(case: tuple[Facts, Request, int, dict[str, object]]) -> bool:
        facts, req, now, _ = case
        return first(CHECKS, facts, req, now)[0].id == check.id

    facts, req, now, values = find(cases(), decided_by_it, settings=settings(max_examples=5000, database=None))
    with store.engine.connect() as conn:
        assert conn.execute(_CASE, values).scalar() == check.outcome.value, (check.id, facts, req, now)


# -- the declarations and what is derived from them ----------------------------------------------


def test_each_field_of_facts_has_exactly_one_source() -> None:
    """Every ``Facts`` field is filled by one plain fact or taken apart from a composite one."""
    assert field_problems(FACTS, Facts._fields) == []


def test_a_declaration_that_disagrees_with_facts_is_reported() -> None:
    """A field no fact fills would stay at its default in every decision; ``facts`` refuses to load."""
    without = tuple(f for f in FACTS if f.name != "lane_anchor")
    assert field_problems(without, Facts._fields) == ["Facts field 'lane_anchor_us' is filled by no fact (declare it as a fact's field)"]
    misnamed = tuple(f._replace(field="lane_anchor") if f.name == "lane_anchor" else f for f in FACTS)
    assert field_problems(misnamed, Facts._fields) == [
        "fact 'lane_anchor' fills 'lane_anchor', which is not a field of Facts",
        "Facts field 'lane_anchor_us' is filled by no fact (declare it as a fact's field)",
    ]
    twice = (*FACTS, FACT["lane_anchor"]._replace(name="lane_anchor_again"))
    assert field_problems(twice, Facts._fields) == ["fact 'lane_anchor_again' fills 'lane_anchor_us', which something else fills too"]


def test_a_denial_without_its_next_time_is_never_planned_from() -> None:
    """A host plans a lane's timer from a decision (no read) only for reasons whose decision reports
    the lane's next eligible time: never from a denying check that does not report it."""
    silent = {c.reason for c in CHECKS if c.outcome is Outcome.DENY and not c.reports_next}
    assert Reason.TURN_ALREADY_STARTED in silent
    assert not silent & PLANNED_BY_DECISION
    assert Reason.STATE_UNAVAILABLE not in PLANNED_BY_DECISION
    reporting = {c.reason for c in CHECKS if c.reports_next or c.outcome is not Outcome.DENY} - silent - {Reason.STATE_UNAVAILABLE}
    assert reporting <= PLANNED_BY_DECISION


@pytest.mark.parametrize("check", [c for c in CHECKS if c.outcome is Outcome.DENY], ids=lambda c: c.id)
def test_a_denial_without_a_next_time_says_what_ends_it(check: Check) -> None:
    """A blocked prompt's hook says until when it may not run: the next eligible time, or else what
    the denying row declares ends it (``Check.until``), read from the table by its reason. Each
    row that can deny without a time (found among generated facts) declares it."""

    def timeless(case: tuple[Facts, Request, int, dict[str, object]]) -> bool:
        facts, req, now, _ = case
        decided, nxt = first(CHECKS, facts, req, now)
        return decided.id == check.id and (nxt is None or not decided.reports_next)

    try:
        find(
            cases(), timeless, settings=settings(max_examples=1000, database=None, phases=[Stage.generate])
        )  # no shrinking: any case will do
    except NoSuchExample:
        return  # it always reports a time (the floor's wait)
    assert check.until is not None and until(check.reason) == check.until, check.id


def test_an_unreadable_state_says_it_is_unknown() -> None:
    """The gate's own fail-closed denials (no row of the table decided them) give the unchecked
    limits' reason, and its words."""
    assert until(Reason.STATE_UNAVAILABLE) == "unknown (state unavailable)"
    assert until(Reason.COUNT_EXHAUSTED) == until(Reason.BUDGET_EXHAUSTED) == "an owner changes a limit"
