"""Clocks and the UTC boundary.

Every timestamp inside floorgate is an aware UTC ``datetime``. Services take a clock (any object
with ``now()``) so tests can inject one; the default reads the system clock through
``datetime.now(timezone.utc)`` at call time, which freezegun also controls.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Protocol

from .errors import InvalidInput

UTC = timezone.utc
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Clock(Protocol):
    """Anything that tells the current time as an aware datetime."""

    def now(self) -> datetime:  # pragma: no cover - protocol
        ...


class SystemClock:
    """The real clock: aware UTC now."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that only moves when told to; for tests, demos and dry runs."""

    def __init__(self, start: datetime) -> None:
        self._now = aware_utc(start, "start")

    def now(self) -> datetime:
        return self._now

    def advance(self, delta: timedelta) -> datetime:
        self._now = self._now + delta
        return self._now

    def set(self, when: datetime) -> None:
        self._now = aware_utc(when, "when")


def aware_utc(value: datetime, field: str) -> datetime:
    """Return ``value`` in UTC; a naive datetime is rejected, never guessed."""
    if type(value) is datetime and value.tzinfo is UTC:  # already aware UTC (astimezone would return it)
        return value
    if not isinstance(value, datetime):
        raise InvalidInput(field, f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise InvalidInput(field, "naive datetime; pass an aware datetime (e.g. with tzinfo=UTC)")
    return value.astimezone(UTC)


def read_clock(clock: Clock) -> datetime:
    """Read ``clock`` and check that it speaks aware time."""
    return aware_utc(clock.now(), "clock.now()")


def to_us(value: datetime) -> int:
    """Microseconds since the epoch of an aware datetime (exact; how the store keeps time)."""
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


# Stored times are microseconds since the epoch below year 9000 (``_types.MAX_US``).
_LAST = datetime(9000, 1, 1, tzinfo=UTC)


def from_us(value: int) -> datetime:
    """The aware UTC datetime for microseconds since the epoch."""
    return _EPOCH + timedelta(0, 0, value)  # positional: about a third cheaper than microseconds=


def parse_instant(text: str, field: str) -> datetime:
    """Parse an ISO 8601 instant with an explicit offset (``Z`` allowed) into aware UTC."""
    try:
        value = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise InvalidInput(field, f"{text!r} is not an ISO 8601 time; use e.g. 2026-12-01T09:00:00Z") from None
    if value.tzinfo is None:
        example = value.isoformat(timespec="seconds" if not value.microsecond else "microseconds") + "Z"
        raise InvalidInput(field, f"{text!r} has no UTC offset; give a time with one, e.g. {example}")
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00:00+14:00 is before the first representable instant
        utc = None
    if utc is None or not _EPOCH <= utc < _LAST:
        raise InvalidInput(field, f"{text!r} is outside the times floorgate stores (1970 to 9000)")
    return utc


def ceil_second(at: datetime) -> datetime:
    """``at`` rounded up to the whole second (unchanged when it is one): a coming instant shown a
    moment early would invite a start that is denied. Text shows coming instants so; JSON exact."""
    return at if at.microsecond == 0 else at.replace(microsecond=0) + timedelta(seconds=1)


def iso(value: datetime | None) -> str | None:
    """Render an aware datetime as ISO 8601 UTC with a Z, to the microsecond when needed."""
    if value is None:
        return None
    text = value.astimezone(UTC).isoformat(timespec="microseconds" if value.microsecond else "seconds")
    return text.replace("+00:00", "Z")
