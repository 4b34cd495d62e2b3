"""Windows and amounts for limits that count across runs (pure values, no store).

One grammar for ``--per``: a rolling duration as intervals are written elsewhere (``1d``, ``12h``,
``90m``, ``PT12H``), or a calendar period in an IANA zone: ``day@Europe/Berlin`` (from local
midnight), ``week@Zone`` (from Monday's local midnight), ``month@Zone`` (from the 1st's local
midnight). Calendar periods are computed on the local calendar and converted to instants, so a
day on which the clocks change is 23 h or 25 h long, exactly.

A rolling window of length L at instant ``now`` holds what happened at ``t`` with
``now - L < t <= now``: a start at ``t`` leaves it at exactly ``t + L`` (``leaves_at``), the same
arithmetic as a floor's ``next_eligible_at``. A calendar window at ``now`` holds ``period_start(now)
<= t <= now``; everything in it leaves at ``next_period_start(now)``.

Amounts: tokens as ``2M``, ``500k``, ``1.5M`` or plain digits (whole numbers, at most
``MAX_TOKENS``); US dollars as decimals with at most 6 places (``20``, ``0.25``), no sign, no
exponent, no NaN, at most ``MAX_USD``, kept as ``Decimal`` and stored as whole micro-dollars.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from ._types import Frozen
from .errors import InvalidInput
from .intervals import TooLong, format_interval, parse_interval

# Defensive caps: an extra digit is a typo, not a budget.
MAX_TOKENS = 10**12
MAX_USD = Decimal(1_000_000)
MAX_STARTS = 1_000_000
MAX_ROLLING = timedelta(days=366)
USD_PLACES = 6
_MICRO = Decimal(1_000_000)
_US = timedelta(microseconds=1)
# What ``amount_frees_at`` answers when the amount needed is larger than the whole budget.
NEVER = datetime.max.replace(tzinfo=timezone.utc)

_HINT = "use a rolling duration (1d, 12h, 90m) or a calendar period day@Zone, week@Zone or month@Zone (e.g. day@Europe/Berlin)"
# ASCII digits only: Python's \d (and int()) would take other scripts' digits as well.
_TOKENS = re.compile(r"(\d+)(?:\.(\d{1,6}))?([kKmMgG]?)", re.ASCII)
_TOKEN_UNITS = {"": 1, "k": 1_000, "m": 1_000_000, "g": 1_000_000_000}
_USD = re.compile(r"\$?(\d{1,7})(?:\.(\d{1,6}))?", re.ASCII)
_ZONE = re.compile(r"[A-Za-z][A-Za-z0-9_+\-]*(?:/[A-Za-z0-9_+\-]+){0,2}")
# Names the zone data holds that are not one zone: each machine's own setting (hosts sharing a
# store would disagree on when a day starts), and the copies counted in another time scale
# (``right/`` counts leap seconds: its midnight is not UTC's).
_HOST_ZONES = frozenset({"localtime", "posixrules"})
_OTHER_SCALES = ("posix/", "right/")


class WindowKind(StrEnum):
    """How a window moves: with the instant (rolling) or by calendar periods in a zone."""

    ROLLING = "rolling"
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


# What ``Window.nominal_length`` compares a calendar period by: a month counts as 28 days, its shortest.
_NOMINAL_PERIOD = {WindowKind.DAY: timedelta(days=1), WindowKind.WEEK: timedelta(days=7), WindowKind.MONTH: timedelta(days=28)}


class Window(Frozen):
    """A window as a value: ``length`` for a rolling window, ``zone`` (IANA) for a calendar one."""

    kind: WindowKind
    length: timedelta | None = None
    zone: str | None = None

    @property
    def rolling(self) -> bool:
        return self.kind is WindowKind.ROLLING

    def text(self) -> str:
        """The canonical form, which ``parse_window`` reads back to an equal value."""
        if self.kind is WindowKind.ROLLING:
            return format_interval(self._length())
        return f"{self.kind.value}@{self.zone}"

    def __str__(self) -> str:
        return self.text()

    def _length(self) -> timedelta:
        if self.length is None:
            raise InvalidInput("per", "a rolling window without a length")
        return self.length

    def _tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone or "UTC")

    def start(self, now: datetime) -> datetime:
        """The earliest instant the window at ``now`` can hold (rolling: exclusive, calendar: inclusive)."""
        _aware(now)
        if self.kind is WindowKind.ROLLING:
            return now - self._length()
        return self.period_start(now)

    def holds(self, at: datetime, now: datetime) -> bool:
        """Whether something that happened at ``at`` counts in the window at ``now``."""
        _aware(at)
        if at > now:
            return False
        if self.kind is WindowKind.ROLLING:
            return at > now - self._length()
        return at >= self.period_start(now)

    def counts(self, at: datetime, now: datetime) -> bool:
        """Whether a limit counts something that happened at ``at`` at ``now``: it is held, or it
        is later than ``now`` (a clock set back never frees what was already counted)."""
        return at > now or self.holds(at, now)

    def leaves_at(self, at: datetime, now: datetime) -> datetime:
        """When something that happened at ``at`` (and is held at ``now``) stops counting."""
        _aware(at)
        if self.kind is WindowKind.ROLLING:
            return at + self._length()
        return self.next_period_start(now)

    def period_start(self, at: datetime) -> datetime:
        """The calendar period containing ``at``: its first instant (local midnight of the day,
        the Monday, the 1st; a midnight skipped by a clock change is the first instant after it)."""
        _aware(at)
        local = at.astimezone(self._tz()).date()
        return self._midnight(self._first_day(local))

    def next_period_start(self, at: datetime) -> datetime:
        """The first instant of the calendar period after the one containing ``at``."""
        _aware(at)
        first = self._first_day(at.astimezone(self._tz()).date())
        if self.kind is WindowKind.DAY:
            nxt = first + timedelta(days=1)
        elif self.kind is WindowKind.WEEK:
            nxt = first + timedelta(days=7)
        elif self.kind is WindowKind.MONTH:
            nxt = date(first.year + (first.month == 12), first.month % 12 + 1, 1)
        else:
            raise InvalidInput("per", "a rolling window has no periods")
        return self._midnight(nxt)

    def _first_day(self, local: date) -> date:
        if self.kind is WindowKind.DAY:
            return local
        if self.kind is WindowKind.WEEK:
            return local - timedelta(days=local.weekday())
        if self.kind is WindowKind.MONTH:
            return local.replace(day=1)
        raise InvalidInput("per", "a rolling window has no periods")

    def _midnight(self, day: date) -> datetime:
        return first_instant(day, self._tz())

    def nominal_length(self) -> timedelta:
        """A length to compare windows by (a calendar month counts as 28 days, its shortest)."""
        if self.kind is WindowKind.ROLLING:
            return self._length()
        return _NOMINAL_PERIOD[self.kind]


def first_instant(day: date, tz: ZoneInfo) -> datetime:
    """The first instant (UTC) whose local date in ``tz`` is ``day`` or later: local midnight, or,
    when a clock change skips midnight, the instant of the change (exact to the microsecond)."""
    candidates = sorted({datetime(day.year, day.month, day.day, tzinfo=tz, fold=f).astimezone(timezone.utc) for f in (0, 1)})
    lo, hi = candidates[0], candidates[-1]
    if lo.astimezone(tz).date() >= day:
        return lo
    # Midnight falls in a gap: the change lies between the two readings; bisect to the microsecond.
    while hi - lo > _US:
        mid = lo + (hi - lo) // 2
        if mid.astimezone(tz).date() >= day:
            hi = mid
        else:
            lo = mid
    return hi


def _aware(at: datetime) -> None:
    if not isinstance(at, datetime) or at.tzinfo is None or at.utcoffset() is None:
        raise InvalidInput("at", "an aware datetime (UTC)")


def rolling(length: timedelta) -> Window:
    """A rolling window of ``length`` (above 0, at most ``MAX_ROLLING``)."""
    if not isinstance(length, timedelta) or length <= timedelta(0) or length > MAX_ROLLING:
        raise InvalidInput("per", f"a rolling window is above 0 and at most {format_interval(MAX_ROLLING)}; {_HINT}")
    return Window(kind=WindowKind.ROLLING, length=length)


def parse_window(text: object, field: str = "--per") -> Window:
    """Parse ``--per``: ``1d``, ``12h``, ``day@Zone``, ``week@Zone``, ``month@Zone``; anything else
    raises ``InvalidInput`` naming ``field``."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(field, f"give a window; {_HINT}")
    raw = text.strip()
    if "@" in raw:
        kind_text, _, zone = raw.partition("@")
        try:
            kind = WindowKind(kind_text.lower())
        except ValueError:
            kind = WindowKind.ROLLING
        if kind is WindowKind.ROLLING:
            raise InvalidInput(field, f"{raw!r}: the period before @ is day, week or month; {_HINT}")
        if not _ZONE.fullmatch(zone) or len(zone) > 64:
            raise InvalidInput(field, f"{raw!r}: {zone!r} is not an IANA zone name (e.g. Europe/Berlin, UTC)")
        if zone in _HOST_ZONES or zone.startswith(_OTHER_SCALES):
            raise InvalidInput(
                field,
                f"{raw!r}: {zone!r} is not a fixed zone (it follows this machine's settings or another time scale); name the zone, e.g. Europe/Berlin or UTC",
            )
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            raise InvalidInput(field, f"{raw!r}: unknown zone {zone!r}; {_zone_hint(zone)}") from None
        return Window(kind=kind, zone=zone)
    try:
        length = parse_interval(raw, field)
    except TooLong:  # a duration, only too long: the window's own bound
        raise InvalidInput(field, f"{raw!r}: a rolling window is above 0 and at most {format_interval(MAX_ROLLING)}; {_HINT}") from None
    except InvalidInput:
        raise InvalidInput(field, f"{raw!r} is not a window; {_HINT}") from None
    if length <= timedelta(0) or length > MAX_ROLLING:
        raise InvalidInput(field, f"{raw!r}: a rolling window is above 0 and at most {format_interval(MAX_ROLLING)}; {_HINT}")
    return Window(kind=WindowKind.ROLLING, length=length)


