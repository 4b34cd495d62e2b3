"""A launched turn's child is identified by more than its pid: the boot it was spawned in and its
start time (clock ticks since boot, /proc/<pid>/stat field 22). Recovery signals a process group
only when the live process still matches both; older rows (NULL) are never signalled.

Revision ID: 0018
Revises: 0017
"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_turns") as batch:
        batch.add_column(sa.Column("child_boot_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("child_start_ticks", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_turns") as batch:
        batch.drop_column("child_start_ticks")
        batch.drop_column("child_boot_id")
