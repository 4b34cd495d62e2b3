"""The apply file's TOML: read into its sections with the line each table starts on, and write.

A file is arrays of tables, one per object (``[[automation]]``, ``[[floor]]``, ``[[webhook]]``);
``tomllib`` parses it, and the lines come from the headers as written (``tomllib`` keeps none).
The writer emits only what the reader reads back to the same values: strings, whole numbers,
floats, booleans, arrays of those, and inline tables."""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

_HEADER = re.compile(r"^\s*\[\[\s*([A-Za-z0-9_-]+)\s*\]\]")
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SYNTAX_LINE = re.compile(r"at line (\d+)")
_ANY_HEADER = re.compile(r"^\s*\[")
_ASSIGNS = re.compile(r'^\s*(?:([A-Za-z0-9_-]+)|"((?:[^"\\]|\\.)*)"|' r"'([^']*)')\s*[.=]")


@dataclass(frozen=True)
class Table:
    """One ``[[kind]]`` table of the file, the line its header is on and the line of each of its
    keys as written (``keys``: bare or quoted top-level keys; a dotted one under its first part)."""

    line: int
    values: dict[str, Any]
    keys: Mapping[str, int] = field(default_factory=dict)

    def line_of(self, exc: BaseException) -> int:
        """Where a problem with this table is: the line of the field ``exc`` names (an
        ``InvalidInput``'s, its first part), else the header's."""
        name = getattr(exc, "field", None)
        if isinstance(name, str):
            found = self.keys.get(re.split(r"[.[]", name, maxsplit=1)[0])
            if found is not None:
                return found
        return self.line


@dataclass(frozen=True)
class Parsed:
    """A file's tables by kind, or why it could not be read (``line``, message)."""

    tables: dict[str, list[Table]]
    problems: list[tuple[int, str]]


def read(text: str, kinds: tuple[str, ...]) -> Parsed:
    """The tables of ``text`` by kind; anything but arrays of the known ``kinds`` is a problem."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = _SYNTAX_LINE.search(str(exc))
        return Parsed({}, [(int(found.group(1)) if found else 1, f"is not valid TOML: {exc}")])
    lines: dict[str, list[int]] = {}
    keys: dict[int, dict[str, int]] = {}  # header line -> its table's keys' lines
    current: dict[str, int] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header is not None:
            lines.setdefault(header.group(1), []).append(number)
            current = keys.setdefault(number, {})
        elif _ANY_HEADER.match(line):
            current = None  # a [sub.table]: its keys are not the table's own
        elif current is not None and (assigned := _ASSIGNS.match(line)) is not None:
            current.setdefault(next(g for g in assigned.groups() if g is not None), number)
    tables: dict[str, list[Table]] = {}
    problems: list[tuple[int, str]] = []
    for key, value in doc.items():
        where = lines.get(key, [_key_line(text, key)])
        if key not in kinds:
            problems.append((where[0], f"[[{key}]] is not a section; use {', '.join(f'[[{k}]]' for k in kinds)}"))
            continue
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            problems.append((where[0], f"{key} must be tables, each headed [[{key}]]"))
            continue
        at = [where[i] if i < len(where) else where[-1] for i in range(len(value))]
        tables[key] = [Table(n, v, keys.get(n, {})) for n, v in zip(at, value, strict=True)]
    return Parsed(tables, problems)


def _key_line(text: str, key: str) -> int:
    """The first line that assigns or heads ``key`` (1 when none can be found)."""
    pattern = re.compile(rf"^\s*(\[+\s*)?{re.escape(key)}\b")
    return next((n for n, line in enumerate(text.splitlines(), start=1) if pattern.match(line)), 1)


def dumps(sections: list[tuple[str, list[dict[str, Any]]]], header: str = "") -> str:
    """``sections`` as TOML arrays of tables, in order, each preceded by a blank line."""
    out = [f"# {line}".rstrip() for line in header.splitlines()]
    for kind, items in sections:
        for values in items:
            out.append("")
            out.append(f"[[{kind}]]")
            out.extend(f"{_key(k)} = {_value(v)}" for k, v in values.items() if v is not None)
    return "\n".join(out).lstrip("\n") + "\n"


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(value: str) -> str:
    # JSON's escapes are TOML's (\" \\ \b \f \n \r \t \uXXXX); DEL is the one ASCII control it leaves raw.
    return json.dumps(value, ensure_ascii=True).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} has no TOML form floorgate writes")
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None) + "}"
    raise TypeError(f"{type(value).__name__} has no TOML form floorgate writes")