@functools.lru_cache(maxsize=64)  # a stored rule's zone is decoded at each decision: scan the zone list once per zone
def _zone_hint(zone: str) -> str:
    """What to write instead of ``zone``, which did not load: the IANA name it misspells only in
    case, if any (a correctly spelled one that did not load: this machine has no zone data for it)."""
    folded = zone.casefold()
    found = sorted(name for name in available_timezones() if name.casefold() == folded)
    if zone in found:
        return "this machine's zone data has no such zone (install tzdata)"
    return f"zone names are case-sensitive: {found[0]}" if found else "use an IANA name such as Europe/Berlin or UTC"


def looser_window(before: Window, after: Window) -> bool:
    """Whether a limit moving from ``before`` to ``after`` may let more through: a shorter window,
    or any change of kind or zone that is not a longer rolling window (not provably tighter)."""
    if before == after:
        return False
    if before.rolling and after.rolling:
        return after._length() < before._length()
    return True


def parse_tokens(text: object, field: str = "--budget-tokens", *, allow_zero: bool = False) -> int:
    """``2M``, ``500k``, ``1.5M``, ``1200`` to a whole number of tokens (at most ``MAX_TOKENS``)."""
    hint = "a whole number of tokens such as 1200, 500k, 2M or 1.5M"
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise InvalidInput(field, f"expected {hint}")
    raw = str(text).strip().replace("_", "")
    m = _TOKENS.fullmatch(raw)
    if m is None:
        raise InvalidInput(field, f"{raw!r} is not {hint} (no sign, no exponent)")
    whole, frac, unit = m.groups()
    if len(whole.lstrip("0")) > 13:  # more digits than any amount under the cap (parsed no further)
        _check_budget(True, False, raw, field, f"{MAX_TOKENS:,} tokens", "0 tokens", "at least 1")
    scale = _TOKEN_UNITS[unit.lower()]
    if unit == "m":
        raise InvalidInput(field, f"{raw!r}: write millions as M (2M); lowercase m is ambiguous")
    value = Decimal(f"{whole}.{frac or 0}") * scale
    if value != value.to_integral_value():
        low = int(value)
        whole = f"{low} or {low + 1}" if low else "1"
        raise InvalidInput(field, f"{raw!r} is {value.normalize():f} tokens; give a whole number such as {whole}")
    tokens = int(value)
    _check_budget(tokens > MAX_TOKENS, tokens == 0 and not allow_zero, raw, field, f"{MAX_TOKENS:,} tokens", "0 tokens", "at least 1")
    return tokens


