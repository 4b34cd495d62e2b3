"""PostgreSQL's decision functions, rendered from the facts and the table of checks.

``fg_facts`` (plain SQL the planner inlines into ``admission._reserve_sql.RESERVE_SQL``) reads the
facts declared in ``facts.FACTS`` with the client's encoding, and says what the decision does:
'deny' when a fact is damaged or outside its bound (the client's decoder fails closed there), else
the ``Outcome`` of the first row of ``checks.CHECKS`` whose SQL holds. ``fg_admit`` (PL/pgSQL)
takes the agent's advisory lock (the goal's first, for a goal whose floor counts across agents),
reads again and inserts the start when it still says 'insert'.
``install`` puts this text in the store after its migrations whenever it changes (keyed by
``functions_hash``); no migration carries a function body any more.
"""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

from sqlalchemy import Boolean, case, exists, func, literal_column, or_, select, true
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Select

from .._schema import installed as _installed
from .._schema import rules as _rules
from .._schema import starts as _starts
from ._sql import EMPTY, GUARDED, ONE, ZERO, G, T, compiled, dialect, json_row, server_sql, text_value
from .checks import CHECKS
from .facts import FACTS, PARAMS, RULE_COLUMNS, TURN_COLUMNS, Fact, goal_across, rules_json, rules_where, scalar
from .floors import MAX_FLOOR_US, MAX_US

_ARGS = ", ".join(f"p_{p.name} {p.pg_type}" for p in PARAMS)
_ARG_NAMES = ", ".join(f"p_{p.name}" for p in PARAMS)
_OUT = ", ".join(f"{f.name} {f.pg_type}" for f in FACTS)
_NAMES = ", ".join(f.name for f in FACTS)
# Facts the function reads besides the rules and the turn (which it takes apart in subqueries).
_SCALARS = [f for f in FACTS if f.name not in ("rules", "turn")]


def _scalar(fact: Fact) -> ColumnElement[Any]:
    """A fact in the function: its relaxed-store parts behind ``p_guarded``. Written so that the
    plain store's plan has the same shape with or without them (GREATEST ignores the NULL), which
    keeps PostgreSQL on one generic plan for the prepared statement instead of planning each call."""
    if fact.also is not None:
        u = fact.also.subquery("u")
        return func.greatest(fact.expr, case((GUARDED, scalar(select(func.max(u.c.v))))))
    if fact.guarded is None:
        return fact.expr
    if fact.name == "damaged":  # nothing to read on a plain store
        return case((GUARDED, fact.guarded))
    return case((GUARDED, fact.guarded), else_=fact.expr)


def _row() -> Select[Any]:
    """The function's row of facts (its ``f``): the rules taken apart, the turn's start taken
    apart, and every other fact, as one Core statement."""
    r, s = _rules.alias("r"), _starts.alias("s")
    bad = or_(
        *(r.c[c].is_(None) for c in RULE_COLUMNS),
        r.c.min_interval_us < ZERO,
        r.c.min_interval_us > literal_column(str(MAX_FLOOR_US)),
        r.c.revision < literal_column("1"),
    )
    goal_rule = (r.c.agent_id == EMPTY) & (r.c.automation_id == EMPTY)
    ru = (
        select(
            rules_json(r).label("rules"),
            func.bool_or(bad, type_=Boolean).label("bad_rule"),
            func.count().filter(r.c.min_interval_us > ZERO).label("active_rules"),
            func.coalesce(func.max(r.c.min_interval_us).filter(r.c.automation_id == EMPTY), ZERO).label("agent_floor"),
            func.coalesce(func.max(r.c.min_interval_us).filter(r.c.automation_id != EMPTY), ZERO).label("lane_floor"),
            func.coalesce(func.max(r.c.min_interval_us).filter(goal_rule & r.c.across_agents), ZERO).label("goal_floor"),
            *(f.of_rules(r).label(f"of_rules_{f.short}") for f in _SCALARS if f.of_rules is not None),
        )
        .where(rules_where(r))
        .subquery("ru")
    )
    tu = (
        select(
            json_row(*(s.c[c] for c in TURN_COLUMNS)).label("turn"),
            func.coalesce(s.c.phase, EMPTY).label("t_phase"),
            s.c.goal_id.label("t_goal"),
            s.c.agent_id.label("t_agent"),
            s.c.automation_id.label("t_lane"),
            s.c.anchor_us.label("t_anchor"),
        )
        .where(s.c.turn_id == T)
        .subquery("tu")
    )
    scalars = [(ru.c[f"of_rules_{f.short}"] if f.of_rules is not None else _scalar(f)).label(f.short) for f in _SCALARS]
    return (
        select(*(c for c in ru.c if not c.name.startswith("of_rules_")), *tu.c, *scalars)
        .select_from(ru.outerjoin(tu, true()))
        # kept a subquery: flattened, each reference below would rerun its lookups
        .offset(ZERO)
    )


