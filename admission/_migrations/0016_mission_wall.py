"""A mission's wall clock is the run time of its turns, counted durably beside its other counters
(not calendar time since it opened, which kept running while it waited for its owner).

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_missions") as batch:
        batch.add_column(sa.Column("wall_ms", sa.BigInteger, nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    with op.batch_alter_table("fg_missions") as batch:
        batch.drop_column("wall_ms")