def _check_budget(over: bool, empty: bool, raw: str, field: str, cap: str, zero: str, least: str) -> None:
    """Refuse a budget amount above its ``cap``, or one of ``zero`` where none is allowed."""
    if over:
        raise InvalidInput(field, f"{raw!r} is above the cap of {cap}; check for a typo")
    if empty:
        raise InvalidInput(field, f"{raw!r}: a budget of {zero} admits nothing; give {least} (or remove the limit)")


def format_tokens(tokens: int) -> str:
    """``2000000`` -> ``2M``, ``1500`` -> ``1.5k``; exact (read back by ``parse_tokens``)."""
    for unit, scale in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if tokens >= scale:
            text = str(Decimal(tokens) / scale)
            if len(text.partition(".")[2]) <= 3:
                return f"{text}{unit}"
    return str(tokens)


def parse_usd(text: object, field: str = "--budget-usd", *, allow_zero: bool = False) -> Decimal:
    """A US dollar amount with at most 6 decimals (``20``, ``0.25``, ``$3.5``), as an exact ``Decimal``."""
    hint = "a dollar amount such as 20, 0.25 or 3.000001 (at most 6 decimals, no sign or exponent)"
    if isinstance(text, Decimal):
        text = format(text, "f")
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise InvalidInput(field, f"expected {hint}")
    raw = str(text).strip()
    m = _USD.fullmatch(raw)
    if m is None:
        raise InvalidInput(field, f"{raw!r} is not {hint}")
    try:
        value = Decimal(f"{m.group(1)}.{m.group(2) or 0}")
    except InvalidOperation:  # pragma: no cover - the pattern admits only digits
        raise InvalidInput(field, f"{raw!r} is not {hint}") from None
    _check_budget(value > MAX_USD, value == 0 and not allow_zero, raw, field, f"{MAX_USD} USD", "0 USD", "more than 0")
    return value


