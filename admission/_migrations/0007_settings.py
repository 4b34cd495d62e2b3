"""Deployment settings in the store (the host policy every host and every readback uses), and
the kind of an automation's hold in a column of its own; tick reasons up to 200 characters.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "fg_settings",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value_json", sa.Text, nullable=False),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("owner_ref", sa.String(64), nullable=False),
        sa.Column("updated_at_us", sa.BigInteger, nullable=False),
    )
    with op.batch_alter_table("fg_automations") as batch:
        batch.add_column(sa.Column("hold_kind", sa.String(16), nullable=True))
    with op.batch_alter_table("fg_ticks") as batch:  # a tick's reason is never cut short
        batch.alter_column("reason", type_=sa.String(200), existing_type=sa.String(32), existing_nullable=False)
    # Holds written before this revision: a stuck mission's note starts with "mission ".
    op.execute(
        "UPDATE fg_automations SET hold_kind = CASE WHEN state_note LIKE 'mission %' THEN 'mission_stuck' ELSE 'timer' END "
        "WHERE state = 'held'"
    )


def downgrade() -> None:
    with op.batch_alter_table("fg_ticks") as batch:
        batch.alter_column("reason", type_=sa.String(32), existing_type=sa.String(200), existing_nullable=False)
    with op.batch_alter_table("fg_automations") as batch:
        batch.drop_column("hold_kind")
    op.drop_table("fg_settings")
