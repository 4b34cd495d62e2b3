"""The SQLAlchemy metadata in admission/_schema.py says what the Alembic migrations build.

A fresh store is migrated to head (``open_store``, on both backends) and Alembic's autogenerate
compares the live schema with ``metadata``: a column, type, nullability, index or table present on
one side only is a difference. Any migration added later is covered without touching this test.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Column, Integer, MetaData, String, Table

from floorgate.admission import Store, open_store
from floorgate.admission import _schema as schema
from floorgate.admission.store import _VERSION_TABLE


def _ours(obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any) -> bool:
    # The version table is Alembic's bookkeeping, not part of floorgate's metadata.
    return not (type_ == "table" and name == _VERSION_TABLE)


def differences(store: Store, metadata: Any = schema.metadata) -> list[Any]:
    """What autogenerate would write to bring the migrated database to ``metadata``."""
    with store.engine.connect() as conn:
        context = MigrationContext.configure(
            conn,
            opts={
                "compare_type": True,
                "compare_server_default": True,
                "include_object": _ours,
                "version_table": _VERSION_TABLE,
            },
        )
        return list(compare_metadata(context, metadata))


@pytest.fixture
def migrated(db_url: str) -> Iterator[Store]:
    """A store that Alembic itself migrated from empty (not the fixtures' template copy)."""
    s = open_store(db_url)
    try:
        yield s
    finally:
        s.close()


def test_metadata_matches_the_migrations(migrated: Store) -> None:
    found = differences(migrated)
    assert found == [], "\n".join(map(repr, found))


def test_the_template_store_is_the_migrated_schema(store: Store) -> None:
    # The `store` fixture starts from a session template; it must be what the migrations build.
    found = differences(store)
    assert found == [], "\n".join(map(repr, found))
    with store.engine.connect() as conn:
        assert MigrationContext.configure(conn, opts={"version_table": _VERSION_TABLE}).get_current_revision() == head()


def head() -> str | None:
    from alembic.script import ScriptDirectory

    from floorgate.admission.store import _MIGRATIONS

    return ScriptDirectory(str(_MIGRATIONS), version_locations=[str(_MIGRATIONS)]).get_current_head()


def test_a_difference_is_reported(migrated: Store) -> None:
    # The comparison can fail: an extra table, an extra column, a changed type and nullability.
    changed = MetaData()
    for table in schema.metadata.tables.values():
        table.to_metadata(changed)
    Table("fg_not_migrated", changed, Column("id", Integer, primary_key=True))
    rules = changed.tables["fg_rules"]
    rules.append_column(Column("not_migrated", String(8), nullable=True))
    rules.c.owner_ref.type = String(99)
    rules.c.compute_json.nullable = False
    found = differences(migrated, changed)
    kinds = sorted(d[0] if isinstance(d, tuple) else d[0][0] for d in found)
    assert kinds == ["add_column", "add_table", "modify_nullable", "modify_type"], found
