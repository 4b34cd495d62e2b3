"""The usage ledger across every lane, newest first (``floorgate usage`` without a scope): an index
on ``fg_usage (at_us)`` that the listing walks backwards (a goal's or an agent's listing walks the
ledger's ``(goal_id, at_us)`` and ``(goal_id, agent_id, at_us)`` indexes).

Revision ID: 0030
Revises: 0029
"""

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_fg_usage_at", "fg_usage", ["at_us"])


def downgrade() -> None:
    op.drop_index("ix_fg_usage_at", table_name="fg_usage")
