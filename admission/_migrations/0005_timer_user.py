"""Timer bindings remember the host account they were applied to (e.g. whose crontab).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_timer_bindings") as batch:
        batch.add_column(sa.Column("host_user", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_timer_bindings") as batch:
        batch.drop_column("host_user")
