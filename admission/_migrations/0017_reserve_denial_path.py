"""PostgreSQL: a denial decided in plain SQL, the PL/pgSQL call made only when the facts may admit.

Migration 0013's ``fg_reserve`` ran every decision inside a PL/pgSQL call, and a denial paid for
that call (its executor, its SPI query) on top of the facts read. Here the read and the rule are
``fg_facts``, a SQL function the planner inlines into the client's statement
(``admission._reserve_sql.RESERVE_SQL``), and ``fg_admit`` (PL/pgSQL: the agent's advisory lock, the same
read again, the insert when it still admits) runs in that statement only when the unlocked read
may admit (a gated lateral subquery: never executed for a denial). Still one statement, one round
trip, one commit when it admits. The rule is written once here, in the facts read's encoding, as
0013 wrote it; ``gate._evaluate`` decides from the same facts, and tests/test_admission_parity.py
holds the two together.

Revision ID: 0017
Revises: 0016
"""

from pathlib import Path

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# Times beyond year 9000, and floors beyond the policy cap (3660 days), are corrupt state.
_MAX_US = 221_845_392_000_000_000
_MAX_FLOOR_US = 3660 * 86_400 * 1_000_000

# STABLE, not STRICT, one SELECT: the conditions for PostgreSQL to inline it into the caller.
_FACTS = f"""
CREATE OR REPLACE FUNCTION fg_facts(
    p_g text, p_a text, p_x text, p_xr text, p_t text, p_tr bigint, p_now bigint, p_reason text, p_guarded boolean)
RETURNS TABLE (rules text, turn text, agent_anchor bigint, lane_anchor bigint, lane_trigger bigint,
               duplicate text, damaged integer, outcome text)
LANGUAGE sql STABLE AS $fn$
    -- The facts, as FACTS_SQL reads and encodes them (the client decodes this encoding), and
    -- what the client's decision will be as far as it matters here: 'insert' (eligible or
    -- manual), 'admit' (resumed or no rule: admitted without a new start) or 'deny'. Each CASE
    -- branch in the order gate._evaluate takes it.
    SELECT f.rules, f.turn, f.ag, f.ln, f.ln_tr, f.dup, f.damaged,
           CASE
             WHEN f.damaged IS NOT NULL OR COALESCE(f.bad_rule, false) THEN 'deny'
             WHEN f.turn IS NOT NULL THEN
               CASE WHEN f.t_phase = 'reserved' AND f.t_goal = p_g AND f.t_agent = p_a AND f.t_lane = p_x
                    THEN 'admit' ELSE 'deny' END
             WHEN (f.ag IS NOT NULL AND NOT (f.ag >= 0 AND f.ag < {_MAX_US}))
               OR (f.ln IS NOT NULL AND NOT (f.ln >= 0 AND f.ln < {_MAX_US}))
               OR (f.ln_tr IS NOT NULL AND NOT (f.ln_tr >= 0 AND f.ln_tr < {_MAX_US})) THEN 'deny'
             WHEN f.active_rules = 0 THEN 'admit'
             WHEN f.ag IS NOT NULL AND p_now < f.ag THEN 'deny'  -- clock_rollback
             WHEN f.dup IS NOT NULL THEN 'deny'  -- duplicate_trigger
             WHEN f.ln_tr IS NOT NULL AND p_tr < f.ln_tr THEN 'deny'  -- stale_trigger
             WHEN p_reason IS NULL AND p_now < GREATEST(
                    CASE WHEN f.agent_floor > 0 THEN f.ag + f.agent_floor END,
                    CASE WHEN p_x <> '' AND f.lane_floor > 0 THEN f.ln + f.lane_floor END) THEN 'deny'  -- interval_wait
             ELSE 'insert'
           END
      FROM (
        SELECT ru.rules, ru.bad_rule, ru.active_rules, ru.agent_floor, ru.lane_floor,
               tu.turn, tu.t_phase, tu.t_goal, tu.t_agent, tu.t_lane,
               (SELECT s.anchor_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a
                 ORDER BY s.anchor_us DESC LIMIT 1) AS ag,
               (SELECT s.anchor_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a AND s.automation_id = p_x
                 ORDER BY s.anchor_us DESC LIMIT 1) AS ln,
               (SELECT s.trigger_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a AND s.automation_id = p_x
                 ORDER BY s.trigger_us DESC LIMIT 1) AS ln_tr,
               (SELECT s.turn_id FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a AND s.automation_id = p_x
                 AND s.trigger_us = p_tr) AS dup,
               -- A store rebuilt without its NOT NULL constraints (the client's GUARDED_FACTS_SQL).
               CASE WHEN p_guarded THEN (
                 SELECT 1 FROM fg_starts WHERE goal_id IS NULL
                 UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id IS NULL
                 UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id = p_a AND anchor_us IS NULL
                 UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id = p_a AND automation_id IS NULL
                 UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id = p_a AND automation_id = p_x
                   AND trigger_us IS NULL
                 LIMIT 1) END AS damaged
          FROM (SELECT string_agg(COALESCE(r.agent_id, '?') || '/' || COALESCE(r.automation_id, '?') || '/'
                          || COALESCE(CAST(r.min_interval_us AS TEXT), '?') || '/'
                          || COALESCE(CAST(r.revision AS TEXT), '?'), ' ') AS rules,
                       bool_or(r.agent_id IS NULL OR r.automation_id IS NULL OR r.min_interval_us IS NULL
                               OR r.revision IS NULL OR r.min_interval_us < 0 OR r.min_interval_us > {_MAX_FLOOR_US}
                               OR r.revision < 1) AS bad_rule,
                       count(*) FILTER (WHERE r.min_interval_us > 0) AS active_rules,
                       COALESCE(max(r.min_interval_us) FILTER (WHERE r.automation_id = ''), 0) AS agent_floor,
                       COALESCE(max(r.min_interval_us) FILTER (WHERE r.automation_id <> ''), 0) AS lane_floor
                  FROM fg_rules r WHERE r.goal_id = p_g AND (r.agent_id IN ('', p_a) OR r.agent_id IS NULL)
                   AND (r.automation_id IN ('', p_xr) OR r.automation_id IS NULL)) ru
          LEFT JOIN (SELECT COALESCE(s.phase, '') || '/' || COALESCE(s.goal_id, '?') || '/' || COALESCE(s.agent_id, '?')
                          || '/' || COALESCE(s.automation_id, '?') || '/' || COALESCE(CAST(s.anchor_us AS TEXT), '?') AS turn,
                            COALESCE(s.phase, '') AS t_phase, s.goal_id AS t_goal, s.agent_id AS t_agent,
                            s.automation_id AS t_lane
                       FROM fg_starts s WHERE s.turn_id = p_t) tu ON true
        OFFSET 0  -- kept a subquery: flattened, each reference below would rerun its lookups
      ) f
$fn$
"""

