"""The parts of a fleet file's plan that every section shares: the action on one object, its
step, the problem that stops the file, and the checks of one table's fields."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

from floorgate.admission import FloorgateError, InvalidInput

from . import _fleet_toml as toml

if TYPE_CHECKING:
    from .rule_writer import Writer

_Name = TypeVar("_Name")
_Read = TypeVar("_Read")


class Action(StrEnum):
    """What applying the file does to one object."""

    CREATE = "create"
    CHANGE = "change"
    UNCHANGED = "unchanged"
    REMOVE = "remove"


@dataclass(frozen=True)
class Step:
    """One object's planned action, what changes, and the write that carries it out (CAS on what was read)."""

    kind: str
    name: str
    action: Action
    line: int | None  # None: not in the file (a removal)
    changes: tuple[str, ...] = ()
    write: Callable[[Writer], None] | None = field(default=None, compare=False, repr=False)
    needs_owner: bool = False  # the write is recorded with an owner (floors)

    def doc(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "action": self.action.value, "line": self.line, "changes": list(self.changes)}


@dataclass(frozen=True)
class Problem:
    """Why an object (or the file) cannot be applied, at its line."""

    line: int
    what: str  # "automation nightly", "floor g/a", "file"
    message: str

    def text(self, source: str) -> str:
        return f"{source}:{self.line}: {self.what}: {self.message}"


def _duplicate(seen: dict[str, int], name: str, line: int, what: str) -> Problem | None:
    if name in seen:
        return Problem(line, what, f"is also described at line {seen[name]}; describe each once")
    seen[name] = line
    return None


def _what(v: dict[str, Any], kind: str, key: str) -> str:
    """How a problem names one ``kind`` table: by its ``key`` when that is text."""
    return f"{kind} {v[key]}" if isinstance(v.get(key), str) else kind


def _key(v: dict[str, Any], kind: str, fields: tuple[str, ...], key: str, fix: str) -> str:
    """The ``key`` of one ``kind`` table, refusing a field not in ``fields`` and a ``key`` that is not text (``fix``)."""
    unknown = sorted(set(v) - set(fields))
    if unknown:
        raise InvalidInput(unknown[0], f"is not a field of a {kind}; use {', '.join(fields)}")
    if not isinstance(v.get(key), str):
        raise InvalidInput(key, fix)
    return str(v[key])


def keyed_entries(
    tables: list[toml.Table],
    kind: str,
    fields: tuple[str, ...],
    key: str,
    fix: str,
    check: Callable[[str], _Name],
    read: Callable[[dict[str, Any], _Name, int], _Read],
    seen: dict[str, int],
    problems: list[Problem],
) -> list[_Read]:
    """What ``read(values, name, line)`` makes of each ``kind`` table, in the file's order: its
    ``key`` (``_key``, ``fix`` when it is missing) checked by ``check`` into its name, described
    once (``seen``: name -> line). A table with a problem is left out and its problem added to
    ``problems``."""
    found: list[_Read] = []
    for t in tables:
        v = t.values
        what = _what(v, kind, key)
        try:
            name = check(_key(v, kind, fields, key, fix))
            if (dup := _duplicate(seen, str(name), t.line, what)) is not None:
                problems.append(dup)
                continue
            found.append(read(v, name, t.line))
        except FloorgateError as exc:
            problems.append(Problem(t.line_of(exc), what, str(exc)))
    return found


def shown(value: Any) -> str:
    """One value in a plan's diff as an owner reads it: JSON (``"1d"``, ``3``, ``{"max_starts": 3}``),
    ``(unset)`` for a field not set; never Python's repr (``None``, ``'1d'``)."""
    return "(unset)" if value is None else json.dumps(value, sort_keys=True, default=str)


def changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[str, ...]:
    """``field: BEFORE -> AFTER`` for each field that differs, in field order."""
    return tuple(
        f"{k}: {shown(before.get(k))} -> {shown(after.get(k))}" for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)
    )
