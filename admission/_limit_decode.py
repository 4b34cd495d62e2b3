"""The gathered values of a limited lane's one statement (``_limit_read``), decoded: each is JSON
text from the database, checked as it is read (damage raises ``CorruptState``: the caller
denies), and the decoded value kept by its text, since the same text decodes to the same value."""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Callable
from datetime import datetime
from types import SimpleNamespace
from typing import Any

from ._types import decode_us
from .errors import CorruptState
from .usage import GROUP_COLUMNS, WindowUsage, entry_from_row, prices_of, usage_of_groups
from .windows import Window

USAGE_COLUMNS = "turn_id goal_id agent_id automation_id at_us state model estimate_tokens tokens usd_micros source".split()
_UsageRow = namedtuple("_UsageRow", USAGE_COLUMNS)  # type: ignore[misc]
_PriceRow = namedtuple("_PriceRow", ["model", "usd_per_mtok_micros"])


def json_list(text: object) -> list[Any]:
    """A gathered JSON array (NULL: no rows); anything else raises ``CorruptState``."""
    if text is None:
        return []
    try:
        found = json.loads(text) if isinstance(text, str) else None
    except ValueError:
        found = None
    if not isinstance(found, list):
        raise CorruptState(f"a limit's rows could not be read: {text!r}")
    return found


# Gathered values decoded before, by their text: a decision meets the text its lane's last one
# read (its usage and prices change at admissions and settlements, not between denials).
# Decoding is a function of the text, so a kept result is what decoding again would give;
# a value that fails to decode is never kept (it raises each time). Bounded like ``_KNOWN``.
_DECODED: dict[tuple[str, object, object], Any] = {}
_DECODED_KEPT = 4096


def _memo(kind: str, text: object, also: object, decode: Callable[[], Any]) -> Any:
    if not isinstance(text, str):  # NULL (no rows), or damage: decoded (and failing) each time
        return decode()
    key = (kind, text, also)
    found = _DECODED.get(key, _DECODED)
    if found is _DECODED:
        found = decode()
        if len(_DECODED) >= _DECODED_KEPT:
            _DECODED.clear()
        _DECODED[key] = found
    return found


def prices_from(text: object) -> dict[str, int]:
    """The owner's prices from their gathered rows (kept by text; callers never change the dict)."""
    return _memo("prices", text, None, lambda: prices_of(_PriceRow(*r) for r in rows_of(text, 2)))  # type: ignore[no-any-return]


def usage(text: object, window: Window, now: datetime, prices: dict[str, int], priced: object) -> WindowUsage:
    """A budget's usage groups as ``usage.usage_of_groups`` reads them, with ``prices`` (decoded
    from the text ``priced``; None: none read). The totals do not depend on the instant (every
    gathered row counts), so a kept result only takes this window and now."""

    def decode() -> WindowUsage:
        groups = ((_group_row(r), r[-2]) for r in rows_of(text, len(GROUP_COLUMNS) + 2))
        return usage_of_groups(groups, window, now, prices)

    found: WindowUsage = _memo("usage", text, priced if isinstance(priced, str) else None, decode)
    return found if found.window is window and found.now == now else found._replace(window=window, now=now)


def largest_rows(text: object) -> tuple[Any, ...]:
    """The lane's largest recent turn as gathered (a JSON array of at most one row), decoded."""
    return _memo("largest", text, None, lambda: tuple(entry_from_row(_UsageRow(*r)) for r in rows_of(text, len(USAGE_COLUMNS))))  # type: ignore[no-any-return]


def counted(text: object, frees: int) -> tuple[int, list[Any]]:
    """A count's gathered ``[count, earliest, latest, frees-at...]`` (``frees`` of those): the
    count, its anchors checked, and its rolling counts' frees-at values as gathered."""
    return _memo("count", text, frees, lambda: _decodecounted(text, frees))  # type: ignore[no-any-return]


def _decodecounted(text: object, frees: int) -> tuple[int, list[Any]]:
    values = json_list(text)
    if len(values) != 3 + frees or type(values[0]) is not int:
        raise CorruptState(f"a count's starts could not be read: {values!r}")
    # An empty window's earliest anchor is still the damage probe's (a start dated before the
    # epoch, outside every window): decoded too, so damage fails closed with nothing counted.
    for anchor in values[1:3] if values[0] else [a for a in values[1:2] if a is not None]:
        decode_us(anchor)
    return values[0], values[3:]


def _group_row(values: list[Any]) -> Any:
    """A gathered usage group as a row ``entry_from_row`` decodes (the ids are the series')."""
    found = dict(zip(GROUP_COLUMNS, values, strict=False))
    return SimpleNamespace(**found, turn_id="(a group of usage rows)", goal_id="", agent_id="", automation_id="", at_us=values[-1])


def rows_of(text: object, width: int) -> list[list[Any]]:
    rows = json_list(text)
    for r in rows:
        if not isinstance(r, list) or len(r) != width:
            raise CorruptState(f"a limit's row could not be read: {r!r}")
    return rows


def forget() -> None:
    """Drop every decoded value kept (a test's fresh process)."""
    _DECODED.clear()
