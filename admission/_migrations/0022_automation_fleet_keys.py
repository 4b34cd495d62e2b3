"""An automation may carry the caller's ``external_id`` and ``labels`` (fleets managed over HTTP
or from an apply file find their own by these).

Revision ID: 0022
Revises: 0021
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("external_id", sa.String(128), nullable=True))
        batch.add_column(sa.Column("labels", sa.Text, nullable=True))  # JSON object of str -> str


def downgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("labels")
        batch.drop_column("external_id")
