"""Schedules: RFC 5545 DTSTART + RRULE (+ EXDATE), or a friendly form that normalizes to one.

``Schedule.parse`` accepts an iCalendar fragment::

    DTSTART;TZID=Europe/Berlin:20261201T090000
    RRULE:FREQ=DAILY

(lines may also be separated by spaces) or a friendly form: ``every 90m``, ``every 2h from
2026-12-01T08:00 in Europe/Berlin``, ``hourly``, ``daily at 09:00 Europe/Berlin``,
``weekdays at 08:30 America/New_York``, ``weekly on MO,TH at 07:00 UTC``. Friendly forms are shown
normalized. A schedule without a start or an IANA time zone is rejected, never guessed; ``every``
without ``from`` starts at the minute it is parsed (the ``now`` given, else the system clock).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from datetime import date, datetime, timedelta, timezone
from functools import cached_property, lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict

from floorgate.admission.clock import SystemClock, aware_utc
from floorgate.admission.intervals import MAX_INTERVAL

from ._engine import Engine
from ._rrule import WEEKDAYS, Recur, parse_recur, stamp
from .errors import InvalidSchedule, UnsupportedSchedule

_DT = re.compile(r"(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})(Z?)")
_D = re.compile(r"(\d{4})(\d{2})(\d{2})")
_TIME = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")
_EVERY = re.compile(r"(\d+)\s*(s|m|h|d)", re.I)
_MAX_OCCURRENCES = 10_000
_ONCE = Recur(freq="DAILY", count=1)  # a schedule without RRULE: DTSTART alone
# DTSTART's years: a plan decades away is a typo, and near datetime's ends (years 1 and 9999) the
# arithmetic on instants overflows.
FIRST_YEAR = 1900
LAST_YEAR = 2200


def _check_year(value: datetime, field: str) -> None:
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise UnsupportedSchedule(
            f"{field}: year {value.year} is outside {FIRST_YEAR}..{LAST_YEAR}, the years floorgate plans in; give a start in that range"
        )


def _zone(name: str, field: str = "TZID") -> ZoneInfo:
    try:
        if not name or name.startswith(("/", ".")) or ".." in name:
            raise ValueError
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule(f"{field}: {name!r} is not an IANA time zone name (e.g. Europe/Berlin, UTC)") from None


def _parse_dt(text: str, field: str) -> tuple[datetime, bool]:
    """(naive wall time, is_utc) of a DATE-TIME value."""
    m = _DT.fullmatch(text)
    if not m:
        raise InvalidSchedule(f"{field}: {text!r} is not a DATE-TIME (YYYYMMDDTHHMMSS, optionally ending in Z)")
    try:
        value = datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6]))
    except ValueError as exc:
        raise InvalidSchedule(f"{field}: {text!r} is not a real date and time ({exc})") from None
    return value, m.group(7) == "Z"


class Schedule(BaseModel):
    """A parsed, validated schedule. ``dtstart`` is the wall time in ``tzid``; ``tzid`` None means
    floating time, which only ``parse(..., allow_floating=True)`` produces (never for automations)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    dtstart: datetime
    tzid: str | None
    is_date: bool = False
    recur: Recur | None  # None: a single occurrence at DTSTART
    exdates: tuple[datetime, ...] = ()

    # -- parsing -------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, *, now: datetime | None = None, allow_floating: bool = False) -> Schedule:
        """Parse an iCalendar fragment or a friendly form; raises ``InvalidSchedule`` naming the part."""
        if not isinstance(text, str) or not text.strip():
            raise InvalidSchedule(
                "schedule: empty; give DTSTART;TZID=Zone:YYYYMMDDTHHMMSS and RRULE:..., or e.g. 'daily at 09:00 Europe/Berlin'"
            )
        stripped = text.strip()
        if stripped.upper().startswith(("DTSTART", "RRULE", "EXDATE")):
            return cls._parse_ical(stripped, allow_floating)
        return _friendly(stripped, now)

    @classmethod
    def _parse_ical(cls, text: str, allow_floating: bool) -> Schedule:
        dtstart: datetime | None = None
        tzid: str | None = None
        is_date = False
        rrule_text: str | None = None
        exdate_lines: list[tuple[str, str]] = []
        for line in text.split():
            name, sep, value = line.partition(":")
            if not sep:
                raise InvalidSchedule(f"schedule: {line!r} is not NAME:VALUE (expected DTSTART, RRULE or EXDATE lines)")
            head, *params = name.split(";")
            head = head.upper()
            if head == "DTSTART":
                if dtstart is not None:
                    raise InvalidSchedule("DTSTART: given twice")
                dtstart, tzid, is_date = _parse_dtstart(params, value)
            elif head == "RRULE":
                if rrule_text is not None:
                    raise InvalidSchedule("RRULE: more than one RRULE line; floorgate runs one rule per schedule")
                rrule_text = value
            elif head == "EXDATE":
                exdate_lines.append((";".join(params), value))
            elif head == "RDATE":
                raise InvalidSchedule("RDATE: not supported; use RRULE (and EXDATE)")
            else:
                raise InvalidSchedule(f"schedule: unknown line {head!r}; expected DTSTART, RRULE or EXDATE")
        if dtstart is None:
            raise InvalidSchedule("DTSTART: missing; a schedule needs a start, e.g. DTSTART;TZID=Europe/Berlin:20261201T090000")
        if tzid is None and not allow_floating:
            what = "a DATE" if is_date else "floating local time"
            raise InvalidSchedule(
                f"DTSTART: {what} has no time zone; give TZID=Zone and a time (DTSTART;TZID=Europe/Berlin:20261201T090000) or end it with Z for UTC"
            )
        kind = "date" if is_date else ("floating" if tzid is None else "utc" if tzid == "UTC" else "zoned")
        recur = parse_recur(rrule_text, kind) if rrule_text is not None else None
        exdates = tuple(sorted(_parse_exdates(exdate_lines, tzid, is_date))) if exdate_lines else ()
        schedule = cls(dtstart=dtstart, tzid=tzid, is_date=is_date, recur=recur, exdates=exdates)
        # Built now (a rule the engine refuses is refused at parse, not at its first fire), and
        # stored where ``_engine`` keeps it: cached_property's lock is a tenth of a cold answer.
        schedule.__dict__["_engine"] = schedule._build_engine()
        return schedule

    # -- reading -------------------------------------------------------------------------------
    @property
    def zone(self) -> ZoneInfo | None:
        return _zone(self.tzid) if self.tzid is not None else None

    @cached_property
    def _engine(self) -> Engine:
        return self._build_engine()

    def _build_engine(self) -> Engine:
        recur = self.recur if self.recur is not None else _ONCE
        return Engine(self.dtstart, recur, self.zone, frozenset(self.exdates), self.is_date)

    def planning_problem(self) -> str | None:
        """Why a host could not plan this schedule in bounded time (None: it can). dateutil walks
        a FREQ=SECONDLY rule with coarser BY parts second by second through every matching day:
        tens of seconds per query, minutes at host start; the same fires are cheap as MINUTELY."""
        r = self.recur
        if r is None or r.freq != "SECONDLY":
            return None
        if any((r.bymonth, r.byweekno, r.byyearday, r.bymonthday, r.byday, r.byhour, r.byminute, r.bysetpos)):
            return "FREQ=SECONDLY with BY parts above BYSECOND is too sparse to plan; write it as FREQ=MINUTELY with BYSECOND"
        return None

    def canonical(self) -> str:
        """The normalized text; two schedules with equal canonical text are the same schedule."""
        lines = [_format_dtstart(self.dtstart, self.tzid, self.is_date)]
        if self.recur is not None:
            lines.append("RRULE:" + self.recur.text())
        if self.exdates:
            lines.append(_format_exdates(self.exdates, self.tzid, self.is_date))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.canonical()

    def occurrences(self, count: int, after: datetime | None = None) -> list[datetime]:
        """The next ``count`` occurrences, aware in the schedule's zone: from DTSTART when ``after``
        is None, else strictly after the instant ``after``."""
        if type(count) is not int or count < 0 or count > _MAX_OCCURRENCES:
            raise InvalidSchedule(f"count: ask for 0..{_MAX_OCCURRENCES} occurrences")
        out: list[datetime] = []
        if count == 0:
            return out
        try:
            for occurrence in self._engine.iterate(self._instant_arg(after)):
                out.append(occurrence)
                if len(out) == count:
                    break
        except OverflowError:
            raise _out_of_range() from None
        return out

    def next_after(self, after: datetime) -> datetime | None:
        """The first occurrence strictly after the instant ``after`` (None when the rule has ended)."""
        engine = self._engine
        memo = engine._memo
        # Engine.next_after's memo lookup, repeated here: a host asks at every fire, and the call
        # through is a fifth of a query answered from the memo. The engine checks ``after``.
        if memo is not None and after.__class__ is datetime and after.tzinfo is engine._key_tz and memo[0] <= after < memo[1]:
            return memo[3][bisect_right(memo[2], after)]  # type: ignore[no-any-return]
        try:
            return engine.next_after(after)
        except OverflowError:
            raise _out_of_range() from None

    def last_at_or_before(self, at: datetime) -> datetime | None:
        """The latest occurrence at or before the instant ``at`` (None when none has happened)."""
        try:
            return self._engine.last_at_or_before(self._instant(at))
        except OverflowError:
            raise _out_of_range() from None

    def _instant_arg(self, value: datetime | None) -> datetime | None:
        return None if value is None else self._instant(value)

    def _instant(self, value: datetime) -> datetime:
        if self.tzid is None:
            return value.replace(tzinfo=None) if value.tzinfo is not None else value
        return aware_utc(value, "after")


