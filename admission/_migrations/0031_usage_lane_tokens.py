"""A lane's largest recent turn (the estimate a budget holds when no envelope bounds a turn) as an
index walk: ``fg_usage (goal_id, agent_id, automation_id, state, tokens, at_us)``, read from the
largest settled turn down to the first one inside the lookback, instead of every row of the agent's
last 30 days with a table read each.

Revision ID: 0031
Revises: 0030
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_fg_usage_lane_tokens", "fg_usage", ["goal_id", "agent_id", "automation_id", "state", "tokens", "at_us"])


def downgrade() -> None:
    op.drop_index("ix_fg_usage_lane_tokens", table_name="fg_usage")
