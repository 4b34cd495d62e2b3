"""The timer-host contract: what every host that keeps an automation's timer implements.

A timer host is one place where an automation's timer lives (floorgate's own APScheduler, a user
crontab, an external agent app). Every adapter implements the whole contract; what a host cannot
do is declared in its ``Capabilities`` and answered honestly, never approximated:

``capabilities()``
    A frozen ``Capabilities`` value, the same for every instance of the adapter. Callers branch on
    it, never on the kind's name.
``express(schedule, now) -> Expressed | Held``
    The host's exact form of ``schedule``, or ``Held`` naming what the host lacks. A host never
    returns a shortened or approximated form: ``Expressed`` means the host fires at exactly the
    schedule's instants over ``HORIZON`` from ``now``. Every feature the schedule needs that is
    not in ``capabilities().expresses`` gives ``Held``.
``apply(automation_id, schedule, now) -> Applied``
    Arm ``schedule`` (which must express; otherwise ``UnsupportedSchedule``). Re-applying an
    unchanged schedule changes nothing. ``Applied.armed`` is False for a host floorgate cannot
    write (``can_apply`` False): the result then says what the owner must set. Raises
    ``HostUnavailable`` when the host cannot be written.
``read(automation_id, now, reported=None) -> Observation | None``
    A fresh readback from the host itself, never from floorgate's store. A host with
    ``can_read_back`` always returns an ``Observation`` and refuses a ``reported`` value
    (``ValueError``): floorgate does not certify a self-reading host from what someone says. A
    host without it observes only what the owner ``reported`` from the host; None when nothing
    was reported.
``matches(observation, schedule, now) -> bool``
    Whether an observation of this host means ``schedule``: the same instants over ``HORIZON``.
``remove(automation_id) -> None``
    Disarm the automation's timer; removing what is not there is a no-op. A host without
    ``can_apply`` has nothing floorgate can remove (the owner removes it in the app).
``firing_problem() -> str | None`` (a classmethod: it concerns the machine, not one timer)
    Why timers armed on this host would not fire on this machine right now (crontab: no cron
    daemon runs), or None when nothing is known against them. It never reads floorgate's store: a
    host whose timers live in ``floorgate run`` is known alive from the store's heartbeats.

floorgate acknowledges a schedule only on an observation read after the apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import StrEnum
from itertools import zip_longest
from typing import ClassVar, Protocol

from floorgate.admission._types import Frozen
from floorgate.admission.automations import TimerKind  # the closed set lives with the stored spec
from floorgate.admission.timers import ObservationState  # stored with the binding: its closed set lives there

from .schedule import Schedule

HORIZON = timedelta(days=400)


class Guarantee(StrEnum):
    """What floorgate can honestly promise about premature model wake-ups."""

    ENFORCED = "enforced"  # floorgate launches every turn after admission
    PRE_MODEL_HOOK = "pre-model hook"  # the app wakes the model, a hook seen answering guards it
    SCHEDULE_ONLY = "schedule-only"  # only the armed schedule stands between fires
    NOT_ARMED = "not armed"  # nothing was ever armed on its host (the apply failed): nothing fires

    @classmethod
    def of(cls, capabilities: Capabilities, *, hook_seen: bool) -> Guarantee:
        """The guarantee a host with ``capabilities`` gives (``hook_seen``: a pre-model hook has
        answered for the automation)."""
        if capabilities.launches_turns:
            return cls.ENFORCED
        if capabilities.needs_hook_for_guarantee and hook_seen:
            return cls.PRE_MODEL_HOOK
        return cls.SCHEDULE_ONLY


class Feature(StrEnum):
    """Schedule features a host may or may not reproduce exactly."""

    SUB_MINUTE = "fires at seconds other than :00"
    ANY_ZONE = "fires in the schedule's own time zone, not only the host's"
    DST_LOCAL_TIMES = "local times inside a DST gap or fold"
    START_DATE = "no fire before a future DTSTART"
    END = "an end (COUNT or UNTIL)"
    EXDATES = "excluded dates (EXDATE)"
    ANY_INTERVAL = "any INTERVAL (every 90 minutes, every other week)"
    ONE_SHOT = "a single fire (no RRULE)"
    POSITIONAL = "positional rules (BYSETPOS, BYWEEKNO, BYYEARDAY, numbered or from-the-end days)"


class Observation(Frozen):
    """What a host reported for one automation, and when it was read."""

    state: ObservationState
    text: str | None  # the host's own rendering of the armed schedule (present only)
    read_at: datetime
    detail: str = ""


class Capabilities(Frozen):
    """What a host can do, declared once per adapter.

    - ``can_apply``: floorgate arms the host itself (else the owner sets it, e.g. in the app);
    - ``can_read_back``: ``read`` returns the host's live state by itself (else the owner reports it);
    - ``armed_by_runtime``: the timers live inside a running ``floorgate run``, which arms them from
      the store and publishes its own readback; other processes ask it through the store;
    - ``launches_turns``: floorgate launches every turn after admission (guarantee ``enforced``);
    - ``floor_aware``: the host clamps every fire to the floor itself, so the owner's schedule is
      armed unchanged (else a floor-compatible schedule is armed, or the automation is held);
    - ``expresses``: the schedule features the host reproduces exactly (see ``Feature``);
    - ``summary``: one sentence for people.
    """

    can_apply: bool
    can_read_back: bool
    armed_by_runtime: bool
    launches_turns: bool
    floor_aware: bool
    expresses: frozenset[Feature]
    summary: str

    @property
    def needs_hook_for_guarantee(self) -> bool:
        """A host that wakes the model itself is guarded only by a pre-model hook."""
        return not self.launches_turns


@dataclass(frozen=True)
class Expressed:
    """The host's exact form of a schedule (its own text, e.g. five cron fields)."""

    text: str


