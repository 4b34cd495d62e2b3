"""Minimum intervals as owners write them: ``90s``, ``45m``, ``24h``, ``1d``, ``1d12h``, ``PT24H``."""

from __future__ import annotations

import re
from datetime import timedelta

from .errors import InvalidInput

_UNITS = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
# ASCII digits only: Python's \d (and int()) would take other scripts' digits as well.
_COMPACT = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", re.ASCII)
_ISO = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d{1,6})?)S)?)?", re.ASCII)
# A floor longer than ten years is a typo, not a policy.
MAX_INTERVAL = timedelta(days=3660)
_HINT = "use a whole number with units d/h/m/s (90s, 45m, 24h, 1d12h), ISO 8601 (PT24H), or 0 to disable"


_DURATION_HINT = "give a duration above 0 with units d/h/m/s (30s, 10m, 2h) or ISO 8601 (PT10M)"


class TooLong(InvalidInput):
    """An interval written well but longer than the cap (a caller with a shorter bound names its own)."""


def parse_interval(text: str, field: str = "min_interval") -> timedelta:
    """Parse an interval; anything else is rejected with a message naming ``field``."""
    return _parse(text, field, _HINT)


def parse_duration(text: str, field: str) -> timedelta:
    """Parse a duration that cannot be 0 (a timeout, a poll period): ``parse_interval`` whose
    messages give the rule of such a field, never "0 to disable"."""
    value = _parse(text, field, _DURATION_HINT)
    if not value:
        raise InvalidInput(field, f"{text!r} is no time at all; {_DURATION_HINT}")
    return value


def _parse(text: str, field: str, hint: str) -> timedelta:
    if not isinstance(text, str):
        raise InvalidInput(field, f"expected text, got {type(text).__name__}; {hint}")
    raw = text.strip()
    if raw == "0":
        return timedelta(0)
    value: timedelta | None = None
    compact = _COMPACT.fullmatch(raw.lower())
    try:
        if raw and compact and any(compact.groups()):
            d, h, m, s = (int(g) if g else 0 for g in compact.groups())
            value = timedelta(days=d, hours=h, minutes=m, seconds=s)
        else:
            iso = _ISO.fullmatch(raw.upper())
            if raw and iso and any(iso.groups()) and not raw.upper().endswith("T"):
                d, h, m = (int(g) if g else 0 for g in iso.groups()[:3])
                seconds = float(iso.group(4)) if iso.group(4) else 0.0
                value = timedelta(days=d, hours=h, minutes=m, seconds=seconds)
    except OverflowError:
        raise TooLong(field, f"{text!r} is longer than the {format_interval(MAX_INTERVAL)} cap; check for a typo") from None
    if value is None:
        raise InvalidInput(field, f"{text!r} is not an interval; {hint}")
    return check_interval(value, field)


def check_interval(value: timedelta, field: str = "min_interval") -> timedelta:
    """Validate an interval already in timedelta form."""
    if not isinstance(value, timedelta):
        raise InvalidInput(field, f"expected a timedelta, got {type(value).__name__}")
    if value < timedelta(0):
        raise InvalidInput(field, "an interval cannot be negative; use 0 to disable")
    if value > MAX_INTERVAL:
        raise TooLong(field, f"{format_interval(value)} is longer than the 3660-day cap; check for a typo")
    return value


def format_interval(value: timedelta) -> str:
    """The compact form (``1d12h``, ``90s``); ``0`` for no floor."""
    total_us = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if total_us == 0:
        return "0"
    seconds, micro = divmod(total_us, 1_000_000)
    parts = []
    for unit, size in _UNITS.items():
        amount, seconds = divmod(seconds, size)
        if amount:
            parts.append(f"{amount}{unit}")
    text = "".join(parts)
    if micro:
        text += f"{micro}us"
    return text