def _out_of_range() -> UnsupportedSchedule:
    return UnsupportedSchedule(
        "schedule: the answer lies past the years 1..9999 a date can have; ask about a time within the schedule's years"
    )


@lru_cache(maxsize=16384)
def parse_canonical(text: str) -> Schedule:
    """``Schedule.parse`` for stored canonical text, shared between automations with one schedule
    (a host arming thousands of timers parses each distinct schedule once)."""
    return Schedule.parse(text)


def _parse_dtstart(params: list[str], value: str) -> tuple[datetime, str | None, bool]:
    tzid = None
    is_date = False
    for param in params:
        key, _, pvalue = param.partition("=")
        key = key.upper()
        if key == "TZID":
            tzid = pvalue
        elif key == "VALUE" and pvalue.upper() == "DATE":
            is_date = True
        elif key == "VALUE" and pvalue.upper() == "DATE-TIME":
            pass
        else:
            raise InvalidSchedule(f"DTSTART: unknown parameter {param!r}; use TZID=Zone")
    if is_date:
        m = _D.fullmatch(value)
        if not m:
            raise InvalidSchedule(f"DTSTART: {value!r} is not a DATE (YYYYMMDD)")
        try:
            day = date(*(int(g) for g in m.groups()))
        except ValueError as exc:
            raise InvalidSchedule(f"DTSTART: {value!r} is not a real date ({exc})") from None
        _check_year(datetime(day.year, day.month, day.day), "DTSTART")
        return datetime(day.year, day.month, day.day), None, True
    naive, is_utc = _parse_dt(value, "DTSTART")
    _check_year(naive, "DTSTART")
    if is_utc:
        if tzid is not None:
            raise InvalidSchedule("DTSTART: a UTC time (ending in Z) MUST NOT carry a TZID")
        tzid = "UTC"
    elif tzid is not None:
        _zone(tzid)
    return naive, tzid, False


