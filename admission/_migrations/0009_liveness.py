"""Liveness records: timer hosts' heartbeats, and each pre-model hook's last answer per automation
(which replaces the timer binding's ``hook_seen_at_us``); a turn's stop reason is kept whole.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_hosts",
        sa.Column("host_id", sa.String(200), primary_key=True),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("version", sa.String(64), nullable=False),
        sa.Column("started_at_us", sa.BigInteger, nullable=False),
        sa.Column("beat_at_us", sa.BigInteger, nullable=False),
        sa.Column("poll_us", sa.BigInteger, nullable=False),
        sa.Column("stopped_at_us", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "fg_hook_answers",
        sa.Column("automation_id", sa.String(128), primary_key=True),
        sa.Column("answered_at_us", sa.BigInteger, nullable=False),
        sa.Column("admitted", sa.Boolean, nullable=False),
        sa.Column("answers", sa.BigInteger, nullable=False),
    )
    # A hook seen before stays seen (as one admitted answer at that time).
    op.execute(
        "INSERT INTO fg_hook_answers (automation_id, answered_at_us, admitted, answers) "
        "SELECT automation_id, hook_seen_at_us, true, 1 FROM fg_timer_bindings WHERE hook_seen_at_us IS NOT NULL"
    )
    with op.batch_alter_table("fg_timer_bindings") as batch:
        batch.drop_column("hook_seen_at_us")
    with op.batch_alter_table("fg_turns") as batch:  # a suggested command is never cut mid-word
        batch.alter_column("stop_reason", type_=sa.Text, existing_type=sa.String(128), existing_nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("fg_turns") as batch:
        batch.alter_column("stop_reason", type_=sa.String(128), existing_type=sa.Text, existing_nullable=True)
    with op.batch_alter_table("fg_timer_bindings") as batch:
        batch.add_column(sa.Column("hook_seen_at_us", sa.BigInteger, nullable=True))
    op.drop_table("fg_hook_answers")
    op.drop_table("fg_hosts")
