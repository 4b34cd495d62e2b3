"""Instants as the text surfaces show them."""

from __future__ import annotations

from datetime import datetime, timedelta


def ceil_second(at: datetime) -> datetime:
    """``at`` rounded up to the whole second (unchanged when it is one): a coming instant shown a
    moment early would invite a start that is denied."""
    return at if at.microsecond == 0 else at.replace(microsecond=0) + timedelta(seconds=1)