def _facts_row() -> str:
    """``_row`` compiled for PostgreSQL, its parameters as the function's arguments."""
    return server_sql(compiled(_row(), "postgresql"))


def row_columns() -> dict[str, str]:
    """The columns of the function's row ``f`` (what the checks' SQL reads as ``f.<name>``), with
    their PostgreSQL types: the rules' and the turn's parts, and every other fact by its short name."""
    types = {f.short: f.pg_type for f in _SCALARS}
    pg = dialect("postgresql")
    return {c.name: types[c.name] if c.name in types else c.type.compile(dialect=pg) for c in _row().selected_columns}


def _bounds() -> str:
    """The fail-closed bounds of the time facts, as the client's decoder holds them."""
    legs = [f"(f.{f.short} IS NOT NULL AND NOT (f.{f.short} >= 0 AND f.{f.short} < {f.bound}))" for f in FACTS if f.bound is not None]
    legs.append(f"(f.t_anchor IS NOT NULL AND NOT (f.t_anchor >= 0 AND f.t_anchor < {MAX_US}))")  # the turn's own anchor
    return "\n               OR ".join(legs)


def case_whens() -> str:
    """The table of checks as the WHEN branches of one CASE over ``f.<fact>`` and ``p_<param>``:
    each row's SQL, in order, giving its outcome (one line each, its id as a comment)."""
    return "\n             ".join(f"WHEN {c.sql} THEN '{c.outcome.value}'  -- {c.id}" for c in CHECKS)


@cache
def facts_function() -> str:
    """``CREATE OR REPLACE FUNCTION fg_facts``: the facts and what the checks decide from them."""
    return f"""
CREATE OR REPLACE FUNCTION fg_facts({_ARGS})
RETURNS TABLE ({_OUT}, outcome text)
LANGUAGE sql STABLE AS $fn$
    -- Rendered by floorgate.admission.decide.render from the declared facts and the table of
    -- checks: the facts in the client's encoding, and what the decision does ('insert', 'admit'
    -- or 'deny'). STABLE, not STRICT, one SELECT: the conditions for PostgreSQL to inline it.
    SELECT {", ".join(f"f.{f.short}" for f in FACTS)},
           CASE
             WHEN f.damaged IS NOT NULL OR COALESCE(f.bad_rule, false) THEN 'deny'  -- damaged
             WHEN {_bounds()} THEN 'deny'  -- out of bounds
             {case_whens()}
           END
      FROM ({_facts_row()}) f
$fn$
"""


def _goal_across() -> str:
    """Whether the goal's rule sets its floor across agents (``facts.goal_across``), as the
    function's SQL: the condition under which fg_admit takes the goal's lock."""
    r = _rules.alias("r")
    return server_sql(compiled(select(exists(select(ONE).where(r.c.goal_id == G, goal_across(r))).label("across")), "postgresql"))


