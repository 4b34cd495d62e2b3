"""The goal's latest start over all its agents, for a goal floor that counts across agents: an index
on ``fg_starts (goal_id, anchor_us)`` that the decision's ``goal_anchor`` fact walks backwards.

Revision ID: 0029
Revises: 0028
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_fg_starts_goal_anchor", "fg_starts", ["goal_id", "anchor_us"])


def downgrade() -> None:
    op.drop_index("ix_fg_starts_goal_anchor", table_name="fg_starts")
