"""Compute envelopes: blocks on policy rules, missions with durable counters, accounting
dispatches, owner approvals; automations gain model backend and usage meter.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_rules") as batch:
        batch.add_column(sa.Column("compute_json", sa.Text, nullable=True))
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.add_column(sa.Column("compute_before", sa.Text, nullable=True))
        batch.add_column(sa.Column("compute_after", sa.Text, nullable=True))
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("backend", sa.String(128), nullable=True))
        batch.add_column(sa.Column("meter", sa.String(32), nullable=False, server_default="none"))
    with op.batch_alter_table("fg_turns") as batch:
        batch.add_column(sa.Column("mission_id", sa.String(128), nullable=True))
    op.create_table(
        "fg_missions",
        sa.Column("mission_id", sa.String(128), primary_key=True),
        sa.Column("automation_id", sa.String(128), nullable=False),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("stop_reason", sa.Text, nullable=True),
        sa.Column("started_at_us", sa.BigInteger, nullable=False),
        sa.Column("settled_at_us", sa.BigInteger, nullable=True),
        sa.Column("turns", sa.Integer, nullable=False),
        sa.Column("tool_calls", sa.Integer, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("usage_reports", sa.Integer, nullable=False),
        sa.Column("extra_turns", sa.Integer, nullable=False),
        sa.Column("extra_tool_calls", sa.Integer, nullable=False),
        sa.Column("extra_tokens", sa.BigInteger, nullable=False),
        sa.Column("extra_wall_seconds", sa.Integer, nullable=False),
        sa.Column("latch", sa.Text, nullable=True),
        sa.Column("problems", sa.Text, nullable=True),
    )
    op.create_index("ix_fg_missions_automation", "fg_missions", ["automation_id", "status"])
    op.create_table(
        "fg_dispatches",
        sa.Column("request_id", sa.String(128), primary_key=True),
        sa.Column("mission_id", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("estimate_tokens", sa.BigInteger, nullable=False),
        sa.Column("actual_tokens", sa.BigInteger, nullable=True),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("created_at_us", sa.BigInteger, nullable=False),
        sa.Column("updated_at_us", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_fg_dispatches_mission", "fg_dispatches", ["mission_id", "state"])
    op.create_table(
        "fg_approvals",
        sa.Column("approval_id", sa.String(64), primary_key=True),
        sa.Column("mission_id", sa.String(128), nullable=False),
        sa.Column("scope", sa.String(400), nullable=False),
        sa.Column("bound", sa.String(32), nullable=False),
        sa.Column("proposal_json", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("created_at_us", sa.BigInteger, nullable=False),
        sa.Column("expires_at_us", sa.BigInteger, nullable=False),
        sa.Column("decided_at_us", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_fg_approvals_mission", "fg_approvals", ["mission_id", "state"])


def downgrade() -> None:
    op.drop_table("fg_approvals")
    op.drop_table("fg_dispatches")
    op.drop_table("fg_missions")
    with op.batch_alter_table("fg_turns") as batch:
        batch.drop_column("mission_id")
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("meter")
        batch.drop_column("backend")
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.drop_column("compute_after")
        batch.drop_column("compute_before")
    with op.batch_alter_table("fg_rules") as batch:
        batch.drop_column("compute_json")
