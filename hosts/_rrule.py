"""A strict RFC 5545 RECUR parser (section 3.3.10): every part checked, named in errors.

python-dateutil accepts many rules the RFC forbids (INTERVAL=0, COUNT=-1, BYMONTHDAY=0, a
duplicate FREQ, ...) and silently runs them; owners' schedules are parsed here first.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import overload

from .errors import InvalidSchedule

FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY", "MINUTELY", "SECONDLY")
# The FREQs whose period has one length in elapsed time (MONTHLY and YEARLY vary).
FIXED_PERIOD = {
    "SECONDLY": timedelta(seconds=1),
    "MINUTELY": timedelta(minutes=1),
    "HOURLY": timedelta(hours=1),
    "DAILY": timedelta(days=1),
    "WEEKLY": timedelta(weeks=1),
}
WEEKDAYS = ("MO", "TU", "WE", "TH", "FR", "SA", "SU")
_ORDER = (
    "FREQ",
    "INTERVAL",
    "COUNT",
    "UNTIL",
    "BYMONTH",
    "BYWEEKNO",
    "BYYEARDAY",
    "BYMONTHDAY",
    "BYDAY",
    "BYHOUR",
    "BYMINUTE",
    "BYSECOND",
    "BYSETPOS",
    "WKST",
)
_RFC = "RFC 5545 section 3.3.10"
_INT = re.compile(r"[+-]?\d{1,3}")
_DIGITS = re.compile(r"\d{1,9}")
_BYDAY = re.compile(r"([+-]?)(\d{1,2})?([A-Z]{2})")
_PLAIN: dict[str, tuple[int | None, int]] = {day: (None, i) for i, day in enumerate(WEEKDAYS)}
_UNTIL = re.compile(r"(\d{4})(\d{2})(\d{2})(?:T(\d{2})(\d{2})(\d{2})(Z?))?")

# part: (lowest, highest, zero allowed)
_RANGES = {
    "BYSECOND": (0, 59, True),  # RFC 5545 allows 60 (a leap second); no clock floorgate reads has one
    "BYMINUTE": (0, 59, True),
    "BYHOUR": (0, 23, True),
    "BYMONTHDAY": (-31, 31, False),
    "BYYEARDAY": (-366, 366, False),
    "BYWEEKNO": (-53, 53, False),
    "BYMONTH": (1, 12, False),
    "BYSETPOS": (-366, 366, False),
}
_UNSIGNED = {"BYSECOND", "BYMINUTE", "BYHOUR", "BYMONTH"}


@dataclass(frozen=True)
class Recur:
    """A parsed RECUR value. ``until`` is naive for floating, aware UTC for zoned, a date for DATE."""

    freq: str
    interval: int = 1
    count: int | None = None
    until: datetime | date | None = None
    bymonth: tuple[int, ...] = ()
    byweekno: tuple[int, ...] = ()
    byyearday: tuple[int, ...] = ()
    bymonthday: tuple[int, ...] = ()
    byday: tuple[tuple[int | None, int], ...] = ()  # (ordinal or None, weekday 0=MO)
    byhour: tuple[int, ...] = ()
    byminute: tuple[int, ...] = ()
    bysecond: tuple[int, ...] = ()
    bysetpos: tuple[int, ...] = ()
    wkst: int = 0

    def text(self) -> str:
        """Canonical text: fixed part order, sorted values, defaults (INTERVAL=1, WKST=MO) omitted."""
        out = [f"FREQ={self.freq}"]
        if self.interval != 1:
            out.append(f"INTERVAL={self.interval}")
        if self.count is not None:
            out.append(f"COUNT={self.count}")
        if self.until is not None:
            out.append(f"UNTIL={format_until(self.until)}")
        for name in ("BYMONTH", "BYWEEKNO", "BYYEARDAY", "BYMONTHDAY"):
            values = getattr(self, name.lower())
            if values:
                out.append(f"{name}={','.join(str(v) for v in sorted(values))}")
        if self.byday:
            days = sorted(self.byday, key=lambda d: (d[0] is not None, d[0] or 0, d[1]))
            out.append("BYDAY=" + ",".join(f"{'' if n is None else n}{WEEKDAYS[w]}" for n, w in days))
        for name in ("BYHOUR", "BYMINUTE", "BYSECOND", "BYSETPOS"):
            values = getattr(self, name.lower())
            if values:
                out.append(f"{name}={','.join(str(v) for v in sorted(values))}")
        if self.wkst != 0:
            out.append(f"WKST={WEEKDAYS[self.wkst]}")
        return ";".join(out)


def format_until(value: datetime | date) -> str:
    if isinstance(value, datetime):
        return stamp(value) + ("Z" if value.tzinfo is not None else "")
    return f"{value.year:04d}{value:%m%d}"


def stamp(value: datetime) -> str:
    """YYYYMMDDTHHMMSS, the year zero-padded (``%Y`` leaves a year below 1000 short on some platforms)."""
    return f"{value.year:04d}{value:%m%dT%H%M%S}"


def _fail(part: str, problem: str, clause: str = _RFC) -> InvalidSchedule:
    return InvalidSchedule(f"RRULE {part}: {problem} ({clause})")


def parse_recur(text: str, dtstart_kind: str) -> Recur:
    """Parse the value of an RRULE line. ``dtstart_kind`` is 'date', 'floating', 'utc' or 'zoned'
    (UNTIL must match DTSTART's value type, RFC 5545 section 3.3.10)."""
    if not isinstance(text, str) or not text.strip():
        raise _fail("FREQ", "the rule is empty; FREQ is required, e.g. FREQ=DAILY")
    seen: dict[str, str] = {}
    for raw in text.strip().split(";"):
        if raw == "":
            raise _fail("syntax", f"empty rule part in {text!r} (a stray ';'); each part is NAME=VALUE")
        name, sep, value = raw.partition("=")
        name = name.strip().upper()
        if not sep:
            raise _fail(name or "syntax", f"{raw!r} is not NAME=VALUE")
        if name not in _ORDER:
            hint = "; RFC 5545 calls it BYDAY" if name == "BYWEEKDAY" else ""
            raise _fail(name, f"unknown rule part{hint}")
        if name in seen:
            raise _fail(name, "given more than once; each rule part MUST NOT occur more than once")
        seen[name] = value.strip().upper()
    if "FREQ" not in seen:
        raise _fail("FREQ", "missing; FREQ is REQUIRED (e.g. FREQ=DAILY)")
    freq = seen["FREQ"]
    if freq not in FREQS:
        raise _fail("FREQ", f"{freq!r} is not one of {', '.join(FREQS)}")
    if "COUNT" in seen and "UNTIL" in seen:
        raise _fail("UNTIL", "UNTIL and COUNT MUST NOT occur in the same rule; keep one")
    interval = _positive(seen, "INTERVAL", 1)
    count = _positive(seen, "COUNT", None)
    until = _until(seen["UNTIL"], dtstart_kind) if "UNTIL" in seen else None
    # Only the parts given are read (in _RANGES's order: the first bad one is named, as before).
    lists = {name: _int_list(seen, name) for name in _RANGES if name in seen}
    empty: tuple[int, ...] = ()
    byday = _byday(seen, freq, bool(lists.get("BYWEEKNO")))
    if lists.get("BYWEEKNO") and freq != "YEARLY":
        raise _fail("BYWEEKNO", f"only valid with FREQ=YEARLY, not {freq}")
    if lists.get("BYMONTHDAY") and freq == "WEEKLY":
        raise _fail("BYMONTHDAY", "MUST NOT be used with FREQ=WEEKLY")
    if lists.get("BYYEARDAY") and freq in ("DAILY", "WEEKLY", "MONTHLY"):
        raise _fail("BYYEARDAY", f"MUST NOT be used with FREQ={freq}")
    if lists.get("BYSETPOS") and not (byday or any(v for k, v in lists.items() if k != "BYSETPOS")):
        raise _fail("BYSETPOS", "MUST only be used together with another BYxxx rule part")
    wkst = 0
    if "WKST" in seen:
        if seen["WKST"] not in WEEKDAYS:
            raise _fail("WKST", f"{seen['WKST']!r} is not one of {', '.join(WEEKDAYS)}")
        wkst = WEEKDAYS.index(seen["WKST"])
    return Recur(
        freq=freq,
        interval=interval,
        count=count,
        until=until,
        bymonth=lists.get("BYMONTH", empty),
        byweekno=lists.get("BYWEEKNO", empty),
        byyearday=lists.get("BYYEARDAY", empty),
        bymonthday=lists.get("BYMONTHDAY", empty),
        byday=byday,
        byhour=lists.get("BYHOUR", empty),
        byminute=lists.get("BYMINUTE", empty),
        bysecond=lists.get("BYSECOND", empty),
        bysetpos=lists.get("BYSETPOS", empty),
        wkst=wkst,
    )


@overload
def _positive(seen: dict[str, str], name: str, default: int) -> int: ...
@overload
def _positive(seen: dict[str, str], name: str, default: None) -> int | None: ...
def _positive(seen: dict[str, str], name: str, default: int | None) -> int | None:
    if name not in seen:
        return default
    value = seen[name]
    if not _DIGITS.fullmatch(value) or int(value) < 1:
        raise _fail(name, f"{value!r} is not a positive whole number (1*DIGIT, at least 1)")
    return int(value)


def _int_list(seen: dict[str, str], name: str) -> tuple[int, ...]:
    if name not in seen:
        return ()
    low, high, zero_ok = _RANGES[name]
    values = []
    for item in seen[name].split(","):
        item = item.strip()
        if not _INT.fullmatch(item) or (name in _UNSIGNED and item[0] in "+-"):
            raise _fail(name, f"{item!r} is not a whole number")
        number = int(item)
        if number < low or number > high or (number == 0 and not zero_ok):
            span = f"{low}..{high}" if zero_ok or low > 0 else f"{low}..-1 or 1..{high}"
            raise _fail(name, f"{number} is out of range ({span})")
        values.append(number)
    if len(set(values)) != len(values):
        raise _fail(name, "lists a value twice")
    return tuple(values)


def _byday(seen: dict[str, str], freq: str, with_weekno: bool) -> tuple[tuple[int | None, int], ...]:
    if "BYDAY" not in seen:
        return ()
    days: list[tuple[int | None, int]] = []
    for item in seen["BYDAY"].split(","):
        plain = _PLAIN.get(item.strip())
        if plain is not None:  # a bare weekday: what the pattern below reads from it, without it
            if plain in days:
                raise _fail("BYDAY", f"lists {item} twice")
            days.append(plain)
            continue
        match = _BYDAY.fullmatch(item.strip())
        if not match or match.group(3) not in WEEKDAYS:
            raise _fail("BYDAY", f"{item!r} is not a weekday (SU, MO, TU, WE, TH, FR, SA, optionally with +n/-n)")
        sign, digits, day = match.groups()
        if digits is None and sign:
            raise _fail("BYDAY", f"{item!r} has a sign but no number")
        ordinal = None
        if digits is not None:
            ordinal = int(digits) * (-1 if sign == "-" else 1)
            if not 1 <= abs(ordinal) <= 53:
                raise _fail("BYDAY", f"ordinal {ordinal} is out of range (1..53 or -53..-1)")
            if freq not in ("MONTHLY", "YEARLY"):
                raise _fail("BYDAY", f"a numeric value ({item}) MUST NOT be used with FREQ={freq}")
            if freq == "YEARLY" and with_weekno:
                raise _fail("BYDAY", f"a numeric value ({item}) MUST NOT be used with BYWEEKNO")
            if freq == "MONTHLY" and abs(ordinal) > 5:
                raise _fail("BYDAY", f"ordinal {ordinal} is out of range for FREQ=MONTHLY (1..5)")
        entry = (ordinal, WEEKDAYS.index(day))
        if entry in days:
            raise _fail("BYDAY", f"lists {item} twice")
        days.append(entry)
    return tuple(days)


def _until(value: str, dtstart_kind: str) -> datetime | date:
    match = _UNTIL.fullmatch(value)
    if not match:
        raise _fail("UNTIL", f"{value!r} is not a DATE (YYYYMMDD) or DATE-TIME (YYYYMMDDTHHMMSS[Z])")
    y, mo, d, h, mi, s, z = match.groups()
    try:
        if h is None:
            parsed: datetime | date = date(int(y), int(mo), int(d))
        else:
            parsed = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone.utc if z else None)
    except ValueError as exc:
        raise _fail("UNTIL", f"{value!r} is not a real date or time ({exc})") from None
    if dtstart_kind == "date":
        if isinstance(parsed, datetime):
            raise _fail("UNTIL", "DTSTART is a DATE, so UNTIL MUST be a DATE too")
    elif not isinstance(parsed, datetime):
        raise _fail("UNTIL", "DTSTART is a DATE-TIME, so UNTIL MUST be a DATE-TIME too")
    elif dtstart_kind in ("zoned", "utc") and parsed.tzinfo is None:
        why = "DTSTART is in UTC, so UNTIL MUST be in UTC too" if dtstart_kind == "utc" else "DTSTART has a TZID, so UNTIL MUST be in UTC"
        raise _fail("UNTIL", f"{why} (end it with Z)")
    elif dtstart_kind == "floating" and parsed.tzinfo is not None:
        raise _fail("UNTIL", "DTSTART is floating local time, so UNTIL MUST be floating too (no Z)")
    return parsed
