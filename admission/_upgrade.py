"""The store's schema: its revision read at open (``head_revision``, one plain SELECT when the store
is at the head), Alembic's migrations applied under a lock when it is not, and whether a constraint
admission relies on was lost in a hand rebuild (``constraints_relaxed``).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Column, MetaData, String, Table, func, literal, select, text, union_all
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.sql.selectable import Select

from ._engines import no_store
from .errors import FloorgateError, SchemaTooNew

MIGRATIONS = Path(__file__).with_name("_migrations")
VERSION_TABLE = "fg_alembic_version"
VERSION = Table(VERSION_TABLE, MetaData(), Column("version_num", String(32), primary_key=True))
"""Alembic's version table, for the reads that check the revision (Alembic owns its rows)."""
_MIGRATION_LOCK = 0x666C6F6F72  # "floor": the advisory lock id that serializes schema upgrades


class Opened(Protocol):
    """What opening needs of a ``Store``: its dialect, its printable URL and its transactions."""

    @property
    def dialect(self) -> str: ...

    @property
    def safe_url(self) -> str: ...

    @property
    def url(self) -> str: ...

    def read(self) -> AbstractContextManager[Connection]: ...

    def write(self, lock_key: str | None = None) -> AbstractContextManager[Connection]: ...


_REVISION_LINE = re.compile(r"^(down_revision|revision)\s*(?::[^=]*)?=\s*(?:\"([^\"]*)\"|'([^']*)'|None)", re.MULTILINE)


def head_revision(folder: Path = MIGRATIONS) -> str | None:
    """The schema head as Alembic would name it, read from the migration files' ``revision`` and
    ``down_revision`` lines without importing Alembic (a store at the head never needs it).
    None when the files do not name exactly one head: the caller then asks Alembic."""
    revisions: set[str] = set()
    parents: set[str] = set()
    try:
        files = [f for f in folder.iterdir() if f.suffix == ".py" and not f.name.startswith("_")]
        for f in files:
            found = {m.group(1): m.group(2) or m.group(3) for m in _REVISION_LINE.finditer(f.read_text(encoding="utf-8"))}
            if "revision" not in found or found["revision"] is None:
                return None
            revisions.add(found["revision"])
            if found.get("down_revision"):
                parents.add(str(found["down_revision"]))
    except (OSError, UnicodeDecodeError):
        return None
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _at_head(store: Opened) -> bool:
    """Whether the store's recorded revision is the head, read with one plain SELECT (no Alembic),
    and on PostgreSQL whether its decision functions are this floorgate's rendering (by hash).
    False whenever that cannot be told (no version table yet, a fresh file): Alembic decides."""
    head = head_revision()
    if head is None:
        return False
    pg = store.dialect == "postgresql"
    # On PostgreSQL the installed hash rides on the same SELECT: every hook and command opens a
    # store, and a second query would be a second round trip at each start.
    query = select(VERSION.c.version_num)
    if pg:
        from .decide import render  # the decision's modules import this one

        query = query.add_columns(render.INSTALLED.scalar_subquery())
    try:
        with store.read() as conn:
            rows = conn.execute(query).fetchall()
            if [r[0] for r in rows] != [head]:
                return False
            return not pg or rows[0][1] == render.functions_hash()
    except (SQLAlchemyError, FloorgateError):
        return False  # Alembic's own read names the problem


