"""Turn claims: every journaled turn has one owner (``owner_id``) holding a lease
(``lease_expires_us``); a journal phase ``confirmed`` marks the point after which the host may
have spawned; reserved starts get a small partial index so recovery finds them in one lookup.

Existing rows are claimed by their old runner (``<runner_host>:legacy``) with a lease that ends
at the turn's deadline. An unsettled ``journaled`` row whose start is no longer reserved may have
spawned under the old code; it becomes ``confirmed`` (recovered as an unknown outcome, never rerun).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_RESERVED = sa.text("phase = 'reserved'")


def upgrade() -> None:
    with op.batch_alter_table("fg_turns") as batch:
        batch.add_column(sa.Column("owner_id", sa.String(160), nullable=True))
        batch.add_column(sa.Column("lease_expires_us", sa.BigInteger, nullable=True))
    op.execute(
        sa.text("UPDATE fg_turns SET owner_id = runner_host || :suffix, lease_expires_us = deadline_us WHERE owner_id IS NULL").bindparams(
            suffix=":legacy"
        )
    )
    op.execute(
        "UPDATE fg_turns SET phase = 'confirmed' WHERE phase = 'journaled' AND NOT EXISTS "
        "(SELECT 1 FROM fg_starts s WHERE s.turn_id = fg_turns.turn_id AND s.phase = 'reserved')"
    )
    op.create_index("ix_fg_starts_reserved", "fg_starts", ["anchor_us"], sqlite_where=_RESERVED, postgresql_where=_RESERVED)


def downgrade() -> None:
    op.drop_index("ix_fg_starts_reserved", table_name="fg_starts")
    op.execute("UPDATE fg_turns SET phase = 'journaled' WHERE phase = 'confirmed'")
    with op.batch_alter_table("fg_turns") as batch:
        batch.drop_column("lease_expires_us")
        batch.drop_column("owner_id")
