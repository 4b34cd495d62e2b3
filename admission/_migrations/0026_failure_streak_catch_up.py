"""An automation's failure streak (consecutive failed turns and when the latest failed, and the earliest automatic start it allows), and its
own failure and missed-run policy: ``hold_after`` (NULL: the default), ``catch_up`` (skip or
latest; NULL: the deployment's) and ``catch_up_window_us`` (NULL: the deployment's).

Revision ID: 0026
Revises: 0025
"""

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_wake_state") as batch:
        batch.add_column(sa.Column("failures", sa.Integer, nullable=False, server_default="0"))
        batch.add_column(sa.Column("failed_at_us", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("failing_until_us", sa.BigInteger, nullable=True))
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("hold_after", sa.Integer, nullable=True))
        batch.add_column(sa.Column("catch_up", sa.String(16), nullable=True))
        batch.add_column(sa.Column("catch_up_window_us", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("catch_up_window_us")
        batch.drop_column("catch_up")
        batch.drop_column("hold_after")
    with op.batch_alter_table("fg_wake_state") as batch:
        batch.drop_column("failing_until_us")
        batch.drop_column("failed_at_us")
        batch.drop_column("failures")
