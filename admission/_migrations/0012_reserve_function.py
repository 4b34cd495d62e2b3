"""PostgreSQL: ``fg_reserve``, the admission decision as one server-side call (one round trip).

It reads the same facts as ``admission._facts.FACTS_SQL`` without a lock; when they may admit it
takes the agent's advisory lock, reads them again and, only when they still admit, inserts the
reserved start. It returns those facts in the facts read's own encoding, plus what it did, so the
client decodes and explains them with the same code as every other backend (``gate._evaluate``);
the rule deciding whether to insert is the admitting branch of that function, written once more
here, and the table-driven test in tests/test_admission_parity.py holds the two together.

SQLite has no server: there the same read and insert run as separate statements.

Revision ID: 0012
Revises: 0011
"""

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# Times beyond year 9000, and floors beyond the policy cap (3660 days), are corrupt state.
_MAX_US = 221_845_392_000_000_000
_MAX_FLOOR_US = 3660 * 86_400 * 1_000_000

_FUNCTION = f"""
CREATE OR REPLACE FUNCTION fg_reserve(
    p_g text, p_a text, p_x text, p_xr text, p_t text, p_tr bigint, p_now bigint,
    p_kind text, p_reason text, p_lock bigint, p_guarded boolean, p_lock_admitted boolean,
    OUT rules text, OUT turn text, OUT agent_anchor bigint, OUT lane_anchor bigint,
    OUT lane_trigger bigint, OUT duplicate text, OUT damaged integer, OUT outcome text)
LANGUAGE plpgsql VOLATILE AS $fn$
DECLARE
    locked boolean := false;
    bad_rule boolean;
    active_rules integer;
    agent_floor bigint;
    lane_floor bigint;
    next_us bigint;
    t_phase text;
    t_goal text;
    t_agent text;
    t_lane text;
BEGIN
    LOOP
        -- The facts, exactly as FACTS_SQL reads them (the client decodes this encoding).
        SELECT
            (SELECT string_agg(COALESCE(r.agent_id, '?') || '/' || COALESCE(r.automation_id, '?') || '/'
                 || COALESCE(CAST(r.min_interval_us AS TEXT), '?') || '/' || COALESCE(CAST(r.revision AS TEXT), '?'), ' ')
               FROM fg_rules r WHERE r.goal_id = p_g AND (r.agent_id IN ('', p_a) OR r.agent_id IS NULL)
               AND (r.automation_id IN ('', p_xr) OR r.automation_id IS NULL)),
            (SELECT COALESCE(s.phase, '') || '/' || COALESCE(s.goal_id, '?') || '/' || COALESCE(s.agent_id, '?') || '/'
                 || COALESCE(s.automation_id, '?') || '/' || COALESCE(CAST(s.anchor_us AS TEXT), '?')
               FROM fg_starts s WHERE s.turn_id = p_t),
            (SELECT s.anchor_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a
               ORDER BY s.anchor_us DESC LIMIT 1),
            (SELECT s.anchor_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a AND s.automation_id = p_x
               ORDER BY s.anchor_us DESC LIMIT 1),
            (SELECT s.trigger_us FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a AND s.automation_id = p_x
               ORDER BY s.trigger_us DESC LIMIT 1),
            (SELECT s.turn_id FROM fg_starts s WHERE s.goal_id = p_g AND s.agent_id = p_a AND s.automation_id = p_x
               AND s.trigger_us = p_tr)
          INTO rules, turn, agent_anchor, lane_anchor, lane_trigger, duplicate;
        damaged := NULL;
        IF p_guarded THEN
            -- A store rebuilt without its NOT NULL constraints (the client's GUARDED_FACTS_SQL).
            SELECT 1 INTO damaged WHERE EXISTS (SELECT 1 FROM fg_starts WHERE goal_id IS NULL)
                OR EXISTS (SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id IS NULL)
                OR EXISTS (SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id = p_a AND anchor_us IS NULL)
                OR EXISTS (SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id = p_a AND automation_id IS NULL)
                OR EXISTS (SELECT 1 FROM fg_starts WHERE goal_id = p_g AND agent_id = p_a AND automation_id = p_x
                           AND trigger_us IS NULL);
        END IF;

        -- What the client's decision will be, as far as it matters here: 'insert' (eligible or
        -- manual), 'admit' (resumed or no rule: admitted without a new start) or 'deny'.
        SELECT bool_or(r.agent_id IS NULL OR r.automation_id IS NULL OR r.min_interval_us IS NULL OR r.revision IS NULL
                       OR r.min_interval_us < 0 OR r.min_interval_us > {_MAX_FLOOR_US} OR r.revision < 1),
               count(*) FILTER (WHERE r.min_interval_us > 0),
               COALESCE(max(r.min_interval_us) FILTER (WHERE r.automation_id = ''), 0),
               COALESCE(max(r.min_interval_us) FILTER (WHERE r.automation_id <> ''), 0)
          INTO bad_rule, active_rules, agent_floor, lane_floor
          FROM fg_rules r WHERE r.goal_id = p_g AND (r.agent_id IN ('', p_a) OR r.agent_id IS NULL)
           AND (r.automation_id IN ('', p_xr) OR r.automation_id IS NULL);
        outcome := 'deny';
        IF damaged IS NOT NULL OR COALESCE(bad_rule, false) THEN
            outcome := 'deny';
        ELSIF turn IS NOT NULL THEN
            SELECT COALESCE(s.phase, ''), s.goal_id, s.agent_id, s.automation_id INTO t_phase, t_goal, t_agent, t_lane
              FROM fg_starts s WHERE s.turn_id = p_t;
            IF t_phase = 'reserved' AND t_goal = p_g AND t_agent = p_a AND t_lane = p_x THEN
                outcome := 'admit';
            END IF;
        ELSIF (agent_anchor IS NOT NULL AND NOT (agent_anchor >= 0 AND agent_anchor < {_MAX_US}))
           OR (lane_anchor IS NOT NULL AND NOT (lane_anchor >= 0 AND lane_anchor < {_MAX_US}))
           OR (lane_trigger IS NOT NULL AND NOT (lane_trigger >= 0 AND lane_trigger < {_MAX_US})) THEN
            outcome := 'deny';
        ELSIF active_rules = 0 THEN
            outcome := 'admit';
        ELSIF agent_anchor IS NOT NULL AND p_now < agent_anchor THEN
            outcome := 'deny';
        ELSIF duplicate IS NOT NULL THEN
            outcome := 'deny';
        ELSIF lane_trigger IS NOT NULL AND p_tr < lane_trigger THEN
            outcome := 'deny';
        ELSE
            next_us := NULL;
            IF agent_anchor IS NOT NULL AND agent_floor > 0 THEN
                next_us := agent_anchor + agent_floor;
            END IF;
            IF p_x <> '' AND lane_anchor IS NOT NULL AND lane_floor > 0 THEN
                next_us := GREATEST(next_us, lane_anchor + lane_floor);
            END IF;
            IF next_us IS NOT NULL AND p_now < next_us AND p_reason IS NULL THEN
                outcome := 'deny';
            ELSE
                outcome := 'insert';
            END IF;
        END IF;

        -- Only a decision taken under the agent's lock may write.
        EXIT WHEN locked OR outcome = 'deny' OR (outcome = 'admit' AND NOT p_lock_admitted);
        PERFORM pg_advisory_xact_lock(p_lock);
        locked := true;
    END LOOP;
    IF outcome = 'insert' THEN
        INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind,
                               manual_reason, confirmed_at_us)
        VALUES (p_t, p_g, p_a, p_x, p_tr, p_now, 'reserved', p_kind, p_reason, NULL);
    END IF;
END
$fn$
"""

_SIGNATURE = "fg_reserve(text, text, text, text, text, bigint, bigint, text, text, bigint, boolean, boolean)"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_FUNCTION)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"DROP FUNCTION IF EXISTS {_SIGNATURE}")