def migrate(store: Opened, *, create: bool = True) -> bool:
    """Bring ``store`` to this floorgate's schema head under the migration lock (and, on PostgreSQL,
    its decision functions to this rendering); refuse a revision newer than this floorgate knows.
    ``create=False``: a database with no schema yet is ``NoStore``, not a new store. True when
    this call created the store (the database held no schema)."""
    if _at_head(store):
        return False
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from .decide import render  # the decision's modules import this one

    script = ScriptDirectory(str(MIGRATIONS), version_locations=[str(MIGRATIONS)])
    head = script.get_current_head()

    def current(conn: Connection) -> str | None:
        ctx = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        rev = ctx.get_current_revision()
        if rev is not None:
            try:
                known = script.get_revision(rev)
            except Exception:
                known = None
            if known is None:
                raise SchemaTooNew(
                    f"store {store.safe_url} has schema revision {rev!r}, newer than this floorgate "
                    f"(it knows up to {head!r}); upgrade floorgate. Nothing was written."
                )
        return rev

    pg = store.dialect == "postgresql"
    with store.read() as conn:
        found = current(conn)
        # PostgreSQL's decision functions are installed after the migrations whenever their
        # rendered text changed (decide.render): a repeatable step, keyed by the text's hash.
        if found == head and (not pg or render.installed_hash(conn) == render.functions_hash()):
            return False
        if found is None and not create:
            raise no_store(store.safe_url)
    with store.write(lock_key=None) as conn:
        if store.dialect == "postgresql":
            # Another host may be migrating, and DDL on a large table takes its time: wait for both.
            conn.execute(text("SET LOCAL lock_timeout = 0"))
            conn.execute(text("SET LOCAL statement_timeout = 0"))
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATION_LOCK})
        rev = current(conn)
        if rev == head:
            if pg:
                render.install(conn)
            return False
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))

        def upgrade(_rev, _context):  # type: ignore[no-untyped-def]
            return script._upgrade_revs(head, rev)  # type: ignore[arg-type]  # rev None: a fresh database

        with EnvironmentContext(cfg, script, fn=upgrade, destination_rev=head) as env:
            env.configure(connection=conn, version_table=VERSION_TABLE, transactional_ddl=True)
            env.run_migrations()
        if pg:
            render.install(conn)
    return rev is None


# The columns admission's facts read that the schema declares NOT NULL.
_REQUIRED = {
    "fg_starts": ("turn_id", "goal_id", "agent_id", "automation_id", "trigger_us", "anchor_us"),
    "fg_rules": ("goal_id", "agent_id", "automation_id", "min_interval_us", "revision"),
}


def _sqlite_nullable(table: str) -> Select[Any]:
    info = func.pragma_table_info(literal(table)).table_valued("name", "notnull")
    return select(literal(table), info.c.name).where(info.c.notnull == 0)


_SQLITE_NULLABLE = union_all(*map(_sqlite_nullable, _REQUIRED))


def constraints_relaxed(store: Opened) -> bool:
    """Whether any column in ``_REQUIRED`` accepts NULL in this database (a table rebuilt by hand
    without its constraints); read once at open, in one query over every table, so a rebuild
    takes effect when the store reopens."""
    with store.read() as conn:
        if store.dialect == "sqlite":
            # One statement over the tables; a SQLite key may hold NULL without "notnull", so only
            # the flag counts.
            rows = conn.execute(_SQLITE_NULLABLE).fetchall()
        else:
            rows = conn.execute(
                text(
                    "SELECT table_name, column_name FROM information_schema.columns WHERE table_name = ANY(:t) "
                    "AND table_schema = current_schema() AND is_nullable = 'YES'"
                ),
                {"t": list(_REQUIRED)},
            ).fetchall()
    nullable = {(r[0], r[1]) for r in rows}
    return any((table, column) in nullable for table, columns in _REQUIRED.items() for column in columns)


# The triggers migrations 0032 and 0033 create on a SQLite store, by name: each replaces the limit mark
# (``fg_limit_mark``) when a row a limited lane's decision reads changes. The text is the one the
# migration wrote (SQLite keeps it as written): a trigger remade with another body, or one whose
# body SQLite rewrote (the mark's table renamed), is not the one a decision may rely on.
# Since migration 0033 a start's or usage row's trigger runs only in a goal a count or budget binds
# (or for a key that is not text): no limit read depends on another goal's rows.
_MARK_EVENTS = {("fg_automations", "update"): "UPDATE OF model, automation_id"}
_MARK_BODY = "BEGIN UPDATE fg_limit_mark SET n = random() WHERE k = 0; END"
_LIMITED_GOAL = "(fg_rules.max_starts IS NOT NULL OR fg_rules.budget_tokens IS NOT NULL OR fg_rules.budget_usd_micros IS NOT NULL)"
_MARK_ROWS = {"insert": ("NEW",), "update": ("OLD", "NEW"), "delete": ("OLD",)}


