"""Owner-set alert percentages of a rule's counts and budgets (``fg_rules.alert_at``, ``50,80,100``;
NULL: the default), for the ``budget_threshold`` events an admission writes once per window.

Revision ID: 0028
Revises: 0027
"""

import sqlalchemy as sa
from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_rules") as batch:
        batch.add_column(sa.Column("alert_at", sa.String(40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_rules") as batch:
        batch.drop_column("alert_at")