@dataclass(frozen=True)
class Held:
    """Why a host cannot express a schedule exactly; the automation is held, never shortened."""

    reason: str


@dataclass(frozen=True)
class Applied:
    """The outcome of an apply. ``armed``: floorgate armed the host itself; otherwise ``detail``
    says what the owner must set. ``host_user``: the account whose timer holds it, if any."""

    armed: bool
    host_form: str
    detail: str = ""
    host_user: str | None = None


@dataclass(frozen=True)
class Reported:
    """What the owner read from a host floorgate cannot read: its current rule, or unavailable."""

    current_rrule: str | None = None
    unavailable: bool = False


class TimerHost(Protocol):
    """A host that keeps an automation's timer (the contract is in the module docstring)."""

    CAPABILITIES: ClassVar[Capabilities]

    def capabilities(self) -> Capabilities: ...

    def express(self, schedule: Schedule, now: datetime) -> Expressed | Held: ...

    def apply(self, automation_id: str, schedule: Schedule, now: datetime) -> Applied: ...

    def read(self, automation_id: str, now: datetime, reported: Reported | None = None) -> Observation | None: ...

    def matches(self, observation: Observation, schedule: Schedule, now: datetime) -> bool: ...

    def remove(self, automation_id: str) -> None: ...

    @classmethod
    def firing_problem(cls) -> str | None: ...


def refuse_report(kind: TimerKind, reported: Reported | None) -> None:
    """Hosts that read back by themselves take no owner report (see ``read`` in the contract)."""
    if reported is not None:
        raise ValueError(f"{kind} timers are read back from the host itself; a reported schedule is not accepted")


def same_instants(a: Schedule, b: Schedule, now: datetime, horizon: timedelta = HORIZON) -> bool:
    """Two schedules match when their canonical forms are equal or their occurrences agree over
    the horizon from ``now``."""
    if a.canonical() == b.canonical():
        return True
    return occurrences_until(a, now, now + horizon) == occurrences_until(b, now, now + horizon)


def occurrences_until(schedule: Schedule, now: datetime, end: datetime) -> list[datetime]:
    """Occurrences strictly after ``now`` and at or before ``end``, as UTC instants."""
    return list(iter_occurrences_until(schedule, now, end))


def iter_occurrences_until(schedule: Schedule, now: datetime, end: datetime) -> Iterator[datetime]:
    """``occurrences_until``, one at a time."""
    for occurrence in schedule._engine.iterate(now):
        if occurrence > end:
            return
        yield occurrence.astimezone(timezone.utc)


def first_difference(a: Iterable[datetime], b: Iterable[datetime]) -> tuple[datetime | None, datetime | None] | None:
    """The first pair of instants where ``a`` and ``b`` differ (None for a side that ended), or
    None when they are equal: a horizon check stops there instead of listing 400 days of fires."""
    for x, y in zip_longest(a, b):
        if x != y:
            return x, y
    return None
