"""What a limited lane's one-statement read keeps between decisions on a marked store (SQLite's
limit mark, migration 0032): its last check, the mark and schema version the read found, and the
horizon until which time alone changes nothing the read would find; and each calendar window's
current period. ``_limit_read`` reads; this decides what of a read may stand for the next one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from ._limit_check import LaneCheck
from ._limit_decode import USAGE_COLUMNS, json_list, rows_of
from ._types import MAX_US
from ._upgrade import MARKS_SEEN, MARK_CHECK_SQL, marks_seen
from .clock import to_us
from .store import DriverTx
from .usage import ESTIMATE_LOOKBACK, GROUP_COLUMNS
from .windows import Window

BOUND = 4096  # entries per process-wide cache here and in ``_limit_read`` (cleared when full)


def length_us(length: timedelta) -> int:
    """A duration in whole microseconds (exact)."""
    return length // _ONE_US


_ONE_US = timedelta(microseconds=1)
_NEVER_US = MAX_US  # no horizon: the latest instant a stored time may name
LOOKBACK_US = length_us(ESTIMATE_LOOKBACK)
# Each calendar window's current period, as (first, next first) microsecond: a decision within it
# takes its start without the zone arithmetic (its instants are fixed once computed).
PERIODS: dict[tuple[str, str | None], tuple[int, int]] = {}


def period_us(window: Window, before: datetime, before_us: int) -> tuple[int, int]:
    """The calendar window's period holding ``before``: its first and its next period's first microsecond."""
    key = (window.kind.value, window.zone)
    found = PERIODS.get(key)
    if found is None or not found[0] <= before_us < found[1]:
        found = (to_us(window.period_start(before)), to_us(window.next_period_start(before)))
        if len(PERIODS) >= BOUND:
            PERIODS.clear()
        PERIODS[key] = found
    return found


class Kept(NamedTuple):
    """A lane's last limit check on a marked store, with the mark its read found: it stands for a
    decision that finds the same mark (no start, usage, rule, price or model changed since) and
    reads between ``since_us`` (the read's instant: never before, a clock gone back) and
    ``until_us`` (``horizon_us``: when time alone would change what the read finds)."""

    key: str  # the lane's definitions it was checked under (``LaneLimits.key``)
    mark: int
    version: int  # the schema's, at which every trigger was seen (``marks_intact_at``)
    since_us: int
    until_us: int
    until: datetime  # ``until_us`` as the clock's instant (compared with each decision's)
    check: LaneCheck


def marks_intact_at(tx: DriverTx, version: int) -> bool:
    """Whether the store's triggers were all there at schema ``version`` (the one the decision's
    read found): as seen before in this process, else checked now (one more statement, only after
    the schema changed: another process that dropped a trigger has changed it)."""
    seen = MARKS_SEEN.get(tx.url)
    if seen is None or seen[0] != version:
        seen = marks_seen(tx.url, tx.row(MARK_CHECK_SQL, {}))
    return seen is not None and seen == (version, True)


# By store URL and lane; bounded.
KEPT: dict[tuple[str, str, str, str | None], Kept] = {}


def keep(kept: Kept, key: tuple[str, str, str, str | None]) -> None:
    """Keep ``kept`` for the lane ``key`` (store URL, goal, agent, automation)."""
    if len(KEPT) >= BOUND:
        KEPT.clear()
    KEPT[key] = kept


class LaneReads(Protocol):
    """What ``horizon_us`` reads of a lane's definitions (``_limit_read.LaneLimits``, which reads
    through this module: named here by what it holds, not imported)."""

    @property
    def budgets(self) -> bool: ...
    @property
    def usd(self) -> bool: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def reads(self) -> tuple[tuple[bool, bool, bool, Window], ...]: ...
    @property
    def lengths_us(self) -> tuple[int | None, ...]: ...


def horizon_us(lane: LaneReads, values: list[Any], before: datetime) -> int:
    """The first microsecond at which the lane's limit read, taken at ``before``, could find other
    rows with none of them changed: a gathered row leaves its rolling window (the earliest of each
    read: the window counts from ``known_params``' start on), a calendar window's period ends, or
    the largest recent turn leaves the estimate's lookback (``known_params``' ``sl``)."""
    before_us = to_us(before)
    until = _NEVER_US
    at = int(lane.budgets) + int(lane.usd)
    for k, read in enumerate(lane.reads):
        length = lane.lengths_us[k]
        if length is None:
            until = min(until, period_us(read[3], before, before_us)[1])
        else:
            earliest = _earliest(values[at], read[0])
            if earliest is not None:
                until = min(until, earliest + length)
        at += 1
    if lane.budgets and not lane.max_tokens:
        for row in rows_of(values[at], len(USAGE_COLUMNS)):
            until = min(until, row[USAGE_COLUMNS.index("at_us")] + LOOKBACK_US)
    return until


def _earliest(text: object, starts: bool) -> int | None:
    """The earliest time among a read's gathered rows (None: none): a count's earliest anchor, or
    the earliest of its usage groups' earliest times."""
    if starts:
        values = json_list(text)
        return values[1] if values and values[0] else None
    times = [r[-1] for r in rows_of(text, len(GROUP_COLUMNS) + 2)]
    return min(times) if times else None
