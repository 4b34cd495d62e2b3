"""Column types that decode and check stored values once, for every repository.

``UtcMicros``: an aware UTC datetime kept as integer microseconds since the epoch (exact on
every backend). Writing takes aware datetimes only; reading a value that is not an integer in
range (SQLite keeps whatever a hand edit wrote) raises ``CorruptState``, so no repository
hand-writes that check, and damaged time never becomes a time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

from .clock import aware_utc, from_us, to_us
from .errors import CorruptState

# Beyond year 9000 a stored time is corrupt, not a time to add floors to.
MAX_US = 221_845_392_000_000_000


class UtcMicros(TypeDecorator[datetime]):
    """Aware UTC datetime <-> BIGINT microseconds since the epoch."""

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"a stored time must be an aware datetime, not {type(value).__name__}")
        return to_us(aware_utc(value, "time"))

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if type(value) is not int or not 0 <= value < MAX_US:
            raise CorruptState(f"a stored time is malformed: {value!r}")
        return from_us(value)
