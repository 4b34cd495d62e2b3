"""Helpers for the hostile-input tests: a whole-database dump to prove a rejection wrote nothing,
and the check that a command's failure is one line with a documented exit code."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from floorgate.admission import Store
from floorgate.admission._schema import metadata

DOCUMENTED_EXITS = range(6)  # scheduler/cli/main.py: 0 ok .. 5 a managed turn failed


# Every table that holds state: the limit mark (``fg_limit_mark``) is not state but a token each
# write to a limited lane's rows replaces (a hand edit put back leaves it changed, rightly).
STATE_TABLES = [t for t in metadata.sorted_tables if t.name != "fg_limit_mark"]


def dump(store: Store) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every floorgate table that holds state (``STATE_TABLES``), in a stable order."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with store.engine.connect() as conn:
        for table in STATE_TABLES:
            rows = conn.execute(text(f"SELECT * FROM {table.name}")).fetchall()
            out[table.name] = sorted((tuple(r) for r in rows), key=repr)
    return out


def assert_one_line(result: Any) -> None:
    """A refused command says so in one line on stderr, with a documented exit code, no traceback."""
    assert result.returncode in DOCUMENTED_EXITS, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
