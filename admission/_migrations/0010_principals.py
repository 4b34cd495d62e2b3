"""Console principals (named tokens, only their hashes), and provenance of who vouched for an
owner_ref: a policy write says whether its owner_ref was asserted or authenticated, and a decided
ask records who decided it.

Revision ID: 0010
Revises: 0009
"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_principals",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("token_sha256", sa.String(64), nullable=False),
        sa.Column("created_at_us", sa.BigInteger, nullable=False),
        sa.Column("revoked_at_us", sa.BigInteger, nullable=True),
    )
    with op.batch_alter_table("fg_rule_history") as batch:  # every write before this one was asserted
        batch.add_column(sa.Column("owner_kind", sa.String(16), nullable=False, server_default="asserted"))
    with op.batch_alter_table("fg_approvals") as batch:
        batch.add_column(sa.Column("decided_by", sa.String(64), nullable=True))
        batch.add_column(sa.Column("decided_by_kind", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_approvals") as batch:
        batch.drop_column("decided_by_kind")
        batch.drop_column("decided_by")
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.drop_column("owner_kind")
    op.drop_table("fg_principals")
