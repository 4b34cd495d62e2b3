"""Setting a few keys in a TOML file someone else owns, keeping the rest of its text as it is.

The standard library reads TOML but does not write it. The edit here is textual: a key of a table
whose ``[header]`` line is found is replaced in place (or added under the header), a table not
found is appended; then the result is parsed again and must equal the file as read with exactly
those keys set. A file laid out otherwise (the table written inline, as dotted keys, or spread
over an array) is refused, never guessed at.
"""

from __future__ import annotations

import copy
import json
import re
import tomllib
from typing import Any

from floorgate.admission import InvalidInput

Tables = dict[tuple[str, ...], dict[str, str]]  # table path -> string keys to set in it

_HEADER = re.compile(r"^\s*\[(?!\[)")
_ANY_HEADER = re.compile(r"^\s*\[")


def render(tables: Tables) -> str:
    """The tables as TOML text (what the owner would add by hand)."""
    out = []
    for path, values in tables.items():
        out.append("[" + ".".join(_key(p) for p in path) + "]")
        out += [f"{_key(k)} = {_string(v)}" for k, v in values.items()]
    return "\n".join(out) + "\n"


def merged(text: str, tables: Tables, where: str) -> str:
    """``text`` with every key of ``tables`` set; raises ``InvalidInput`` naming ``where`` when the
    file cannot be read or changed that way."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput("--trust", f"{where} is not valid TOML ({exc}); fix it first") from None
    expected = copy.deepcopy(doc)
    for path, values in tables.items():
        node = expected
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InvalidInput("--trust", f"{where}: {'.'.join(path)} is not a table; fix it or add the lines yourself")
        node.update(values)
    lines = text.splitlines()
    for path, values in tables.items():
        lines = _set(lines, path, values)
    result = "\n".join(lines) + "\n"
    try:
        if tomllib.loads(result) == expected:
            return result
    except tomllib.TOMLDecodeError:
        pass
    raise InvalidInput("--trust", f"{where} is laid out in a way this merge does not edit; add the printed lines yourself")


def _set(lines: list[str], path: tuple[str, ...], values: dict[str, str]) -> list[str]:
    start = next((i for i, line in enumerate(lines) if _HEADER.match(line) and _header_path(line) == path), None)
    if start is None:
        block = render({path: values}).splitlines()
        return [*lines, *([""] if lines and lines[-1].strip() else []), *block]
    end = next((j for j in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[j])), len(lines))
    body = lines[start + 1 : end]
    for key, value in values.items():
        assign = f"{_key(key)} = {_string(value)}"
        pattern = re.compile(rf"^\s*{re.escape(key)}\s*=|^\s*{re.escape(_key(key))}\s*=")
        at = next((k for k, line in enumerate(body) if pattern.match(line)), None)
        if at is None:
            body.insert(0, assign)
        else:
            body[at] = assign
    return [*lines[: start + 1], *body, *lines[end:]]


def _header_path(line: str) -> tuple[str, ...] | None:
    try:
        node: Any = tomllib.loads(line)
    except tomllib.TOMLDecodeError:
        return None
    path = []
    while isinstance(node, dict) and len(node) == 1:
        [(key, node)] = node.items()
        path.append(key)
    return tuple(path) if node == {} else None


def _key(text: str) -> str:
    return text if re.fullmatch(r"[A-Za-z0-9_-]+", text) else _string(text)


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string
