"""Failed sign-ins remember a fingerprint of the token that failed (``token_sha256``, the
SHA-256 of the presented token, never the token), so the console's limit can tell one stale
token tried again and again (it locks only itself) from many different tokens tried from one
address (guessing, which locks the address).

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_signin_failures") as batch:
        batch.add_column(sa.Column("token_sha256", sa.String(64), nullable=True))
        batch.create_index("ix_fg_signin_failures_token", ["token_sha256", "at_us"])


def downgrade() -> None:
    with op.batch_alter_table("fg_signin_failures") as batch:
        batch.drop_index("ix_fg_signin_failures_token")
        batch.drop_column("token_sha256")
