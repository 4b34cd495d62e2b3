"""The dashboard's picture of the last days of one automation: scheduled fires, starts and denials
on a time axis, as positioned marks an SVG template draws (no script, no chart library).

Fires and denials come from the automation's ticks; starts from its start records, so a manual
start (Run now, ``turn run --manual-reason``), which no tick stands for, is on the strip too."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from floorgate.admission.decisions import StartKind, StartRecord
from floorgate.admission.tallies import TickMark

WIDTH = 600
DAYS = 3
ROWS = {"scheduled": 12, "admitted": 30, "denied": 48}


@dataclass(frozen=True)
class Mark:
    row: str  # scheduled, admitted, denied
    x: float
    y: int
    title: str


@dataclass(frozen=True)
class Timeline:
    """Marks of the last ``DAYS`` days and day ticks along the axis."""

    since: datetime
    until: datetime
    marks: list[Mark]
    days: list[tuple[float, str]]

    manual: int = 0  # of the starts, how many were manual

    def count(self, row: str) -> int:
        return sum(1 for m in self.marks if m.row == row)


def timeline(ticks: list[TickMark], starts: list[StartRecord], now: datetime, days: int = DAYS) -> Timeline:
    """Place each tick as a scheduled fire (a denied one also marks a denial) and each start record
    as a start, automatic or manual."""
    since = now - timedelta(days=days)
    span = (now - since).total_seconds()

    def x(at: datetime) -> float:
        return round(max(0.0, min(1.0, (at - since).total_seconds() / span)) * WIDTH, 1)

    marks: list[Mark] = []
    for t in ticks:
        if t.nominal_at < since:
            continue
        marks.append(Mark("scheduled", x(t.nominal_at), ROWS["scheduled"], f"fire due {t.nominal_at.isoformat()}"))
        if t.decision == "denied":
            marks.append(Mark("denied", x(t.actual_at), ROWS["denied"], f"denied {t.actual_at.isoformat()}"))
    manual = 0
    for st in starts:
        if st.anchor_at < since:
            continue
        how = f"manual: {st.manual_reason}" if st.kind is StartKind.MANUAL else "scheduled"
        manual += st.kind is StartKind.MANUAL
        marks.append(Mark("admitted", x(st.anchor_at), ROWS["admitted"], f"started {st.anchor_at.isoformat()} ({how})"))
    midnight = since.replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    axis = [(x(midnight + timedelta(days=i)), (midnight + timedelta(days=i)).strftime("%m-%d")) for i in range(days)]
    return Timeline(since, now, marks, axis, manual)
