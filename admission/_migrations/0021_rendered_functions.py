"""The decision functions come from the renderer, not from migrations; the unused wake column goes.

``fg_installed`` records the hash of the PostgreSQL functions (``fg_facts``, ``fg_admit``) that
``admission.decide.render`` rendered from the table of checks and installed after the migrations:
a store opened by a floorgate whose rendered text differs installs it again (a repeatable step),
so no later migration carries a function body. The table exists on SQLite too (one schema), empty.
``fg_wake_state.last_nominal_us`` was never read (the tick log records what ticked).

Revision ID: 0021
Revises: 0020
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_installed",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    with op.batch_alter_table("fg_wake_state") as batch:
        batch.drop_column("last_nominal_us")


def downgrade() -> None:
    with op.batch_alter_table("fg_wake_state") as batch:
        batch.add_column(sa.Column("last_nominal_us", sa.BigInteger, nullable=True))
    op.drop_table("fg_installed")
