"""A start without an agent (a store rebuilt without its NOT NULL constraints) holds only the lanes
of its automation, not its whole goal forever.

Such a start cannot be attributed, so 0017's ``fg_facts`` denied every lane of its goal
(state_unavailable) for as long as the row stayed. Here it holds, for any agent, the lanes with its
automation id (and still the whole goal when its automation or anchor is missing too); for the
goal's other lanes its anchor counts as a possible last start of every agent, so a goal or agent
floor still counts from it. This is 0017's function with only that guard and the agent anchor
changed, as the client's ``GUARDED_FACTS_SQL`` reads them (tests/test_admission_parity.py holds
the two together). ``fg_admit`` calls ``fg_facts`` by name and is unchanged.

Revision ID: 0020
Revises: 0019
"""

from pathlib import Path

from alembic import op

revision = "0020"
down_revision = "0019"
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
               -- On a relaxed store a start without an agent could be this agent's last start
               -- (the client's _NULL_AGENT_ANCHOR); GREATEST ignores the NULL of an intact store.
               GREATEST((SELECT s.anchor_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a
                 ORDER BY s.anchor_us DESC LIMIT 1),
                 CASE WHEN p_guarded THEN (SELECT max(s.anchor_us) FROM fg_starts s
                   WHERE s.goal_id = p_g AND s.agent_id IS NULL) END) AS ag,
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
                   AND (automation_id IS NULL OR automation_id = p_x OR anchor_us IS NULL)
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


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FACTS)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        import importlib.util

        # 0017's fg_facts, as that migration created it.
        path = Path(__file__).with_name("0017_reserve_denial_path.py")
        spec = importlib.util.spec_from_file_location("fg_migration_0017", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        op.execute(module._FACTS)