def usd_to_micros(value: Decimal) -> int:
    """Whole micro-dollars (exact: at most 6 decimals)."""
    micros = value * _MICRO
    if micros != micros.to_integral_value():
        raise InvalidInput("usd", f"{value} has more than {USD_PLACES} decimals")
    return int(micros)


def micros_to_usd(micros: int) -> Decimal:
    """The ``Decimal`` amount of whole micro-dollars."""
    return (Decimal(micros) / _MICRO).quantize(Decimal(1).scaleb(-USD_PLACES))


def format_usd(value: Decimal) -> str:
    """``$20.00``, ``$0.123456``: at least cents, every significant decimal."""
    text = format(value.normalize(), "f")
    whole, _, frac = text.partition(".")
    return f"${whole}.{frac.ljust(2, '0')}"


def check_max_starts(value: object, field: str = "--max-starts", *, allow_zero: bool = False) -> int:
    """A count limit: a whole number 1..``MAX_STARTS`` (``allow_zero``: or 0, a removal)."""
    least, zero = (0, ", or 0 to remove the count") if allow_zero else (1, "")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidInput(field, f"a whole number of starts, 1..{MAX_STARTS}{zero}")
    text = str(value).strip()
    if not (text.isascii() and text.isdigit()) or not least <= int(text) <= MAX_STARTS:
        raise InvalidInput(field, f"{text!r} is not a whole number of starts in 1..{MAX_STARTS}{zero}")
    return int(text)


class Counted(NamedTuple):
    """A count limit's starts in its window: how many, and the ``limit``-th most recent of them
    (None: fewer than ``limit``), all that when it frees depends on."""

    starts: int
    nth_latest: datetime | None


def counted(starts: Iterable[datetime], limit: int, window: Window, now: datetime) -> Counted:
    """``Counted`` from the anchors of a series' starts (those the window at ``now`` counts)."""
    held = sorted(t for t in starts if window.counts(t, now))
    return Counted(len(held), held[len(held) - limit] if 0 < limit <= len(held) else None)


def count_frees_at(starts: Iterable[datetime], limit: int, window: Window, now: datetime) -> datetime | None:
    """For a count limit of ``limit`` starts per ``window``: None when one more start fits at
    ``now``, else the exact instant it will (the oldest start that must leave, leaves)."""
    return counted_frees_at(counted(starts, limit, window, now), limit, window, now)


def counted_frees_at(found: Counted, limit: int, window: Window, now: datetime) -> datetime | None:
    """``count_frees_at`` from what was ``counted`` (by ``counted``, or gathered by a statement)."""
    if found.starts < limit:
        return None
    if not window.rolling:
        return window.next_period_start(now)
    if found.nth_latest is None:  # no start to leave (a limit of 0): never by waiting
        return NEVER
    # found.starts - limit + 1 of them must leave; they leave oldest first, the nth latest last.
    return window.leaves_at(found.nth_latest, now)


def amount_frees_at(entries: Sequence[tuple[datetime, int]], budget: int, need: int, window: Window, now: datetime) -> datetime | None:
    """For a budget of ``budget`` units per ``window`` and entries ``(at, amount)``: None when
    ``need`` more fit at ``now``; else when enough ages out that they do (a calendar window: the
    next period start), or ``NEVER`` when ``need`` alone is larger than the budget."""
    held = sorted((at, amount) for at, amount in entries if window.counts(at, now))
    total = sum(amount for _, amount in held)
    if total + need <= budget:
        return None
    if need > budget:
        return NEVER
    if not window.rolling:
        return window.next_period_start(now)
    for at, amount in held:
        total -= amount
        if total + need <= budget:
            return window.leaves_at(at, now)
    return now  # pragma: no cover - unreachable: an empty window fits need <= budget
