"""Per automation, what a scheduled fire does when a floor denies it: ``wait`` for the floor's end
(what every automation did before, the default) or ``skip`` to the next fire the floors admit.

Revision ID: 0025
Revises: 0024
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("when_denied", sa.String(8), nullable=False, server_default="wait"))


def downgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("when_denied")
