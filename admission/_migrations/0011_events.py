"""Events and notifications: an outbox of past-tense event records written in the transaction of
the change they describe, webhook subscriptions, and one delivery row per (webhook, event).

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_events",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("event_id", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("subject", sa.String(400), nullable=False),
        sa.Column("data_json", sa.Text, nullable=False),
        sa.Column("occurred_at_us", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_fg_events_event_id", "fg_events", ["event_id"], unique=True)
    op.create_table(
        "fg_webhooks",
        sa.Column("webhook_id", sa.String(64), primary_key=True),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("events", sa.String(400), nullable=False),
        sa.Column("secret", sa.String(128), nullable=False),
        sa.Column("created_at_us", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "fg_deliveries",
        sa.Column("webhook_id", sa.String(64), primary_key=True),
        sa.Column("event_id", sa.String(64), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("last_status", sa.Integer, nullable=True),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_attempt_at_us", sa.BigInteger, nullable=True),
        sa.Column("next_attempt_at_us", sa.BigInteger, nullable=False),
        sa.Column("delivered_at_us", sa.BigInteger, nullable=True),
    )
    op.create_index("ix_fg_deliveries_due", "fg_deliveries", ["state", "next_attempt_at_us"])


def downgrade() -> None:
    op.drop_index("ix_fg_deliveries_due", "fg_deliveries")
    op.drop_table("fg_deliveries")
    op.drop_table("fg_webhooks")
    op.drop_index("ix_fg_events_event_id", "fg_events")
    op.drop_table("fg_events")