def _parse_exdates(lines: list[tuple[str, str]], tzid: str | None, is_date: bool) -> list[datetime]:
    out = []
    zone = _zone(tzid) if tzid is not None else None
    for params, value in lines:
        ex_zone = None
        for param in filter(None, params.split(";")):
            key, _, pvalue = param.partition("=")
            if key.upper() == "TZID":
                ex_zone = _zone(pvalue, "EXDATE TZID")
            elif key.upper() != "VALUE":
                raise InvalidSchedule(f"EXDATE: unknown parameter {param!r}")
        for item in value.split(","):
            if is_date:
                m = _D.fullmatch(item)
                if not m:
                    raise InvalidSchedule(f"EXDATE: {item!r} is not a DATE like DTSTART")
                year, month, day = (int(g) for g in m.groups())
                out.append(datetime(year, month, day))
                continue
            naive, is_utc = _parse_dt(item, "EXDATE")
            if is_utc and zone is not None:
                naive = naive.replace(tzinfo=timezone.utc).astimezone(zone).replace(tzinfo=None)
            elif ex_zone is not None and zone is not None and ex_zone != zone:
                naive = naive.replace(tzinfo=ex_zone).astimezone(zone).replace(tzinfo=None)
            elif is_utc and zone is None:
                raise InvalidSchedule("EXDATE: a UTC EXDATE needs a zoned DTSTART")
            out.append(naive)
    return out


