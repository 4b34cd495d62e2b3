"""The timer-host contract: what a host that keeps its own timer must expose.

A host declares ``capabilities()``, arms a schedule with ``apply(automation_id, schedule)`` and
reports what it actually armed with ``read(automation_id)``: an ``Observation`` that is present
(with the host's own text for the schedule), absent, or unavailable. floorgate acknowledges a
schedule only on an observation read after the apply; it never certifies from what it asked for.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from .schedule import Schedule

Guarantee = Literal["enforced", "pre-model hook", "schedule-only"]
HORIZON = timedelta(days=400)


class Observation(BaseModel):
    """What a host reported for one automation, and when it was read."""

    model_config = ConfigDict(frozen=True)

    state: Literal["present", "absent", "unavailable"]
    text: str | None  # the host's own rendering of the armed schedule (present only)
    read_at: datetime
    detail: str = ""


class Capabilities(BaseModel):
    """What a host can do. ``floor_aware``: it clamps every fire to the floor by itself."""

    model_config = ConfigDict(frozen=True)

    kind: str
    floor_aware: bool
    launches_through_admission: bool
    pre_model_hook: bool
    min_period: timedelta | None
    expresses: str  # a sentence: which schedules it can express exactly


class TimerHost(Protocol):
    """A host that keeps its own timer (see the module docstring for the contract)."""

    kind: str

    def capabilities(self) -> Capabilities: ...

    def express(self, schedule: Schedule, now: datetime) -> str:
        """The host's exact rendering of ``schedule``; raises ``UnsupportedSchedule`` naming what the
        host lacks when it cannot fire at exactly the same instants."""
        ...

    def apply(self, automation_id: str, schedule: Schedule, now: datetime) -> None:
        """Arm ``schedule`` for the automation; re-applying an unchanged schedule changes nothing.
        Raises ``HostUnavailable`` when the host cannot be written."""
        ...

    def read(self, automation_id: str, now: datetime) -> Observation:
        """A fresh readback from the host itself (never from floorgate's store)."""
        ...

    def matches(self, observation: Observation, schedule: Schedule, now: datetime) -> bool:
        """Whether the observed schedule means ``schedule`` (same instants over the horizon)."""
        ...


def same_instants(a: Schedule, b: Schedule, now: datetime, horizon: timedelta = HORIZON) -> bool:
    """Two schedules match when their canonical forms are equal or their occurrences agree over
    the horizon from ``now``."""
    if a.canonical() == b.canonical():
        return True
    return occurrences_until(a, now, now + horizon) == occurrences_until(b, now, now + horizon)


def occurrences_until(schedule: Schedule, now: datetime, end: datetime) -> list[datetime]:
    """Occurrences strictly after ``now`` and at or before ``end``, as UTC instants."""
    out = []
    for occurrence in schedule._engine.iterate(now):
        if occurrence > end:
            break
        out.append(occurrence.astimezone(timezone.utc))
    return out
