"""The console's picture of an automation's recent past: scheduled fires, starts and denials on a
time axis, as positioned marks an SVG template draws (no script, no chart library).

Fires and denials come from the automation's ticks; starts from its start records, so a manual
start (Run now, ``turn run --manual-reason``), which no tick stands for, is on the strip too.
The strip zooms (the last hour, day or week); marks that fall into one slot of the axis are drawn
as one mark that says how many it stands for, so an every-minute schedule reads as a row of counts
instead of a smear of overlapping dots.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from enum import StrEnum

from floorgate.admission.decisions import StartKind, StartRecord
from floorgate.admission.tallies import SlotCount

WIDTH = 600
SLOTS = 100  # marks closer than WIDTH / SLOTS px share one drawn mark
ROWS = {"scheduled": 12, "admitted": 30, "denied": 48}


class Zoom(StrEnum):
    """How far back the strip reaches."""

    HOUR = "hour"
    DAY = "day"
    WEEK = "week"

    @property
    def span(self) -> timedelta:
        return {Zoom.HOUR: timedelta(hours=1), Zoom.DAY: timedelta(days=1), Zoom.WEEK: timedelta(days=7)}[self]

    @property
    def step(self) -> timedelta:
        """The distance between the axis's labels."""
        return {Zoom.HOUR: timedelta(minutes=10), Zoom.DAY: timedelta(hours=3), Zoom.WEEK: timedelta(days=1)}[self]

    @classmethod
    def parse(cls, text: str | None) -> Zoom:
        """The zoom a page asked for (``?zoom=``); anything else is the day."""
        try:
            return cls(text or cls.DAY.value)
        except ValueError:
            return cls.DAY


@dataclass(frozen=True)
class Mark:
    """One drawn mark: ``count`` events of one row within one slot of the axis."""

    row: str  # scheduled, admitted, denied
    x: float
    y: int
    count: int
    title: str

    @property
    def radius(self) -> float:
        return 3.0 if self.count == 1 else min(7.0, 3.0 + self.count**0.5)


@dataclass(frozen=True)
class Timeline:
    """The marks since ``since`` and the axis's labels (x, text)."""

    since: datetime
    until: datetime
    zoom: Zoom
    marks: list[Mark]
    axis: list[tuple[float, str]]
    manual: int = 0  # of the starts, how many were manual

    def count(self, row: str) -> int:
        return sum(m.count for m in self.marks if m.row == row)


def timeline(
    counts: list[SlotCount], starts: list[StartRecord], now: datetime, zoom: Zoom = Zoom.DAY, zone: tzinfo | None = None
) -> Timeline:
    """Draw the store's per-slot tick counts (``Tallies.slot_counts`` over ``slot_width(zoom)``) as
    fires and denials, and each start record as a start, automatic or manual, grouped by slot;
    label the axis in ``zone``."""
    since = now - zoom.span
    span = zoom.span.total_seconds()

    def slot(at: datetime) -> int:
        return min(SLOTS - 1, max(0, int((at - since).total_seconds() / span * SLOTS)))

    def label(at: datetime) -> str:
        local = at.astimezone(zone) if zone is not None else at
        return f"{local:%H:%M:%S}" if zoom is not Zoom.WEEK else f"{local:%a %H:%M}"

    def titled(n: int, what: str, first: datetime, last: datetime) -> str:
        return f"{what} {label(first)}" if n == 1 else f"{n} x {what}, {label(first)} .. {label(last)}"

    drawn: list[tuple[int, str, int, str]] = []
    for c in counts:
        if 0 <= c.slot < SLOTS:
            row = "scheduled" if c.kind == "fire" else "denied"
            drawn.append((c.slot, row, c.count, titled(c.count, "fire due" if row == "scheduled" else "denied", c.first_at, c.last_at)))
    manual = 0
    grouped: dict[int, list[StartRecord]] = defaultdict(list)
    for st in starts:
        if st.anchor_at >= since:
            manual += st.kind is StartKind.MANUAL
            grouped[slot(st.anchor_at)].append(st)
    for n, group in grouped.items():
        group.sort(key=lambda st: st.anchor_at)
        if len(group) == 1:
            st = group[0]
            how = f"manual: {st.manual_reason}" if st.kind is StartKind.MANUAL else "scheduled"
            drawn.append((n, "admitted", 1, f"started {label(st.anchor_at)} ({how})"))
        else:
            hand = sum(1 for st in group if st.kind is StartKind.MANUAL)
            text = titled(len(group), "starts", group[0].anchor_at, group[-1].anchor_at) + (f" ({hand} manual)" if hand else "")
            drawn.append((n, "admitted", len(group), text))
    width = WIDTH / SLOTS
    marks = [Mark(row, round((n + 0.5) * width, 1), ROWS[row], count, title) for n, row, count, title in sorted(drawn)]
    return Timeline(since, now, zoom, marks, _axis(since, zoom, zone), manual)


def slot_width(zoom: Zoom) -> timedelta:
    """The width of one slot of the axis at ``zoom`` (what ``Tallies.slot_counts`` counts by)."""
    return zoom.span / SLOTS


def _axis(since: datetime, zoom: Zoom, zone: tzinfo | None) -> list[tuple[float, str]]:
    """Labels at whole steps of local time (every 10 min, 3 h or day), left to right."""
    local = since.astimezone(zone) if zone is not None else since
    step = zoom.step
    if zoom is Zoom.WEEK:
        first = local.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    elif zoom is Zoom.DAY:
        first = local.replace(minute=0, second=0, microsecond=0)
        first += timedelta(hours=(3 - first.hour % 3) % 3 or 3) if first <= local else timedelta(0)
    else:
        first = local.replace(second=0, microsecond=0)
        first += timedelta(minutes=(10 - first.minute % 10) % 10 or 10)
    out = []
    at, span = first, zoom.span.total_seconds()
    # Offsets from the instant (UTC), not from the wall clock: a DST change moves wall time only.
    while (at.astimezone(timezone.utc) - since).total_seconds() < span:
        x = round((at.astimezone(timezone.utc) - since).total_seconds() / span * WIDTH, 1)
        text = f"{at:%a %m-%d}" if zoom is Zoom.WEEK else f"{at:%H:%M}"
        out.append((x, text))
        at = (at + step) if zoom is not Zoom.WEEK else (at + step).replace(hour=0)
    return out