def _format_dtstart(dt: datetime, tzid: str | None, is_date: bool) -> str:
    if is_date:
        return f"DTSTART;VALUE=DATE:{dt.year:04d}{dt:%m%d}"
    if tzid == "UTC":
        return f"DTSTART:{stamp(dt)}Z"
    if tzid is None:
        return f"DTSTART:{stamp(dt)}"
    return f"DTSTART;TZID={tzid}:{stamp(dt)}"


def _format_exdates(values: tuple[datetime, ...], tzid: str | None, is_date: bool) -> str:
    if is_date:
        return "EXDATE;VALUE=DATE:" + ",".join(f"{v.year:04d}{v:%m%d}" for v in values)
    if tzid is None:
        return "EXDATE:" + ",".join(f"{stamp(v)}" for v in values)
    if tzid == "UTC":
        return "EXDATE:" + ",".join(f"{stamp(v)}Z" for v in values)
    return f"EXDATE;TZID={tzid}:" + ",".join(f"{stamp(v)}" for v in values)


# -- friendly forms ------------------------------------------------------------------------------
_FRIENDLY_HINT = (
    "use an RRULE (DTSTART;TZID=Zone:YYYYMMDDTHHMMSS RRULE:FREQ=...) or a friendly form: 'every 90m', 'every 15 minutes', "
    "'every 2h from 2026-12-01T08:00 in Europe/Berlin', 'hourly', 'daily at 09:00 Europe/Berlin', "
    "'weekdays at 08:30 America/New_York', 'weekly on MO,TH at 07:00 UTC'"
)


def _friendly(text: str, now: datetime | None) -> Schedule:
    words = text.split()
    low = [w.lower() for w in words]
    if low == ["hourly"]:
        return _every(timedelta(hours=1), None, "UTC", now)
    if low and low[0] == "every":
        return _parse_every(words[1:], now)
    at = {"daily": 3, "weekdays": 3, "weekly": 5}.get(low[0]) if low else None
    if at is not None and len(low) == at and low[at - 2] == "at":  # the zone left out
        example = f"{text.strip()} UTC"
        raise InvalidSchedule(f"schedule: {text!r} has no time zone; add a zone, e.g. '{example}' or '{text.strip()} Europe/Berlin'")
    if len(low) == 4 and low[0] in ("daily", "weekdays") and low[1] == "at":
        days = None if low[0] == "daily" else ("MO", "TU", "WE", "TH", "FR")
        return _at_time(words[2], words[3], days, now)
    if len(low) == 6 and low[0] == "weekly" and low[1] == "on" and low[3] == "at":
        weekly = tuple(d.upper() for d in words[2].split(","))
        for d in weekly:
            if d not in WEEKDAYS:
                raise InvalidSchedule(f"schedule: {d!r} is not a weekday (MO, TU, WE, TH, FR, SA, SU)")
        return _at_time(words[4], words[5], weekly, now)
    raise InvalidSchedule(f"schedule: {text!r} is not a schedule floorgate understands; {_FRIENDLY_HINT}")


_MAX_EVERY = MAX_INTERVAL  # the floor's own cap


# Units spelled out ('every 15 minutes', 'every hour'), as the short form's letter and a multiplier.
_UNIT_WORDS = {
    **dict.fromkeys(("second", "seconds", "sec", "secs"), ("s", 1)),
    **dict.fromkeys(("minute", "minutes", "min", "mins"), ("m", 1)),
    **dict.fromkeys(("hour", "hours"), ("h", 1)),
    **dict.fromkeys(("day", "days"), ("d", 1)),
    **dict.fromkeys(("week", "weeks"), ("d", 7)),
}


