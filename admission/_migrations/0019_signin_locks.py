"""Sign-in locks replace the per-failure rows: a console process counts failed sign-ins in its own
memory and writes one row only when a limit is reached (``fg_signin_locks``: what is locked and
until when), so a wrong token is never a store write, and every process on the store, and a
restarted one, still honours a lock once engaged.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_signin_locks",
        sa.Column("lock_key", sa.String(200), primary_key=True),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("until_us", sa.BigInteger, nullable=False),
    )
    op.create_index("ix_fg_signin_locks_until", "fg_signin_locks", ["until_us"])
    op.drop_index("ix_fg_signin_failures_token", "fg_signin_failures")
    op.drop_index("ix_fg_signin_failures_client", "fg_signin_failures")
    op.drop_table("fg_signin_failures")


def downgrade() -> None:
    op.create_table(
        "fg_signin_failures",
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("client", sa.String(128), nullable=False),
        sa.Column("at_us", sa.BigInteger, nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=True),
    )
    op.create_index("ix_fg_signin_failures_client", "fg_signin_failures", ["client", "at_us"])
    op.create_index("ix_fg_signin_failures_token", "fg_signin_failures", ["token_sha256", "at_us"])
    op.drop_index("ix_fg_signin_locks_until", "fg_signin_locks")
    op.drop_table("fg_signin_locks")
