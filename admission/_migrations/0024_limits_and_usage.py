"""Limits across runs: starts per window and token/USD budgets on the policy rows, the usage
ledger budgets count (``fg_usage``: one row per turn, an estimate held at admission, reconciled
to what was reported), owner-set prices per million tokens (``fg_model_prices``), and the
envelope mode each host runs with (``fg_hosts.envelope_mode``).

Revision ID: 0024
Revises: 0023
"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("fg_rules") as batch:
        batch.add_column(sa.Column("max_starts", sa.Integer, nullable=True))
        batch.add_column(sa.Column("starts_window", sa.String(80), nullable=True))
        batch.add_column(sa.Column("budget_tokens", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("budget_usd_micros", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("budget_window", sa.String(80), nullable=True))
        batch.add_column(sa.Column("estimate_tokens", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("across_agents", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.add_column(sa.Column("limits_before", sa.Text, nullable=True))
        batch.add_column(sa.Column("limits_after", sa.Text, nullable=True))
    with op.batch_alter_table("fg_hosts") as batch:
        batch.add_column(sa.Column("envelope_mode", sa.String(16), nullable=True))
    op.create_table(
        "fg_usage",
        sa.Column("turn_id", sa.String(128), primary_key=True),
        sa.Column("goal_id", sa.String(128), nullable=False),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("automation_id", sa.String(128), nullable=False),
        sa.Column("at_us", sa.BigInteger, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("model", sa.String(128), nullable=True),
        sa.Column("estimate_tokens", sa.BigInteger, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=True),
        sa.Column("usd_micros", sa.BigInteger, nullable=True),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("settled_at_us", sa.BigInteger, nullable=True),
        sa.Column("report_key", sa.String(128), nullable=True),
    )
    op.create_index("ix_fg_usage_report", "fg_usage", ["report_key"], unique=True)
    op.create_index("ix_fg_usage_agent_at", "fg_usage", ["goal_id", "agent_id", "at_us"])
    op.create_index("ix_fg_usage_goal_at", "fg_usage", ["goal_id", "at_us"])
    op.create_table(
        "fg_model_prices",
        sa.Column("model", sa.String(128), primary_key=True),
        sa.Column("usd_per_mtok_micros", sa.BigInteger, nullable=True),
        sa.Column("revision", sa.Integer, nullable=False),
        sa.Column("owner_ref", sa.String(64), nullable=False),
        sa.Column("updated_at_us", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("fg_model_prices")
    op.drop_index("ix_fg_usage_report", "fg_usage")
    op.drop_index("ix_fg_usage_goal_at", "fg_usage")
    op.drop_index("ix_fg_usage_agent_at", "fg_usage")
    op.drop_table("fg_usage")
    with op.batch_alter_table("fg_hosts") as batch:
        batch.drop_column("envelope_mode")
    with op.batch_alter_table("fg_rule_history") as batch:
        batch.drop_column("limits_after")
        batch.drop_column("limits_before")
    with op.batch_alter_table("fg_rules") as batch:
        for name in (
            "across_agents",
            "estimate_tokens",
            "budget_window",
            "budget_usd_micros",
            "budget_tokens",
            "starts_window",
            "max_starts",
        ):
            batch.drop_column(name)
