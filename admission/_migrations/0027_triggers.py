"""Event triggers: ``fg_triggers`` holds each trigger (idempotent by its id within the automation)
until a turn starts for it (``served_at_us``, set by compare-and-set at the start), and each
automation's debounce (``debounce_quiet_us``; ``debounce_max_us``, NULL: no cap).

Revision ID: 0027
Revises: 0026
"""

import sqlalchemy as sa
from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_triggers",
        sa.Column("automation_id", sa.String(128), primary_key=True),
        sa.Column("trigger_id", sa.String(128), primary_key=True),
        sa.Column("trigger_key", sa.String(200), nullable=True),
        sa.Column("at_us", sa.BigInteger, nullable=False),
        sa.Column("served_at_us", sa.BigInteger, nullable=True),
        sa.Column("served_turn_id", sa.String(200), nullable=True),
    )
    op.create_index("ix_fg_triggers_pending", "fg_triggers", ["automation_id", "served_at_us"])
    op.create_index("ix_fg_triggers_at", "fg_triggers", ["at_us"])
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("debounce_quiet_us", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("debounce_max_us", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("debounce_max_us")
        batch.drop_column("debounce_quiet_us")
    op.drop_index("ix_fg_triggers_at", table_name="fg_triggers")
    op.drop_index("ix_fg_triggers_pending", table_name="fg_triggers")
    op.drop_table("fg_triggers")
