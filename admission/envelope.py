"""Compute envelopes: how much an admitted mission may spend (seed 000).

A compute block may sit on the policy at any scope. Bounds are per mission (one run episode of an
automation). Absent or 0 means unbounded; a narrower scope can only tighten (the smallest positive
bound wins, allowlists intersect, ``finish_stuck`` beats ``pause_ask``). Validation is strict
inside the block: integers only (no booleans, floats, NaN or strings), within defensive caps, no
unknown keys (``max_turn`` is a typo, not an unbounded mission).
"""

from __future__ import annotations

import difflib
import json
import math
from typing import Any, Literal

from ._types import Frozen
from .errors import InvalidInput

OnExhausted = Literal["finish_stuck", "pause_ask"]
CAPS = {
    "max_turns": 10_000,
    "max_tool_calls": 1_000_000,
    "max_tokens": 1_000_000_000,
    "max_wall_seconds": 7 * 86_400,
}
LISTS = ("model_allowlist", "backend_allowlist")
KEYS = (*CAPS, *LISTS, "on_exhausted")
_MAX_LIST = 64
_MAX_NAME = 128


class ComputeBlock(Frozen):
    """One scope's compute block, exactly as the owner wrote it (explicit keys are kept)."""

    max_turns: int | None = None
    max_tool_calls: int | None = None
    max_tokens: int | None = None
    max_wall_seconds: int | None = None
    model_allowlist: tuple[str, ...] | None = None
    backend_allowlist: tuple[str, ...] | None = None
    on_exhausted: OnExhausted | None = None

    def doc(self) -> dict[str, Any]:
        """The block as JSON, explicit keys only (an explicit default survives)."""
        out: dict[str, Any] = {}
        for key in KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = list(value) if isinstance(value, tuple) else value
        return out

    def is_empty(self) -> bool:
        return not self.doc()


class Envelope(Frozen):
    """The merged envelope binding one mission. 0 / None = unbounded."""

    max_turns: int = 0
    max_tool_calls: int = 0
    max_tokens: int = 0
    max_wall_seconds: int = 0
    model_allowlist: tuple[str, ...] | None = None
    backend_allowlist: tuple[str, ...] | None = None
    on_exhausted: OnExhausted = "finish_stuck"
    sources: tuple[str, ...] = ()  # scopes whose blocks contributed

    @property
    def bounded(self) -> bool:
        return bool(
            self.max_turns
            or self.max_tool_calls
            or self.max_tokens
            or self.max_wall_seconds
            or self.model_allowlist is not None
            or self.backend_allowlist is not None
        )


def parse_compute(value: Any, field: str = "--compute") -> ComputeBlock:
    """Validate a compute block given as JSON text or an already-decoded object."""
    if isinstance(value, str):
        try:
            value = json.loads(value, parse_constant=lambda c: float("nan"))
        except json.JSONDecodeError as exc:
            raise InvalidInput(field, f"not valid JSON ({exc.msg} at position {exc.pos})") from None
        except RecursionError:
            raise InvalidInput(field, "nested too deeply; a compute block is one flat JSON object") from None
    if not isinstance(value, dict):
        raise InvalidInput(field, 'a compute block is a JSON object, e.g. {"max_turns": 40}')
    fields: dict[str, Any] = {}
    for key, item in value.items():
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"; did you mean {close[0]}?" if close else f"; known keys: {', '.join(KEYS)}"
            raise InvalidInput(f"{field}.{key}", f"unknown compute key{hint}")
        if key in CAPS:
            if type(item) is not int:
                kind = (
                    "a boolean"
                    if isinstance(item, bool)
                    else ("NaN" if isinstance(item, float) and math.isnan(item) else type(item).__name__)
                )
                raise InvalidInput(f"{field}.{key}", f"must be a whole number, not {kind}")
            if item < 0 or item > CAPS[key]:
                raise InvalidInput(f"{field}.{key}", f"{item} is outside 0..{CAPS[key]} (0 means unbounded)")
            fields[key] = item
        elif key in LISTS:
            if not isinstance(item, list) or not item or len(item) > _MAX_LIST:
                raise InvalidInput(f"{field}.{key}", f"a non-empty list of at most {_MAX_LIST} names")
            for name in item:
                if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
                    raise InvalidInput(f"{field}.{key}", f"each entry is a name of 1..{_MAX_NAME} characters")
            fields[key] = tuple(item)
        else:
            if item not in ("finish_stuck", "pause_ask"):
                raise InvalidInput(f"{field}.{key}", "finish_stuck or pause_ask")
            fields[key] = item
    return ComputeBlock(**fields)


def merge(blocks: list[tuple[str, ComputeBlock]]) -> Envelope:
    """Merge blocks from the widest scope to the narrowest: a narrower scope can only tighten."""
    values: dict[str, Any] = dict.fromkeys(CAPS, 0)
    lists: dict[str, tuple[str, ...] | None] = dict.fromkeys(LISTS)
    on_exhausted: set[str] = set()
    sources = []
    for scope, block in blocks:
        if block.is_empty():
            continue
        sources.append(scope)
        for key in CAPS:
            bound = getattr(block, key)
            if bound:
                values[key] = bound if not values[key] else min(values[key], bound)
        for key in LISTS:
            allowed = getattr(block, key)
            if allowed is not None:
                lists[key] = allowed if lists[key] is None else tuple(x for x in lists[key] if x in allowed)  # type: ignore[union-attr]
        if block.on_exhausted is not None:
            on_exhausted.add(block.on_exhausted)
    mode: OnExhausted = "pause_ask" if on_exhausted == {"pause_ask"} else "finish_stuck"
    return Envelope(**values, **lists, on_exhausted=mode, sources=tuple(sources))


def loosened(before: ComputeBlock | None, after: ComputeBlock | None) -> list[str]:
    """What ``after`` loosens compared with ``before`` at the same scope (empty: nothing)."""
    old = before if before is not None else ComputeBlock()
    new = after if after is not None else ComputeBlock()
    out = []
    for key in CAPS:
        a, b = getattr(old, key) or 0, getattr(new, key) or 0
        if a and (not b or b > a):
            out.append(f"{key} {a} -> {b or 'unbounded'}")
    for key in LISTS:
        a, b = getattr(old, key), getattr(new, key)
        if a is not None and (b is None or set(b) - set(a)):
            out.append(f"{key} widened")
    had_bounds = any(getattr(old, key) for key in CAPS) or any(getattr(old, key) is not None for key in LISTS)
    if old.on_exhausted == "finish_stuck" and new.on_exhausted != "finish_stuck":
        out.append(f"on_exhausted finish_stuck -> {new.on_exhausted or 'inherited'}")  # an explicit choice given up
    elif had_bounds and old.on_exhausted is None and new.on_exhausted == "pause_ask":
        out.append("on_exhausted finish_stuck -> pause_ask")
    return out
