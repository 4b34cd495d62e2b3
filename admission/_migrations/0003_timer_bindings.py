"""Timer bindings: which host keeps an automation's timer, desired versus observed, ACK state.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("timer", sa.String(16), nullable=False, server_default="apscheduler"))
    op.create_table(
        "fg_timer_bindings",
        sa.Column("automation_id", sa.String(128), primary_key=True),
        sa.Column("timer", sa.String(16), nullable=False),
        sa.Column("desired", sa.Text, nullable=True),
        sa.Column("desired_raised", sa.Boolean, nullable=False),
        sa.Column("hold_reason", sa.Text, nullable=True),
        sa.Column("desired_at_us", sa.BigInteger, nullable=False),
        sa.Column("applied_at_us", sa.BigInteger, nullable=True),
        sa.Column("apply_error", sa.Text, nullable=True),
        sa.Column("observed_state", sa.String(16), nullable=True),
        sa.Column("observed", sa.Text, nullable=True),
        sa.Column("observed_at_us", sa.BigInteger, nullable=True),
        sa.Column("ack_state", sa.String(16), nullable=False),
        sa.Column("acked_at_us", sa.BigInteger, nullable=True),
        sa.Column("acked_observed", sa.Text, nullable=True),
        sa.Column("read_requested_at_us", sa.BigInteger, nullable=True),
        sa.Column("hook_seen_at_us", sa.BigInteger, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("fg_timer_bindings")
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("timer")