def _spelled(rest: list[str]) -> list[str]:
    """``rest`` with a spelled-out interval ('15 minutes', 'hour', '2 weeks') as its short form."""
    unit = _UNIT_WORDS.get(rest[0].lower())
    if unit is not None:  # 'every hour': one of the unit
        return [f"{unit[1]}{unit[0]}", *rest[1:]]
    unit = _UNIT_WORDS.get(rest[1].lower()) if len(rest) > 1 else None
    if unit is not None and rest[0].isascii() and rest[0].isdigit():
        return [f"{int(rest[0]) * unit[1]}{unit[0]}", *rest[2:]]
    return rest


def _parse_every(rest: list[str], now: datetime | None) -> Schedule:
    if not rest:
        raise InvalidSchedule(f"schedule: 'every' needs an interval such as 90m; {_FRIENDLY_HINT}")
    rest = _spelled(rest)
    amount = rest[0]
    total = timedelta(0)
    pos = 0
    for m in _EVERY.finditer(amount):
        if m.start() != pos:
            break
        pos = m.end()
        n, unit = int(m.group(1)), m.group(2).lower()
        try:
            total += {"s": timedelta(seconds=n), "m": timedelta(minutes=n), "h": timedelta(hours=n), "d": timedelta(days=n)}[unit]
        except OverflowError:
            total = _MAX_EVERY * 2
    if pos != len(amount) or total <= timedelta(0):
        raise InvalidSchedule(f"schedule: {amount!r} is not an interval like 90s, 45m, 2h, 1d12h")
    if total > _MAX_EVERY:
        raise InvalidSchedule(f"schedule: {amount!r} is longer than {_MAX_EVERY.days}d; check for a typo")
    start: str | None = None
    zone = "UTC"
    i = 1
    while i < len(rest):
        key = rest[i].lower()
        if key == "from" and i + 1 < len(rest):
            start = rest[i + 1]
        elif key == "in" and i + 1 < len(rest):
            zone = rest[i + 1]
        else:
            raise InvalidSchedule(f"schedule: unexpected {rest[i]!r}; write 'every 90m [from YYYY-MM-DDTHH:MM] [in Zone]'")
        i += 2
    return _every(total, start, zone, now)


def _every(step: timedelta, start: str | None, zone_name: str, now: datetime | None) -> Schedule:
    zone = _zone(zone_name, "schedule zone")
    if start is None:
        begin = (aware_utc(now, "now") if now is not None else SystemClock().now()).astimezone(zone)
        naive = begin.replace(tzinfo=None, second=0, microsecond=0)
    else:
        try:
            parsed = datetime.fromisoformat(start)
        except ValueError:
            raise InvalidSchedule(f"schedule: from {start!r} is not a local time like 2026-12-01T08:00") from None
        try:
            naive = parsed.astimezone(zone).replace(tzinfo=None) if parsed.tzinfo else parsed
        except OverflowError:
            naive = parsed.replace(tzinfo=None)  # at datetime's ends: refused just below
        _check_year(naive, "schedule: from")
    seconds = int(step.total_seconds())
    for freq, size in (("DAILY", 86400), ("HOURLY", 3600), ("MINUTELY", 60), ("SECONDLY", 1)):
        if seconds % size == 0:
            recur = Recur(freq=freq, interval=seconds // size)
            break
    return Schedule(dtstart=naive, tzid=zone_name, recur=recur)


def _at_time(clock_text: str, zone_name: str, days: tuple[str, ...] | None, now: datetime | None) -> Schedule:
    m = _TIME.fullmatch(clock_text)
    if not m:
        raise InvalidSchedule(f"schedule: {clock_text!r} is not a time of day like 09:00")
    zone = _zone(zone_name, "schedule zone")
    today = (aware_utc(now, "now") if now is not None else SystemClock().now()).astimezone(zone).date()
    dtstart = datetime(today.year, today.month, today.day, int(m.group(1)), int(m.group(2)))
    if days is None:
        recur = Recur(freq="DAILY")
    else:
        recur = Recur(freq="WEEKLY", byday=tuple((None, WEEKDAYS.index(d)) for d in days))
    return Schedule(dtstart=dtstart, tzid=zone_name, recur=recur)