# Called only when the unlocked read may admit: the decision again under the agent's lock (a new
# statement, so a new snapshot that sees every start committed before the lock was granted).
_ADMIT = """
CREATE OR REPLACE FUNCTION fg_admit(
    p_g text, p_a text, p_x text, p_xr text, p_t text, p_tr bigint, p_now bigint,
    p_kind text, p_reason text, p_lock bigint, p_guarded boolean,
    OUT rules text, OUT turn text, OUT agent_anchor bigint, OUT lane_anchor bigint,
    OUT lane_trigger bigint, OUT duplicate text, OUT damaged integer, OUT outcome text)
LANGUAGE plpgsql VOLATILE AS $fn$
BEGIN
    PERFORM pg_advisory_xact_lock(p_lock);
    SELECT f.rules, f.turn, f.agent_anchor, f.lane_anchor, f.lane_trigger, f.duplicate, f.damaged, f.outcome
      INTO rules, turn, agent_anchor, lane_anchor, lane_trigger, duplicate, damaged, outcome
      FROM fg_facts(p_g, p_a, p_x, p_xr, p_t, p_tr, p_now, p_reason, p_guarded) f;
    -- Only a decision taken under the agent's lock may write.
    IF outcome = 'insert' THEN
        INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind,
                               manual_reason, confirmed_at_us)
        VALUES (p_t, p_g, p_a, p_x, p_tr, p_now, 'reserved', p_kind, p_reason, NULL);
    END IF;
END
$fn$
"""

_RESERVE = "fg_reserve(text, text, text, text, text, bigint, bigint, text, text, bigint, boolean, boolean)"
_SIGNATURES = (
    "fg_admit(text, text, text, text, text, bigint, bigint, text, text, bigint, boolean)",
    "fg_facts(text, text, text, text, text, bigint, bigint, text, boolean)",
)


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FACTS)
        op.execute(_ADMIT)
        op.execute(f"DROP FUNCTION IF EXISTS {_RESERVE}")  # the rule lives in fg_facts alone now


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        import importlib.util

        # 0013's fg_reserve, as that migration created it.
        path = Path(__file__).with_name("0013_reserve_function.py")
        spec = importlib.util.spec_from_file_location("fg_migration_0013", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        op.execute(module._FUNCTION)
        for signature in _SIGNATURES:
            op.execute(f"DROP FUNCTION IF EXISTS {signature}")
