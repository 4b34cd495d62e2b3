"""A SQLite store's limit mark (migration 0032) is replaced by a start or a usage row only in a goal
that a count or budget binds (or whose key is not text: damage is never left unmarked). A goal
without one has no limited lane, so no limit read depends on its rows; the write a floor-only
lane's admission and confirm made to the mark's row (a page more for each commit) is gone. A rule
written anywhere still replaces the mark, so a goal that becomes limited is read afresh.

Revision ID: 0033
Revises: 0032
"""

from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None

_BODY = "BEGIN UPDATE fg_limit_mark SET n = random() WHERE k = 0; END"
_LIMITED = "(fg_rules.max_starts IS NOT NULL OR fg_rules.budget_tokens IS NOT NULL OR fg_rules.budget_usd_micros IS NOT NULL)"
_ROWS = {"insert": ("NEW",), "update": ("OLD", "NEW"), "delete": ("OLD",)}


def _when(event: str) -> str:
    rows = _ROWS[event]
    damaged = " OR ".join(f"typeof({r}.goal_id) != 'text'" for r in rows)
    goal = f"= {rows[0]}.goal_id" if len(rows) == 1 else f"IN ({', '.join(r + '.goal_id' for r in rows)})"
    return f"WHEN {damaged} OR EXISTS (SELECT 1 FROM fg_rules WHERE fg_rules.goal_id {goal} AND {_LIMITED})"


def _create(table: str, event: str, when: bool) -> str:
    name = f"fg_limit_mark_{table[3:]}_{event}"
    condition = f"{_when(event)} " if when else ""
    return f"CREATE TRIGGER {name} AFTER {event.upper()} ON {table} {condition}{_BODY}"


def _remake(when: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in ("fg_starts", "fg_usage"):
        for event in _ROWS:
            op.execute(f"DROP TRIGGER IF EXISTS fg_limit_mark_{table[3:]}_{event}")
            op.execute(_create(table, event, when))


def upgrade() -> None:
    _remake(when=True)


def downgrade() -> None:
    _remake(when=False)
