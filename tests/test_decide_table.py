"""Every row of the decision's table decides alike in Python and in SQL, on both backends.

``decide.checks.CHECKS`` carries each check twice: ``holds`` (reserve and readback in process,
SQLite's decision) and ``sql`` (the CASE branch PostgreSQL's rendered ``fg_facts`` decides with).
On generated facts and requests, each row's two predicates must agree, and the whole table (the
first row that holds) must give the same outcome as the rendered CASE, evaluated by SQLite and by
PostgreSQL over the same values. A new row is covered without touching this test.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from floorgate.admission import Store
from floorgate.admission.clock import from_us
from floorgate.admission.decide import CHECKS, Facts
from floorgate.admission.decide.checks import Check, Request, first, next_us_of
from floorgate.admission.decide.facts import PARAMS, LimitCode
from floorgate.admission.decide.floors import RuleRef, combine
from floorgate.admission.decide.render import case_whens
from floorgate.admission.decisions import Phase
from floorgate.admission.scope import Scope

# The columns of fg_facts' row the checks' SQL reads, with their types.
_COLUMNS = {
    "turn": "TEXT",
    "t_phase": "TEXT",
    "t_goal": "TEXT",
    "t_agent": "TEXT",
    "t_lane": "TEXT",
    "ag": "BIGINT",
    "ln": "BIGINT",
    "ln_tr": "BIGINT",
    "dup": "TEXT",
    "active_rules": "BIGINT",
    "agent_floor": "BIGINT",
    "lane_floor": "BIGINT",
    "goal_floor": "BIGINT",
    "gl": "BIGINT",
    "limited": "BIGINT",
    "lim": "INTEGER",
}
_TYPES = {"text": "TEXT", "bigint": "BIGINT", "boolean": "BOOLEAN"}
_TYPES["integer"] = "INTEGER"
_PARAM_TYPES = {p.name: _TYPES[p.pg_type] for p in PARAMS}
_P = re.compile(r"\bp_(\w+)\b")


def _bound(sql: str) -> str:
    """``sql`` with the function's ``p_<name>`` arguments as typed bind parameters."""
    return _P.sub(lambda m: f"CAST(:p_{m.group(1)} AS {_PARAM_TYPES[m.group(1)]})", sql)


_ROW = "(SELECT " + ", ".join(f"CAST(:f_{c} AS {t}) AS {c}" for c, t in _COLUMNS.items()) + ") f"


def _select(expression: str) -> Any:
    return text(f"SELECT {_bound(expression)} FROM {_ROW}")


_HOLDS = {c.id: _select(f"CASE WHEN {c.sql} THEN 1 ELSE 0 END") for c in CHECKS}
_CASE = _select(f"CASE\n             {case_whens()}\n           END")

_times = st.none() | st.integers(0, 40)
_floors = st.sampled_from([0, 1, 5, 10])


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
    ag, ln, ln_tr, gl = draw(_times), draw(_times), draw(_times), draw(_times)
    dup = draw(st.none() | st.just("t0"))
    now, trigger = draw(st.integers(0, 40)), draw(st.integers(0, 40))
    manual = draw(st.none() | st.just("owner asked"))
    limited = draw(st.sampled_from([0, 0, 1, 2]))  # applicable rules with a count or budget
    lim = draw(st.none() | st.sampled_from(list(LimitCode)))  # what the client found (None: unchecked)
    phase = None if turn is None else Phase(turn[0]) if turn[0] else Phase.CONFIRMED
    facts = Facts(
        floor,
        phase,
        None if turn is None else f"g/{turn[3]}/{turn[1]}",
        None if turn is None else turn[2],
        ag,
        ln,
        ln_tr,
        dup,
        agent_floor,
        lane_floor,
        limited,
        lim,
        goal_anchor_us=gl,
        goal_floor_us=goal_floor,
    )
    req = Request("g", "a", automation, "t1", from_us(trigger), trigger, manual)
    values: dict[str, object] = {
        "f_turn": None if turn is None else json.dumps([turn[0] or None, "g", turn[3], turn[1], turn[2]]),
        "f_t_phase": None if turn is None else turn[0],
        "f_t_goal": None if turn is None else "g",
        "f_t_agent": None if turn is None else turn[3],
        "f_t_lane": None if turn is None else turn[1],
        "f_ag": ag,
        "f_ln": ln,
        "f_ln_tr": ln_tr,
        "f_dup": dup,
        "f_active_rules": len(floor.rules),
        "f_agent_floor": agent_floor,
        "f_lane_floor": lane_floor,
        "f_goal_floor": goal_floor,
        "f_gl": gl,
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
