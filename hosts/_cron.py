"""Five-field cron expressions: parsing, rendering from an RRULE, and the instants cron fires at."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from .errors import UnsupportedSchedule
from .schedule import Schedule

_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week")
_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))


@dataclass(frozen=True)
class CronSpec:
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    day_star: bool
    weekday_star: bool

    def fires(self, zone: ZoneInfo, start: datetime, end: datetime) -> list[datetime]:
        """UTC instants in (start, end] at which cron (in ``zone``) fires. A local fire time that
        falls in a DST gap or fold raises ``UnsupportedSchedule``: cron would skip or repeat it."""
        return list(self.iter_fires(zone, start, end))

    def iter_fires(self, zone: ZoneInfo, start: datetime, end: datetime) -> Iterator[datetime]:
        """``fires``, one at a time (a comparison can stop at its first difference)."""
        day = start.astimezone(zone).date() - timedelta(days=1)
        last = end.astimezone(zone).date() + timedelta(days=1)
        while day <= last:
            if day.month in self.months and self._day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        local = datetime(day.year, day.month, day.day, hour, minute)
                        instant = _exact_instant(local, zone)
                        if start < instant <= end:
                            yield instant
            day += timedelta(days=1)

    def _day_matches(self, day: date) -> bool:
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.day_star or self.weekday_star:  # cron: both restricted means either may match
            return dom and dow
        return dom or dow


def _exact_instant(local: datetime, zone: ZoneInfo) -> datetime:
    first = local.replace(tzinfo=zone, fold=0)
    second = local.replace(tzinfo=zone, fold=1)
    if first.utcoffset() != second.utcoffset():
        gap = first.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None) != local
        what = "does not exist (DST gap): cron would skip or shift it" if gap else "happens twice (DST fold): cron would run it twice"
        raise UnsupportedSchedule(f"crontab: local time {local:%Y-%m-%d %H:%M} in {zone.key} {what}")
    return first.astimezone(timezone.utc)


def parse_cron(fields: list[str]) -> CronSpec:
    if len(fields) != 5:
        raise ValueError("a cron schedule has five fields")
    sets = []
    for text, (low, high), name in zip(fields, _RANGES, _NAMES, strict=False):
        sets.append(_field(text, low, high, name))
    weekdays = frozenset(7 % 7 if d == 7 else d for d in sets[4])
    return CronSpec(
        minutes=sets[0],
        hours=sets[1],
        days=sets[2],
        months=sets[3],
        weekdays=weekdays,
        day_star=fields[2] == "*",
        weekday_star=fields[4] == "*",
    )


def _field(text: str, low: int, high: int, name: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = int(step_text) if step_text else 1
        if body == "*":
            a, b = low, high
        elif "-" in body:
            a, b = (int(x) for x in body.split("-", 1))
        else:
            a = b = int(body)
            if step_text:
                b = high
        if not (low <= a <= b <= high) or step < 1:
            raise ValueError(f"cron {name} field {text!r} is out of range")
        values.update(range(a, b + 1, step))
    return frozenset(values)


def _list(values: list[int] | tuple[int, ...]) -> str:
    return ",".join(str(v) for v in sorted(set(values)))


def render_cron(schedule: Schedule) -> str:
    """Five cron fields for ``schedule`` (wall time in its own zone), or ``UnsupportedSchedule``
    naming what cron lacks. Whether cron fires at the same instants is checked by the caller."""
    r = schedule.recur
    d = schedule.dtstart
    if r is None:
        raise UnsupportedSchedule("crontab: a one-shot schedule (no RRULE) cannot be expressed; cron repeats")
    if r.count is not None or r.until is not None:
        raise UnsupportedSchedule("crontab: cron cannot stop after COUNT or UNTIL")
    if schedule.exdates:
        raise UnsupportedSchedule("crontab: cron has no EXDATE")
    if r.bysetpos or r.byweekno or r.byyearday or any(n is not None for n, _ in r.byday):
        raise UnsupportedSchedule("crontab: cron has no BYSETPOS, BYWEEKNO, BYYEARDAY or numbered weekdays")
    seconds = r.bysecond or (d.second,)
    if r.freq == "SECONDLY" or tuple(seconds) != (0,):
        raise UnsupportedSchedule("crontab: cron fires on whole minutes only")
    minute = _list(r.byminute) if r.byminute else str(d.minute)
    hour = _list(r.byhour) if r.byhour else str(d.hour)
    dom, month, dow = "*", _list(r.bymonth) if r.bymonth else "*", "*"
    if r.bymonthday:
        if any(v < 0 for v in r.bymonthday):
            raise UnsupportedSchedule("crontab: cron has no negative (from month end) days")
        dom = _list(r.bymonthday)
    if r.byday:
        if r.bymonthday:
            raise UnsupportedSchedule("crontab: cron ORs day-of-month with day-of-week; BYMONTHDAY with BYDAY cannot be expressed")
        dow = _list([(w + 1) % 7 for _, w in r.byday])
    if r.freq == "MINUTELY":
        if 60 % r.interval:
            raise UnsupportedSchedule(f"crontab: every {r.interval} minutes does not divide the hour; cron restarts its steps every hour")
        minute = f"{d.minute % r.interval}-59/{r.interval}" if r.interval > 1 else (minute if r.byminute else "*")
        hour = _list(r.byhour) if r.byhour else "*"
    elif r.freq == "HOURLY":
        if 24 % r.interval:
            raise UnsupportedSchedule(f"crontab: every {r.interval} hours does not divide the day; cron restarts its steps every day")
        hour = f"{d.hour % r.interval}-23/{r.interval}" if r.interval > 1 else (hour if r.byhour else "*")
    elif r.interval != 1:
        raise UnsupportedSchedule(f"crontab: cron cannot express FREQ={r.freq} with INTERVAL={r.interval} (every other period)")
    elif r.freq == "WEEKLY" and not r.byday:
        dow = str((d.weekday() + 1) % 7)
    elif r.freq == "MONTHLY" and not (r.bymonthday or r.byday):
        dom = str(d.day)
    elif r.freq == "YEARLY" and not (r.bymonthday or r.byday):
        dom, month = str(d.day), (_list(r.bymonth) if r.bymonth else str(d.month))
    elif r.freq == "YEARLY" and r.bymonthday and not r.bymonth:
        month = str(d.month)
    return " ".join((minute, hour, dom, month, dow))
