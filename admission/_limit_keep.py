"""What a limited lane's one-statement read keeps between decisions on a marked store (SQLite's
limit mark, migration 0032): its last check, the mark and schema version the read found, and until
when it stands (``_limit_read.horizon_us``: time alone changes nothing the read would find before);
and each calendar window's current period. ``_limit_read`` reads; this decides what of a read may stand for the next one.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import NamedTuple

from ._limit_check import LaneCheck
from ._types import MAX_US
from ._upgrade import MARKS_SEEN, MARK_CHECK_SQL, marks_seen
from .clock import to_us
from .store import DriverTx
from .usage import ESTIMATE_LOOKBACK
from .windows import Window

BOUND = 4096  # entries per process-wide cache here and in ``_limit_read`` (cleared when full)


def length_us(length: timedelta) -> int:
    """A duration in whole microseconds (exact)."""
    return length // _ONE_US


_ONE_US = timedelta(microseconds=1)
NEVER_US = MAX_US  # no horizon: the latest instant a stored time may name
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
    ``until_us`` (``_limit_read.horizon_us``: when time alone would change what the read finds)."""

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
