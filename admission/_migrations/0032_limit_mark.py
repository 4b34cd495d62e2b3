"""A SQLite store's limit mark: ``fg_limit_mark`` holds one row, and triggers set it to a fresh
random value in the same transaction as any change to what a limited lane's decision reads (its
starts, usage, rules, prices, and an automation's model or id: an id changed moves a model). A decision that reads the mark
unchanged since its lane's limits were last read takes what that read found instead of reading
them again (``admission._limit_read``). A random value, not a counter: a store restored from a
backup, or a copy of another, never meets a value a process kept for different rows.

PostgreSQL gets the table but no triggers: its decisions read their limits in the one round trip
they make anyway, and a row every admission updated would serialize them across agents.

Revision ID: 0032
Revises: 0031
"""

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

# The tables (and, for automations, the columns) a limited lane's read depends on.
WATCHED = {
    "fg_starts": ("INSERT", "UPDATE", "DELETE"),
    "fg_usage": ("INSERT", "UPDATE", "DELETE"),
    "fg_rules": ("INSERT", "UPDATE", "DELETE"),
    "fg_model_prices": ("INSERT", "UPDATE", "DELETE"),
    "fg_automations": ("INSERT", "UPDATE OF model, automation_id", "DELETE"),
}


def trigger_names() -> list[str]:
    """The triggers' names, as ``admission._upgrade.limit_marks_intact`` looks for them."""
    return [f"fg_limit_mark_{table[3:]}_{event.split()[0].lower()}" for table, events in WATCHED.items() for event in events]


def upgrade() -> None:
    op.create_table(
        "fg_limit_mark",
        sa.Column("k", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("n", sa.BigInteger, nullable=False),
    )
    if op.get_bind().dialect.name != "sqlite":
        op.execute("INSERT INTO fg_limit_mark (k, n) VALUES (0, 0)")
        return
    op.execute("INSERT INTO fg_limit_mark (k, n) VALUES (0, random())")
    names = iter(trigger_names())
    for table, events in WATCHED.items():
        for event in events:
            op.execute(
                f"CREATE TRIGGER {next(names)} AFTER {event} ON {table} BEGIN UPDATE fg_limit_mark SET n = random() WHERE k = 0; END"
            )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in trigger_names():
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.drop_table("fg_limit_mark")