def _mark_when(table: str, event: str) -> str:
    if table not in ("fg_starts", "fg_usage"):
        return ""
    rows = _MARK_ROWS[event]
    damaged = " OR ".join(f"typeof({r}.goal_id) != 'text'" for r in rows)
    goal = f"= {rows[0]}.goal_id" if len(rows) == 1 else f"IN ({', '.join(r + '.goal_id' for r in rows)})"
    return f"WHEN {damaged} OR EXISTS (SELECT 1 FROM fg_rules WHERE fg_rules.goal_id {goal} AND {_LIMITED_GOAL}) "


def _mark_trigger(table: str, event: str) -> tuple[str, str]:
    name = f"fg_limit_mark_{table[3:]}_{event}"
    on = f"AFTER {_MARK_EVENTS.get((table, event), event.upper())} ON {table}"
    return name, f"CREATE TRIGGER {name} {on} {_mark_when(table, event)}{_MARK_BODY}"


LIMIT_MARK_TRIGGERS = {
    name: (table, sql)
    for table in ("fg_starts", "fg_usage", "fg_rules", "fg_model_prices", "fg_automations")
    for event in ("insert", "update", "delete")
    for name, sql in [_mark_trigger(table, event)]
}

# One read of what the marks rest on: how many of the triggers are there, on their tables, as
# written; whether the mark's row is; and the schema's version (SQLite adds one at every change
# of the schema, a trigger dropped or made included) that this was seen at.
MARK_CHECK_SQL = (
    "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'trigger' AND name || ' ' || tbl_name || ' ' || sql IN ("
    + ", ".join("'" + f"{name} {table} {sql}".replace("'", "''") + "'" for name, (table, sql) in sorted(LIMIT_MARK_TRIGGERS.items()))
    + ")), (SELECT count(*) FROM fg_limit_mark WHERE k = 0), (SELECT schema_version FROM pragma_schema_version)"
)

# Per SQLite store URL, what this process last saw of its marks: the schema version and whether
# every trigger and the mark were there at it. A decision keeps a limit read only at a version seen
# intact here; any other version is checked again first (``marks_seen``).
MARKS_SEEN: dict[str, tuple[int, bool]] = {}


def marks_seen(url: str, found: tuple[Any, ...] | None) -> tuple[int, bool] | None:
    """Record ``MARK_CHECK_SQL``'s row for the store at ``url``: its version and whether the marks
    were intact at it (None: nothing read)."""
    if found is None or type(found[2]) is not int:
        MARKS_SEEN.pop(url, None)
        return None
    seen = (found[2], found[0] == len(LIMIT_MARK_TRIGGERS) and found[1] == 1)
    if len(MARKS_SEEN) >= 4096:
        MARKS_SEEN.clear()
    MARKS_SEEN[url] = seen
    return seen


def limit_marks_intact(store: Opened) -> bool:
    """Whether this SQLite store has every limit-mark trigger (a table rebuilt by hand loses its
    own): only then may a decision reuse what its lane's last limit read found. Read at open (and
    recorded with the schema's version, ``marks_seen``); a decision that later finds another
    version checks again before it keeps anything. False on PostgreSQL (no marks there)."""
    if store.dialect != "sqlite":
        return False
    with store.read() as conn:
        found = conn.execute(text(MARK_CHECK_SQL)).first()
    seen = marks_seen(store.url, tuple(found) if found is not None else None)
    return seen is not None and seen[1]
