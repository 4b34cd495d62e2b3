"""Initial schema: rules, rule history, starts.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_rules",
        sa.Column("goal_id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(128), primary_key=True),
        sa.Column("automation_id", sa.String(128), primary_key=True),
        sa.Column("min_interval_us", sa.BigInteger, nullable=False),
        sa.Column("owner_ref", sa.String(64), nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("updated_at_us", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "fg_rule_history",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("automation_id", sa.String(128), nullable=False),
        sa.Column("before_us", sa.BigInteger, nullable=True),
        sa.Column("after_us", sa.BigInteger, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("owner_ref", sa.String(64), nullable=False),
        sa.Column("changed_at_us", sa.BigInteger, nullable=False),
        sa.Column("reduction_authorized", sa.Boolean, nullable=False),
    )
    op.create_index("ix_fg_rule_history_scope", "fg_rule_history", ["goal_id", "agent_id", "automation_id", "id"])
    op.create_table(
        "fg_starts",
        sa.Column("turn_id", sa.String(128), primary_key=True),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("automation_id", sa.String(128), nullable=False),
        sa.Column("trigger_us", sa.BigInteger, nullable=False),
        sa.Column("anchor_us", sa.BigInteger, nullable=False),
        sa.Column("phase", sa.String(16), nullable=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("manual_reason", sa.Text, nullable=True),
        sa.Column("confirmed_at_us", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_fg_starts_agent_anchor", "fg_starts", ["goal_id", "agent_id", "anchor_us"])
    op.create_index("ix_fg_starts_lane_anchor", "fg_starts", ["goal_id", "agent_id", "automation_id", "anchor_us"])
    op.create_index("ix_fg_starts_lane_trigger", "fg_starts", ["goal_id", "agent_id", "automation_id", "trigger_us"], unique=True)


def downgrade() -> None:
    op.drop_table("fg_starts")
    op.drop_table("fg_rule_history")
    op.drop_table("fg_rules")
