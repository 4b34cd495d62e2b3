"""The console's state in the store, and what the outbox needed next:

- ``fg_sessions``: signed-in console sessions (a session id's SHA-256 hash, never the id), so a
  restart or a second ``floorgate serve`` on the same store keeps them;
- ``fg_signin_failures``: failed sign-ins per client, so the rate limit holds across processes;
- ``fg_events.dedup_key``: an event observed rather than caused (``host_lost``, ``timer_drift``)
  is written once per occurrence, keyed;
- ``fg_webhooks.format``: ``json`` (the signed event document) or ``slack`` (``{"text": ...}``);
- ``fg_rule_history.note``: the owner's optional note on a policy write (the console's disclosure).

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_sessions",
        sa.Column("session_sha256", sa.String(64), primary_key=True),
        sa.Column("principal", sa.String(64), nullable=False),
        sa.Column("csrf", sa.String(64), nullable=False),
        sa.Column("created_at_us", sa.BigInteger, nullable=False),
        sa.Column("expires_at_us", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_fg_sessions_expires", "fg_sessions", ["expires_at_us"])
    op.create_table(
        "fg_signin_failures",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("client", sa.String(128), nullable=False),
        sa.Column("at_us", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_fg_signin_failures_client", "fg_signin_failures", ["client", "at_us"])
    with op.batch_alter_table("fg_events") as batch:
        batch.add_column(sa.Column("dedup_key", sa.String(200), nullable=True))
        batch.create_index("ix_fg_events_dedup_key", ["dedup_key"], unique=True)
    with op.batch_alter_table("fg_webhooks") as batch:
        batch.add_column(sa.Column("format", sa.String(16), nullable=False, server_default="json"))
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.add_column(sa.Column("note", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.drop_column("note")
    with op.batch_alter_table("fg_webhooks") as batch:
        batch.drop_column("format")
    with op.batch_alter_table("fg_events") as batch:
        batch.drop_index("ix_fg_events_dedup_key")
        batch.drop_column("dedup_key")
    op.drop_index("ix_fg_signin_failures_client", "fg_signin_failures")
    op.drop_table("fg_signin_failures")
    op.drop_index("ix_fg_sessions_expires", "fg_sessions")
    op.drop_table("fg_sessions")