@cache
def admit_function() -> str:
    """``CREATE OR REPLACE FUNCTION fg_admit``: the goal's lock when the goal's floor counts across
    agents (``p_goal_lock``: NULL when the caller may not take it), the agent's lock, ``fg_facts``
    again, the insert. A goal floor across agents found under the agent's lock without the goal's
    lock held (set meanwhile, or not to be taken) denies: racing agents of the goal would otherwise
    each admit under their own lock."""
    # fg_admit's signature since migration 0017: the kind before the reason, the locks before guarded.
    first = ", ".join(f"p_{p.name} {p.pg_type}" for p in PARAMS if p.name not in ("reason", "guarded", "lim"))
    outs = ", ".join(f"OUT {f.name} {f.pg_type}" for f in FACTS)
    return f"""
CREATE OR REPLACE FUNCTION fg_admit(
    {first}, p_kind text, p_reason text, p_lock bigint, p_goal_lock bigint, p_guarded boolean, p_lim integer,
    {outs}, OUT outcome text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    goal_locked boolean := false;
BEGIN
    -- Admission's lock order: the goal's before the agent's.
    IF p_goal_lock IS NOT NULL AND ({_goal_across()}) THEN
        PERFORM pg_advisory_xact_lock(p_goal_lock);
        goal_locked := true;
    END IF;
    PERFORM pg_advisory_xact_lock(p_lock);
    SELECT {", ".join(f"f.{f.name}" for f in FACTS)}, f.outcome
      INTO {_NAMES}, outcome
      FROM fg_facts({_ARG_NAMES}) f;
    IF outcome = 'insert' AND NOT goal_locked AND ({_goal_across()}) THEN
        outcome := 'deny';
    END IF;
    -- Only a decision taken under the agent's lock (and the goal's, where it counts) may write.
    IF outcome = 'insert' THEN
        INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind,
                               manual_reason, confirmed_at_us)
        VALUES (p_t, p_g, p_a, p_x, p_tr, p_now, 'reserved', p_kind, p_reason, NULL);
    END IF;
END
$fn$
"""


@cache
def functions_hash() -> str:
    """The hash of the rendered functions: what ``install`` compares with the store's."""
    return hashlib.sha256((facts_function() + admit_function()).encode()).hexdigest()


# A release whose functions take other arguments (a new parameter) would otherwise leave the old
# ones beside them as overloads: each is dropped before this release's are created.
_DROP_OTHER_SIGNATURES = """
DO $drop$
DECLARE r record;
BEGIN
    FOR r IN SELECT p.oid::regprocedure AS sig FROM pg_proc p
              WHERE p.proname IN ('fg_facts', 'fg_admit') AND p.pronamespace = CAST(current_schema() AS regnamespace)
    LOOP
        EXECUTE 'DROP FUNCTION ' || r.sig;
    END LOOP;
END
$drop$
"""

INSTALLED = select(_installed.c.hash).where(_installed.c.name == text_value("decision"))
"""The installed hash's query (``store`` reads it beside the schema revision in one SELECT)."""


def installed_hash(conn: Connection) -> str | None:
    """The hash of the decision functions installed in this PostgreSQL store (None: none recorded)."""
    found = conn.execute(INSTALLED).scalar()
    return found if isinstance(found, str) else None


def install(conn: Connection) -> None:
    """Install the rendered functions in this PostgreSQL store (in the caller's transaction, under
    its migration lock) unless the store already has this text; record its hash."""
    if installed_hash(conn) == functions_hash():
        return
    conn.exec_driver_sql(_DROP_OTHER_SIGNATURES)
    conn.exec_driver_sql(facts_function())
    conn.exec_driver_sql(admit_function())
    record = pg_insert(_installed).values(name="decision", hash=functions_hash())
    conn.execute(record.on_conflict_do_update(index_elements=[_installed.c.name], set_={"hash": record.excluded.hash}))
