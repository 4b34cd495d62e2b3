"""A console principal's display zone (an IANA name, or NULL for UTC): the console shows times in
the zone its owner picked, remembered per principal rather than per browser.

Revision ID: 0023
Revises: 0022
"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_principals") as batch:
        batch.add_column(sa.Column("zone", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_principals") as batch:
        batch.drop_column("zone")
