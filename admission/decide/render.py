"""PostgreSQL's decision functions, rendered from the facts and the table of checks.

``fg_facts`` (plain SQL the planner inlines into ``admission._facts.RESERVE_SQL``) reads the
facts declared in ``facts.FACTS`` with the client's encoding, and says what the decision does:
'deny' when a fact is damaged or outside its bound (the client's decoder fails closed there), else
the ``Outcome`` of the first row of ``checks.CHECKS`` whose SQL holds. ``fg_admit`` (PL/pgSQL)
takes the agent's advisory lock, reads again and inserts the start when it still says 'insert'.
``install`` puts this text in the store after its migrations whenever it changes (keyed by
``functions_hash``); no migration carries a function body any more.
"""

from __future__ import annotations

import hashlib
from functools import cache

from sqlalchemy import text
from sqlalchemy.engine import Connection

from .checks import CHECKS
from .facts import FACTS, PARAMS, RULES_WHERE, RULE_ROWS, TURN_TEXT, Fact, server_sql
from .floors import MAX_FLOOR_US, MAX_US

_ARGS = ", ".join(f"p_{p.name} {p.pg_type}" for p in PARAMS)
_ARG_NAMES = ", ".join(f"p_{p.name}" for p in PARAMS)
_OUT = ", ".join(f"{f.name} {f.pg_type}" for f in FACTS)
_NAMES = ", ".join(f.name for f in FACTS)
# Facts the function reads besides the rules and the turn (which it takes apart in subqueries).
_SCALARS = [f for f in FACTS if f.name not in ("rules", "turn")]


def _scalar(fact: Fact) -> str:
    """A fact in the function: its relaxed-store parts behind ``p_guarded``. Written so that the
    plain store's plan has the same shape with or without them (GREATEST ignores the NULL), which
    keeps PostgreSQL on one generic plan for the prepared statement instead of planning each call."""
    plain = server_sql(fact.sql)
    if fact.also is not None:
        return f"GREATEST({plain}, CASE WHEN p_guarded THEN (SELECT MAX(u.v) FROM ({server_sql(fact.also)}) AS u) END)"
    if fact.guarded is None:
        return plain
    if fact.sql == "NULL":
        return f"CASE WHEN p_guarded THEN {server_sql(fact.guarded)} END"
    return f"CASE WHEN p_guarded THEN {server_sql(fact.guarded)} ELSE {plain} END"


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
    scalars = ",\n               ".join(f"{_scalar(f)} AS {f.short}" for f in _SCALARS)
    return f"""
CREATE OR REPLACE FUNCTION fg_facts({_ARGS})
RETURNS TABLE ({_OUT}, outcome text)
LANGUAGE sql STABLE AS $fn$
    -- Rendered by floorgate.admission.decide.render from the declared facts and the table of
    -- checks: the facts in the client's encoding, and what the decision does ('insert', 'admit'
    -- or 'deny'). STABLE, not STRICT, one SELECT: the conditions for PostgreSQL to inline it.
    SELECT f.rules, f.turn, {", ".join(f"f.{f.short}" for f in _SCALARS)},
           CASE
             WHEN f.damaged IS NOT NULL OR COALESCE(f.bad_rule, false) THEN 'deny'  -- damaged
             WHEN {_bounds()} THEN 'deny'  -- out of bounds
             {case_whens()}
           END
      FROM (
        SELECT ru.rules, ru.bad_rule, ru.active_rules, ru.agent_floor, ru.lane_floor, ru.goal_floor,
               tu.turn, tu.t_phase, tu.t_goal, tu.t_agent, tu.t_lane, tu.t_anchor,
               {scalars}
          FROM (SELECT {RULE_ROWS["postgresql"]} AS rules,
                       bool_or(r.agent_id IS NULL OR r.automation_id IS NULL OR r.min_interval_us IS NULL
                               OR r.revision IS NULL OR r.min_interval_us < 0 OR r.min_interval_us > {MAX_FLOOR_US}
                               OR r.revision < 1 OR r.across_agents IS NULL) AS bad_rule,
                       count(*) FILTER (WHERE r.min_interval_us > 0) AS active_rules,
                       COALESCE(max(r.min_interval_us) FILTER (WHERE r.automation_id = ''), 0) AS agent_floor,
                       COALESCE(max(r.min_interval_us) FILTER (WHERE r.automation_id <> ''), 0) AS lane_floor,
                       COALESCE(max(r.min_interval_us)
                                FILTER (WHERE r.agent_id = '' AND r.automation_id = '' AND r.across_agents), 0) AS goal_floor
                  FROM fg_rules r WHERE {server_sql(RULES_WHERE)}) ru
          LEFT JOIN (SELECT {TURN_TEXT} AS turn,
                            COALESCE(s.phase, '') AS t_phase, s.goal_id AS t_goal, s.agent_id AS t_agent,
                            s.automation_id AS t_lane, s.anchor_us AS t_anchor
                       FROM fg_starts s WHERE s.turn_id = p_t) tu ON true
        OFFSET 0  -- kept a subquery: flattened, each reference below would rerun its lookups
      ) f
$fn$
"""


@cache
def admit_function() -> str:
    """``CREATE OR REPLACE FUNCTION fg_admit``: the agent's lock, ``fg_facts`` again, the insert."""
    # fg_admit's signature since migration 0017: the kind before the reason, the lock before guarded.
    first = ", ".join(f"p_{p.name} {p.pg_type}" for p in PARAMS if p.name not in ("reason", "guarded", "lim"))
    outs = ", ".join(f"OUT {f.name} {f.pg_type}" for f in FACTS)
    return f"""
CREATE OR REPLACE FUNCTION fg_admit(
    {first}, p_kind text, p_reason text, p_lock bigint, p_guarded boolean, p_lim integer, {outs}, OUT outcome text)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    SELECT {", ".join(f"f.{f.name}" for f in FACTS)}, f.outcome
      INTO {_NAMES}, outcome
      FROM fg_facts({_ARG_NAMES}) f;
    -- Only a decision taken under the agent's lock may write.
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

INSTALLED_SQL = "SELECT hash FROM fg_installed WHERE name = 'decision'"
"""The installed hash's query (``store`` reads it beside the schema revision in one SELECT)."""


def installed_hash(conn: Connection) -> str | None:
    """The hash of the decision functions installed in this PostgreSQL store (None: none recorded)."""
    found = conn.exec_driver_sql(INSTALLED_SQL).scalar()
    return found if isinstance(found, str) else None


def install(conn: Connection) -> None:
    """Install the rendered functions in this PostgreSQL store (in the caller's transaction, under
    its migration lock) unless the store already has this text; record its hash."""
    if installed_hash(conn) == functions_hash():
        return
    conn.exec_driver_sql(_DROP_OTHER_SIGNATURES)
    conn.exec_driver_sql(facts_function())
    conn.exec_driver_sql(admit_function())
    conn.execute(
        text("INSERT INTO fg_installed (name, hash) VALUES ('decision', :h) ON CONFLICT (name) DO UPDATE SET hash = excluded.hash"),
        {"h": functions_hash()},
    )
