"""A stuck verdict names the envelope bound that stopped it in a column of its own.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_turns") as batch:
        batch.add_column(sa.Column("stop_bound", sa.String(32), nullable=True))
    # Verdicts written before: the bound was only in the reason text ("... exhausted: max_turns=40").
    for bound in ("max_turns", "max_tool_calls", "max_tokens", "max_wall_seconds"):
        op.execute(
            f"UPDATE fg_turns SET stop_bound = '{bound}' WHERE status IN ('stuck', 'timed_out') "
            f"AND stop_reason LIKE 'compute bound exhausted: {bound}%'"
        )


def downgrade() -> None:
    with op.batch_alter_table("fg_turns") as batch:
        batch.drop_column("stop_bound")
