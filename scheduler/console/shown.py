"""Times as the console's pages show them: in the zone the signed-in principal picked, to the
second, with how far they are from now ("in 14 min", "3 h ago").

The JSON documents keep the exact instant (microseconds, UTC). A page rounds *up* to the whole
second: a floor that opens at 09:00:00.4 is shown as 09:00:01, never as a moment it is still
closed, so nobody starts a run the page invites and the store denies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from zoneinfo import ZoneInfo

from floorgate.scheduler.views.present import ago, ceil_second

# Offered in the zone picker (any IANA name may be typed; these are the common ones).
COMMON_ZONES = (
    "UTC",
    "Europe/London",
    "Europe/Berlin",
    "Europe/Helsinki",
    "America/New_York",
    "America/Chicago",
    "America/Denver",
    "America/Los_Angeles",
    "America/Sao_Paulo",
    "Asia/Kolkata",
    "Asia/Shanghai",
    "Asia/Tokyo",
    "Australia/Sydney",
)


_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,6})?(?:Z|[+-]\d\d:\d\d)")


def _instant(value: datetime | str | None) -> datetime | None:
    if value is None or value == "":
        return None
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Shown:
    """How one page shows times: ``zone`` (an IANA name) and the page's ``now``."""

    zone_name: str
    now: datetime

    @property
    def zone(self) -> tzinfo:
        return timezone.utc if self.zone_name == "UTC" else ZoneInfo(self.zone_name)

    def at(self, value: datetime | str | None, missing: str = "-") -> str:
        """The wall time in the zone: '2026-12-02 09:00:00 CET'."""
        at = _instant(value)
        if at is None:
            return missing
        local = ceil_second(at).astimezone(self.zone)
        return f"{local:%Y-%m-%d %H:%M:%S} {local:%Z}"

    def short(self, value: datetime | str | None, missing: str = "-") -> str:
        """The wall time without the date when it is today in the zone: '09:00:00' or 'Dec 03 09:00'."""
        at = _instant(value)
        if at is None:
            return missing
        local, today = ceil_second(at).astimezone(self.zone), self.now.astimezone(self.zone)
        return f"{local:%H:%M:%S}" if local.date() == today.date() else f"{local:%b %d %H:%M}"

    def rel(self, value: datetime | str | None, missing: str = "") -> str:
        """How far from now: 'in 14 min', '3 h ago'."""
        at = _instant(value)
        return missing if at is None else ago(at, self.now)  # the exact instant: a past one is never 'in 0 s'

    def text(self, value: str | None) -> str:
        """A sentence from the readback with every exact instant in it shown as ``at`` shows it."""
        return "" if not value else _ISO.sub(lambda m: self.at(m.group(0).replace("Z", "+00:00")), value)
