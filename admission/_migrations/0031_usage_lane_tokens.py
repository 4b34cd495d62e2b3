"""A lane's largest recent turn (the estimate a budget holds when no envelope bounds a turn) as an
index walk: ``fg_usage (goal_id, agent_id, automation_id, tokens, at_us)`` over settled turns only
(a partial index, so no other read of the ledger picks it), read from the largest settled turn
down to the first one inside the lookback, instead of every row of the agent's last 30 days with
a table read each.

Revision ID: 0031
Revises: 0030
"""

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None


_SETTLED = sa.text("state = 'settled'")


def upgrade() -> None:
    columns = ["goal_id", "agent_id", "automation_id", "tokens", "at_us"]
    op.create_index("ix_fg_usage_lane_tokens", "fg_usage", columns, sqlite_where=_SETTLED, postgresql_where=_SETTLED)


def downgrade() -> None:
    op.drop_index("ix_fg_usage_lane_tokens", table_name="fg_usage")
