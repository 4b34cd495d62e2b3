"""Dry runs: the next fire times of a schedule and whether today's floors would admit each.

Nothing is written. The simulation starts from the lane's real eligibility and assumes every
admitted fire starts on time, so an owner sees before saving that a 15-minute schedule under a
daily floor runs once a day, and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from admission import Admission
from hosts import Schedule


@dataclass(frozen=True)
class PreviewRow:
    fire_at: datetime  # aware, in the schedule's zone
    admitted: bool
    eligible_at: datetime | None  # when denied: the floor's next eligible time at that fire


@dataclass(frozen=True)
class Preview:
    rows: list[PreviewRow]
    floor_seconds: float
    status: str  # the lane's eligibility status now


def preview(admission: Admission, schedule: Schedule, *, goal: str, agent: str, automation: str, count: int, now: datetime) -> Preview:
    eligibility = admission.eligibility(goal, agent, automation)
    floor = eligibility.floor.floor if eligibility.floor is not None else None
    next_eligible = eligibility.next_eligible_at
    unavailable = eligibility.status == "unavailable"
    rows = []
    for fire in schedule.occurrences(count, after=now):
        fire_utc = fire.astimezone(timezone.utc)  # floors are elapsed time, not wall-clock time
        if unavailable:
            rows.append(PreviewRow(fire, False, None))
            continue
        ok = next_eligible is None or fire_utc >= next_eligible
        rows.append(PreviewRow(fire, ok, None if ok else next_eligible))
        if ok and floor:
            next_eligible = fire_utc + floor
    return Preview(rows=rows, floor_seconds=floor.total_seconds() if floor else 0.0, status=eligibility.status)
