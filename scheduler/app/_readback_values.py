"""What a readback is: the values every surface renders (``AutomationReadback`` and its
``ReadbackState``, the ``Overview`` of a ``status``, a ``Preview``) and the ``ReadContext`` the
readbacks of one request share. ``readback.Readback`` computes them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from floorgate.admission import Automation, EffectiveFloor, Eligibility, Envelope, HoldKind, HostPolicy, Mission, TimerBinding, TurnRecord
from floorgate.admission.clock import iso
from floorgate.admission.liveness import HostBeat
from floorgate.hosts import Schedule
from floorgate.hosts.registry import capabilities, firing_problem

from .budget_readback import LaneLimits
from .preview import PlanInputs, PreviewRow, simulate


class ReadbackState(StrEnum):
    """Where an automation stands, for people: one value, and ``detail`` says why."""

    ELIGIBLE = "eligible"
    INTERVAL_WAIT = "interval_wait"
    LIMIT_WAIT = "limit_wait"  # a count or budget is spent: it starts again when the window frees it
    PAUSED = "paused"
    HELD = "held"
    FAILING = "failing"  # its latest turns failed: automatic starts slow down (never shown as eligible)
    RUNNING = "running"
    HOST_UNAVAILABLE = "host_unavailable"
    AWAITING_OWNER = "awaiting_owner"
    UNAVAILABLE = "unavailable"


# The states an owner's pause or a hold put an automation in: it fires nothing until resumed.
STOPPED = frozenset({ReadbackState.PAUSED, ReadbackState.HELD})


@dataclass(frozen=True, slots=True)  # slots: a status of fifty thousand holds fifty thousand
class AutomationReadback:
    """What one automation will do next, and why. ``automation`` is None when its row is unreadable."""

    automation_id: str
    automation: Automation | None
    state: ReadbackState
    detail: str
    hold: HoldKind | None  # why a held automation does not tick, as stored (see ``unreadable``)
    eligibility: Eligibility | None
    next_fire_at: datetime | None  # when its next turn starts, as its timer host will fire it
    plan: PlanInputs | None  # what next fires are computed from (None: nothing will fire)
    last_turn: TurnRecord | None = None
    binding: TimerBinding | None = None
    guarantee: str = "enforced"
    guarantee_why: str = ""
    hook_answered_at: datetime | None = None
    no_timer_host: bool = False  # it would fire, but its timer host is not running (detail says which)
    drift: str | None = None  # how the host's live timer differs from the applied one, read just now
    mission: Mission | None = None
    envelope: Envelope | None = None
    failures: int = 0  # consecutive failed turns (the failure streak; 0: none)
    failing_until: datetime | None = None  # no automatic start before this (the streak's slowdown)
    unreadable: bool = False  # held because its row, schedule, wake state or ticks cannot be decoded
    limits: LaneLimits | None = None  # its counts and budgets: used, held, left, when each frees

    def fires(self, count: int, now: datetime) -> list[PreviewRow]:
        """The next ``count`` host fires and which of them run (none while it cannot fire)."""
        return simulate(self.plan, count=count, now=now) if self.plan is not None else []


@dataclass(frozen=True)
class ReadContext:
    """One read of the deployment-wide inputs every readback of a request shares."""

    now: datetime
    policy: HostPolicy
    hosts: tuple[HostBeat, ...]
    _down: dict[str, str | None] = field(default_factory=dict, compare=False, repr=False)

    def alive(self, now: datetime) -> list[HostBeat]:
        """The timer hosts running at ``now``."""
        return [h for h in self.hosts if h.alive(now)]

    def not_firing(self, timer: str) -> str | None:
        """Why timers of kind ``timer`` fire nothing now (no ``floorgate run`` alive for floorgate's
        own timer; the host's declared problem otherwise), None when nothing is known against them."""
        if timer not in self._down:
            if capabilities(timer).armed_by_runtime:
                self._down[timer] = None if self.alive(self.now) else self.no_host_detail(self.now)
            else:
                self._down[timer] = firing_problem(timer)
        return self._down[timer]

    def no_host_detail(self, now: datetime) -> str:
        """Why nothing fires on floorgate's own timer: no host runs, and when one last did."""
        last = max(self.hosts, key=lambda h: h.beat_at, default=None)
        seen = f"; the last one ({last.host_id}) was seen at {iso(last.beat_at)}" if last is not None else ""
        return f"no floorgate host is running, so nothing fires: start 'floorgate run'{seen}"


@dataclass(frozen=True)
class Overview:
    """Every automation's readback, the floored lanes without one, and the timer hosts."""

    now: datetime
    readbacks: list[AutomationReadback]
    lanes: list[Eligibility]
    hosts: tuple[HostBeat, ...]
    lane_limits: dict[tuple[str, str, str | None], LaneLimits] = field(default_factory=dict)  # of the lanes that have limits

    @property
    def own_timers(self) -> bool:
        """Whether any automation fires on a timer a floorgate host arms (status then lists the hosts)."""
        return any(rb.automation is not None and capabilities(rb.automation.spec.timer).armed_by_runtime for rb in self.readbacks)


@dataclass(frozen=True)
class OverviewStream:
    """``Overview`` as ``status`` renders it, read as it is rendered: ``readbacks`` yields each
    automation's readback once, in the overview's order, and holds none of them afterwards."""

    now: datetime
    readbacks: Iterator[AutomationReadback]
    lanes: list[Eligibility]
    hosts: tuple[HostBeat, ...]
    own_timers: bool
    lane_limits: dict[tuple[str, str, str | None], LaneLimits] = field(default_factory=dict)  # of the lanes that have limits


@dataclass(frozen=True)
class Preview:
    """A dry run: the schedule the host arms, its floor, and what becomes of each coming fire."""

    automation_id: str
    schedule: Schedule | None
    floor: timedelta | None
    lane_status: str
    rows: list[PreviewRow]
    blocked: str | None  # why nothing fires (paused, held, awaiting the owner, unreadable)
    off_phase: str | None = None  # 'runs at 23:57 instead of 23:40 since the manual start of ...'
    effective: EffectiveFloor | None = None  # the lane's floor and its rules (a goal floor across agents shows there)
    held_by: str | None = None  # a count or budget that holds the lane now: which, and until when (or why it cannot be checked)
