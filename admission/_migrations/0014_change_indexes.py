"""Indexes for a host's incremental sync: what changed since its last poll (automations and wake
states by update time, starts by anchor), the latest tick of a few automations by nominal time,
and the timer readbacks someone asked for.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_fg_ticks_automation_nominal", "fg_ticks", ["automation_id", "nominal_us"])
    op.create_index("ix_fg_automations_updated", "fg_automations", ["updated_at_us"])
    op.create_index("ix_fg_wake_state_updated", "fg_wake_state", ["updated_at_us"])
    op.create_index("ix_fg_starts_anchor", "fg_starts", ["anchor_us"])
    asked = sa.text("read_requested_at_us IS NOT NULL")
    op.create_index(
        "ix_fg_timer_bindings_read_requested", "fg_timer_bindings", ["read_requested_at_us"], sqlite_where=asked, postgresql_where=asked
    )


def downgrade() -> None:
    op.drop_index("ix_fg_timer_bindings_read_requested", "fg_timer_bindings")
    op.drop_index("ix_fg_starts_anchor", "fg_starts")
    op.drop_index("ix_fg_wake_state_updated", "fg_wake_state")
    op.drop_index("ix_fg_automations_updated", "fg_automations")
    op.drop_index("ix_fg_ticks_automation_nominal", "fg_ticks")
