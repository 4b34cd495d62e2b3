"""A schedule's memo of computed occurrences: one interval known to be complete, bounded in size.

A memo is a tuple ``(lo, hi, keys, values)``: ``keys`` are every occurrence in ``(lo, hi]``, in
order, as UTC instants (naive wall times for floating time), so that looking one up is a bisect
over datetimes of one tzinfo; ``values`` are the same occurrences as answered (aware in the
schedule's zone). ``hi`` is the last key, or ``END`` when the rule has no occurrence after the
keys; then ``values`` holds one ``None`` more, the answer past the last one. For ``lo <= t < hi``
the first occurrence after ``t`` is ``values[bisect_right(keys, t)]``.

A memo is immutable and replaced whole: a thread reads it once and never sees it half built, two
threads filling it at once each store a complete, correct memo (the last one stays); no lock.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import datetime, timezone
from typing import Any

# At most this many occurrences per schedule (two tuples of datetimes, about 4 KB when full): a
# long-running host keeps one memo per schedule, so 512 cost 350 MB over 10,000 schedules.
CAP = 32
CHUNK = 8  # occurrences computed past the asked instant on a miss of a small memo
CHUNK_MAX = 8  # ... growing with the memo up to this (a host walks once per 8 fires)

END_AWARE = datetime.max.replace(tzinfo=timezone.utc)
END_NAIVE = datetime.max  # noqa: DTZ901 (floating time is naive)
START_AWARE = datetime.min.replace(tzinfo=timezone.utc)  # the lo of a walk from DTSTART
START_NAIVE = datetime.min  # noqa: DTZ901

Memo = tuple[Any, Any, tuple[Any, ...], tuple[Any, ...]]


def segment(lo: datetime, keys: list[datetime], values: list[Any], ended: bool, end: datetime) -> Memo:
    """The memo of a walk from ``lo``: ``keys``/``values`` are every occurrence after ``lo`` up to
    the last key; ``ended`` when the walk ran out of occurrences (the rule ends there)."""
    if ended:
        return (lo, end, tuple(keys), (*values, None))
    return (lo, keys[-1], tuple(keys), tuple(values))


def covers(memo: Memo | None, at: datetime) -> bool:
    """Whether the first occurrence after ``at`` is known from ``memo``."""
    return memo is not None and memo[0] <= at < memo[1]


def merge(old: Memo | None, new: Memo, at: datetime) -> Memo:
    """``new`` united with ``old`` when their intervals meet (each is complete, so they agree where
    they overlap), else ``new`` alone; trimmed to ``CAP`` occurrences around ``at``."""
    if old is not None and new[0] <= old[1] and old[0] <= new[1]:
        a, b = (old, new) if old[0] <= new[0] else (new, old)
        if b[1] > a[1]:
            i = bisect_right(a[2], b[0])
            new = (a[0], b[1], a[2][:i] + b[2], a[3][:i] + b[3])
        else:
            new = a
    return trim(new, at)


def trim(memo: Memo, at: datetime) -> Memo:
    """``memo`` cut to ``CAP`` occurrences, keeping the ones near ``at`` (more of them after it)."""
    lo, hi, keys, values = memo
    n = len(keys)
    if n <= CAP:
        return memo
    i = bisect_right(keys, at)
    start = max(0, min(i - CAP // 4, n - CAP))
    end = start + CAP
    new_lo = keys[start - 1] if start else lo
    if end < n:
        return (new_lo, keys[end - 1], keys[start:end], values[start:end])
    return (new_lo, hi, keys[start:], values[start:])


def near(memo: Memo, gap_seconds: float, budget: int) -> bool:
    """Whether a gap of ``gap_seconds`` beside ``memo`` likely holds at most ``budget``
    occurrences (at the density of the memo's own): worth walking across to keep one interval."""
    keys = memo[2]
    n = len(keys)
    return n > 1 and gap_seconds * (n - 1) <= (keys[-1] - keys[0]).total_seconds() * budget


def budget(memo: Memo) -> int:
    """How many occurrences a walk across a gap beside ``memo`` may add: a continuation's few (the
    next fire), or as many as the memo holds while it has room (so it doubles: a memo too small
    for the queries' range does not walk its whole size at every miss)."""
    n = len(memo[2])
    return max(CHUNK, min(n, CAP - n))


def chunk(memo: Memo | None) -> int:
    """How many occurrences past the asked instant a walk continuing ``memo`` computes."""
    return CHUNK if memo is None else min(max(len(memo[2]), CHUNK), CHUNK_MAX)
