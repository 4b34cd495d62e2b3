"""Automations, their wake state, the tick log and the turn journal.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_automations",
        sa.Column("automation_id", sa.String(128), primary_key=True),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("schedule", sa.Text, nullable=False),
        sa.Column("host_spec", sa.Text, nullable=False),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("overlap", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("state_note", sa.Text, nullable=True),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("created_at_us", sa.BigInteger, nullable=False),
        sa.Column("updated_at_us", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "fg_wake_state",
        sa.Column("automation_id", sa.String(128), primary_key=True),
        sa.Column("backoff_step", sa.Integer, nullable=False),
        sa.Column("backoff_wake_us", sa.BigInteger, nullable=True),
        sa.Column("last_nominal_us", sa.BigInteger, nullable=True),
        sa.Column("updated_at_us", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "fg_ticks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("automation_id", sa.String(128), nullable=False),
        sa.Column("nominal_us", sa.BigInteger, nullable=False),
        sa.Column("actual_us", sa.BigInteger, nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("turn_id", sa.String(128), nullable=True),
        sa.Column("host", sa.String(128), nullable=False),
    )
    op.create_index("ix_fg_ticks_automation", "fg_ticks", ["automation_id", "id"])
    op.create_table(
        "fg_turns",
        sa.Column("turn_id", sa.String(128), primary_key=True),
        sa.Column("automation_id", sa.String(128), nullable=False),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("manual_reason", sa.Text, nullable=True),
        sa.Column("runner_host", sa.String(128), nullable=False),
        sa.Column("runner_pid", sa.Integer, nullable=False),
        sa.Column("child_pid", sa.Integer, nullable=True),
        sa.Column("started_at_us", sa.BigInteger, nullable=False),
        sa.Column("deadline_us", sa.BigInteger, nullable=False),
        sa.Column("phase", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=True),
        sa.Column("stop_reason", sa.String(128), nullable=True),
        sa.Column("retryable", sa.Boolean, nullable=True),
        sa.Column("failure_category", sa.String(16), nullable=True),
        sa.Column("exit_code", sa.Integer, nullable=True),
        sa.Column("settled_at_us", sa.BigInteger, nullable=True),
        sa.Column("log_path", sa.Text, nullable=True),
    )
    op.create_index("ix_fg_turns_automation", "fg_turns", ["automation_id", "started_at_us"])
    op.create_index("ix_fg_turns_phase", "fg_turns", ["phase"])


def downgrade() -> None:
    op.drop_table("fg_turns")
    op.drop_table("fg_ticks")
    op.drop_table("fg_wake_state")
    op.drop_table("fg_automations")
