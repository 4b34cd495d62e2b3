"""Automation use cases: add, edit, pause, resume, remove, trigger, and what to show of one.

Each method is one use case a surface calls with parsed values; it returns what the surface
renders (a readback after every change, so what is printed is what the hosts will do).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from floorgate.admission import (
    Automation,
    AutomationConflict,
    AutomationSpec,
    AutomationState,
    Automations,
    FailureStreaks,
    InvalidInput,
    Journal,
    Scope,
    Store,
    Tick,
    TickLog,
    TimerBinding,
    Triggered,
    Triggers,
    TurnRecord,
    WhenDenied,
)
from floorgate.admission.automations import check_spec
from floorgate.admission.clock import Clock, iso, read_clock
from floorgate.admission.errors import CorruptState
from floorgate.admission.events import EventKind, Events
from floorgate.admission.intervals import format_interval
from floorgate.hosts import InvalidSchedule, Schedule
from floorgate.hosts.flooring import min_gap
from floorgate.hosts.registry import capabilities

from .owner_gate import CREDENTIAL_ENV
from .phase import phase_warning
from .readback import AutomationReadback, Preview, Readback
from .timers import TimerService
from .wake import trigger_due, trigger_wake

MAX_PREVIEW = 1000
MAX_LISTED = 1000
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")  # what ``vet`` takes as a variable's name


def parse_schedule(text: str, clock: Clock) -> str:
    """The canonical text of a schedule the owner typed, its friendly forms resolved against the
    clock's now (needs no store: a surface checks a schedule before it opens one)."""
    return Schedule.parse(text, now=read_clock(clock)).canonical()


@dataclass(frozen=True)
class Switched:
    """A pause or resume: the automation's readback after it, and whether it changed anything
    (False: it was paused already with that note, or had nothing to resume; nothing was written)."""

    readback: AutomationReadback
    changed: bool


@dataclass(frozen=True)
class Removed:
    """What removing an automation left: a timer line to delete by hand (None: none), and its
    turns still running (removing stops none: each runs to its end or deadline, its record kept)."""

    delete_by_hand: str | None
    running: tuple[str, ...] = ()


@dataclass(frozen=True)
class Changed:
    """An automation after a change, its timer binding, and its readback."""

    automation: Automation
    binding: TimerBinding | None
    readback: AutomationReadback
    warnings: tuple[str, ...] = ()  # accepted, but the owner should know (e.g. fires more than once a minute)
    changed: bool = True  # False: the automation had these settings already; nothing was written


@dataclass(frozen=True)
class Detail:
    """``automation show``: the readback, the next host fires, recent ticks and turns, counters."""

    readback: AutomationReadback
    fires: list  # type: ignore[type-arg]  # PreviewRow
    ticks: list[Tick]
    turns: list[TurnRecord]
    counters: dict[str, dict[str, int]]
    trigger: TriggerWake | None = None  # pending triggers and when they wake it


@dataclass(frozen=True)
class TriggerWake:
    """Pending triggers of an automation as one wake: ``due`` by its debounce, ``wake_at`` when it
    fires (never before the floor or the failure streak's wait; None: it cannot fire now, see the
    readback)."""

    count: int
    first_at: datetime
    last_at: datetime
    due: datetime
    wake_at: datetime | None


@dataclass(frozen=True)
class TriggerAnswer:
    """``automation trigger``: what was recorded (``triggered.new`` False: a repeated trigger id) and
    the one wake the pending triggers make."""

    triggered: Triggered
    wake: TriggerWake | None
    readback: AutomationReadback


class AutomationService:
    """Automations on one store, with their timers."""

    def __init__(self, store: Store, clock: Clock, timers: TimerService, readback: Readback) -> None:
        self.store = store
        self.clock = clock
        self.repo = Automations(store, clock)
        self.timers = timers
        self.readback = readback

    def get(self, automation_id: str) -> Automation:
        """The stored automation (``NotFound`` names the id and how to list them)."""
        return self.repo.get(automation_id)

    def parse_schedule(self, text: str) -> str:
        """The canonical text of a schedule the owner typed (friendly forms resolve against now)."""
        return parse_schedule(text, self.clock)

    def add(self, automation_id: str, spec: AutomationSpec, *, paused: bool = False, note: str | None = None) -> Changed:
        """Store a new automation and arm its timer at once (held when its host cannot express it);
        ``paused`` (with the owner's ``note``): stored paused, so it ticks only once resumed."""
        warnings = self._vet(spec) + self._phase_warning(automation_id, spec)
        automation = self.repo.add(automation_id, spec, paused=paused, note=note)
        return self._applied(automation, warnings)

    def edit(self, automation_id: str, spec: AutomationSpec, *, expected_revision: int | None = None) -> Changed:
        """Change an automation and re-arm its timer (a line left on another host is removed first);
        with ``expected_revision``, only while it is still at exactly that revision. A ``spec`` equal
        to the stored one writes nothing (``Changed.changed`` False)."""
        current = self._at(automation_id, expected_revision)
        if spec == current.spec:  # nothing to change: no write, no new revision, the timer as it is
            rb = self.readback.automation(automation_id)
            return Changed(rb.automation or current, None, rb, changed=False)
        warnings = self._vet(spec) + self._phase_warning(automation_id, spec)
        if current.spec.timer != spec.timer:
            self.timers.remove_from_host(current)
        return self._applied(self.repo.edit(automation_id, spec, expected_revision=expected_revision), warnings)

    def check(self, spec: AutomationSpec) -> tuple[str, ...]:
        """What ``add`` and ``edit`` refuse (``InvalidInput`` naming the field) or warn about, without writing."""
        check_spec(spec)
        return self._vet(spec)

    def pause(self, automation_id: str, note: str | None, *, expected_revision: int | None = None) -> Switched:
        """Stop ticking until resumed, with the owner's ``note``. Pausing a paused automation
        writes nothing unless a new note is given (it replaces the old one). With
        ``expected_revision``, only while it is still at exactly that revision (the check and the
        write one statement; ``AutomationConflict``, nothing written, when it is not)."""
        current = self._at(automation_id, expected_revision)
        if current.state is AutomationState.PAUSED and (note is None or note == current.state_note):
            return Switched(self.readback.automation(automation_id), changed=False)
        self.repo.set_state(automation_id, AutomationState.PAUSED, note, expected_revision=expected_revision)
        return Switched(self.readback.automation(automation_id), changed=True)

    def resume(self, automation_id: str, note: str | None = None, *, expected_revision: int | None = None) -> Switched:
        """Tick again (any hold is released); a stuck mission's hold ends here (the next turn
        starts a new mission), and so does a failure streak with its backoff (the next failure is
        a first one again), in one commit. ``note`` says who resumed it and why. An active
        automation with no failure streak and no backoff has nothing to resume: nothing is written.
        ``expected_revision`` as for ``pause``."""
        current = self._at(automation_id, expected_revision)
        if current.state is AutomationState.ACTIVE and self._settled(automation_id):
            return Switched(self.readback.automation(automation_id), changed=False)
        with self.store.unit() as unit:
            FailureStreaks(self.store, self.clock).clear(current.automation_id, unit=unit)
            self.repo.set_state(automation_id, AutomationState.ACTIVE, note, expected_revision=expected_revision, unit=unit)
        return Switched(self.readback.automation(automation_id), changed=True)

    def _at(self, automation_id: str, expected_revision: int | None) -> Automation:
        """The stored automation, refused (``AutomationConflict``) when it is no longer at ``expected_revision``."""
        current = self.repo.get(automation_id)
        if expected_revision is not None and current.revision != expected_revision:
            raise AutomationConflict(automation_id, expected_revision, current.revision)
        return current

    def _settled(self, automation_id: str) -> bool:
        """Whether the automation's wake state holds no failure streak and no backoff (an
        unreadable one is not known to: a resume rewrites it)."""
        try:
            wake = self.repo.wake_state(automation_id)
        except (CorruptState, ValueError):  # a damaged row: the resume's write clears it
            return False
        return wake.failures == 0 and wake.backoff_step == 0

    def remove(self, automation_id: str) -> Removed:
        """Take the line off its timer host, then delete the automation, its wake state and
        binding in one commit (its starts and turns are kept). The automation always goes: when
        the host cannot confirm removing an armed timer, a ``timer_orphaned`` event records it
        and the answer says what to delete by hand (a left line finds no automation: it runs nothing).
        The answer also names its turns still running, which removing does not stop."""
        automation = self.repo.get(automation_id)
        unsettled, undecoded = Journal(self.store, self.clock).unsettled_scan(automation_id)
        running = (*(t.turn_id for t in unsettled), *undecoded)
        binding = self.timers.bindings.get(automation_id)
        leftover = self.timers.remove_or_describe(automation)
        self.repo.remove(automation_id)
        if leftover is not None:
            data = {"automation_id": automation_id, "timer": automation.spec.timer.value, "delete_by_hand": leftover}
            applied = iso(binding.applied_at) if binding is not None else "-"
            Events(self.store, self.clock).note(
                EventKind.TIMER_ORPHANED, automation_id, data, key=f"timer_orphaned:{automation_id}:{applied}"
            )
        return Removed(leftover, running)

    def trigger(self, automation_id: str, *, key: str | None = None, trigger_id: str | None = None) -> TriggerAnswer:
        """New work arrived: one pending wake after the automation's debounce, decided by admission
        like any automatic start (floors and budgets after). Idempotent by ``trigger_id``."""
        triggered = Triggers(self.store, self.clock).trigger(automation_id, key=key, trigger_id=trigger_id)
        return TriggerAnswer(triggered, self.trigger_wake(automation_id), self.readback.automation(automation_id))

    def trigger_wake(self, automation_id: str) -> TriggerWake | None:
        """The automation's pending triggers as one wake, or None when none is pending."""
        automation = self.repo.get(automation_id)
        pending = Triggers(self.store, self.clock).pending(automation_id)
        due = trigger_due(automation.spec.debounce, pending)
        if pending is None or due is None:
            return None
        wake_at: datetime | None = None
        if automation.state is AutomationState.ACTIVE:
            spec = automation.spec
            eligibility = self.readback.admission.eligibility(spec.goal_id, spec.agent_id, automation_id)
            if eligibility.status != "unavailable":
                wake_at = trigger_wake(due, next_eligible_at=eligibility.next_eligible_at, wake=self.repo.wake_state(automation_id))
        return TriggerWake(pending.count, pending.first_at, pending.last_at, due, wake_at)

    def list(self, goal: str | None = None) -> tuple[list[Automation], dict[str, str]]:
        """The automations that decode, and ``{automation_id: why}`` for rows that do not (listed
        too: an unreadable automation is never hidden)."""
        found, broken = self.repo.scan(goal=goal)
        return list(found.values()), broken

    def show(self, automation_id: str, *, fires: int, ticks: int) -> Detail:
        """Everything ``automation show`` prints, from one readback."""
        _limit("--next", fires, MAX_PREVIEW)
        _limit("--ticks", ticks, MAX_LISTED)
        rb = self.readback.automation(automation_id)
        now = read_clock(self.clock)
        log = TickLog(self.store)
        return Detail(
            readback=rb,
            fires=self.readback.limited_fires(rb, fires, now),  # as preview: a spent limit names itself
            ticks=log.recent(automation_id, ticks),
            turns=Journal(self.store, self.clock).recent(automation_id, 5),
            counters=log.counters(automation_id),
            trigger=self.trigger_wake(automation_id),
        )

    def preview(self, automation_id: str, *, count: int) -> Preview:
        """What a saved automation's timer host fires next, and which fires run (writes nothing)."""
        _limit("--next", count, MAX_PREVIEW)
        return self.readback.preview(automation_id, count)

    def preview_new(
        self, automation_id: str, *, goal: str, agent: str, schedule: str, timer: str, count: int, when_denied: WhenDenied = WhenDenied.WAIT
    ) -> Preview:
        """What an unsaved schedule would do under today's floors (writes nothing)."""
        _limit("--next", count, MAX_PREVIEW)
        parsed = Schedule.parse(schedule, now=read_clock(self.clock))
        # What the timer host would arm: raised to fit the floor, or held (exactly as 'add' does).
        armed, _raised, hold = self.timers.desired_form(parsed, timer, goal=goal, agent=agent, automation_id=automation_id)
        preview = self.readback.preview_schedule(
            goal=goal, agent=agent, automation_id=automation_id, schedule=armed or parsed, timer=timer, count=count, when_denied=when_denied
        )
        if hold is not None:
            return replace(preview, rows=[], blocked=f"held: {hold}")
        return preview

    def _applied(self, automation: Automation, warnings: tuple[str, ...] = ()) -> Changed:
        binding = self.timers.apply(automation)
        rb = self.readback.automation(automation.automation_id)
        return Changed(rb.automation or automation, binding, rb, warnings)

    def _phase_warning(self, automation_id: str, spec: AutomationSpec, *, lane: str = "") -> tuple[str, ...]:
        """Under ``wait`` on a timer that meets the floor by waiting for it (floorgate's own), a
        binding floor at least the schedule's shortest gap lets one late or manual start move
        every later run off the schedule's time of day: say so, and what keeps it."""
        if spec.when_denied is not WhenDenied.WAIT or not capabilities(spec.timer).floor_aware:
            return ()
        effective = self.readback.admission.eligibility(spec.goal_id, spec.agent_id, automation_id).floor
        gap = min_gap(Schedule.parse(spec.schedule), read_clock(self.clock))
        if effective is None or not effective.floor or gap is None or effective.floor < gap[0]:
            return ()
        return (phase_warning(effective.floor, gap[0], lane=lane),)

    def phase_warnings(self, scope: Scope) -> tuple[str, ...]:
        """After a floor write at ``scope``: one line for each automation under it whose schedule
        the floor now puts off its time of day after a late or manual start (as ``add`` warns)."""
        found, _broken = self.repo.scan(goal=scope.goal_id)
        lanes = sorted(
            (a for a in found.values() if scope.agent_id in (None, a.spec.agent_id) and scope.automation_id in (None, a.automation_id)),
            key=lambda a: a.automation_id,
        )
        warnings: list[str] = []
        for a in lanes:
            try:
                warnings += self._phase_warning(a.automation_id, a.spec, lane=a.automation_id)
            except InvalidSchedule:  # the floor is written; a damaged schedule is status's to report
                continue
        return tuple(warnings)

    def _vet(self, spec: AutomationSpec) -> tuple[str, ...]:
        return vet(spec, read_clock(self.clock))


def vet(spec: AutomationSpec, now: datetime) -> tuple[str, ...]:
    """Refuse a schedule that will never fire again at ``now``, and an owner credential in the
    host's environment (``InvalidInput`` naming the flag); the warnings of a schedule that fires
    more than once a minute. Reads no store: a surface vets a spec before it opens one."""
    for name in spec.host.env_allow if spec.host is not None else ():
        if _ENV_NAME.fullmatch(name) is None:
            raise InvalidInput(
                "--env",
                f"{name!r} is not an environment variable's name (letters, digits and _, not starting with a digit, "
                "at most 255): give the name only; its value comes from the host's environment",
            )
        if name in CREDENTIAL_ENV:
            raise InvalidInput(
                "--env",
                f"{name} is a credential (an owner token or the store URL) and a managed turn never receives it; drop --env {name}",
            )
    schedule = Schedule.parse(spec.schedule)
    problem = schedule.planning_problem()
    if problem is not None:
        raise InvalidInput("--schedule", problem)
    coming = schedule.occurrences(3, after=now)
    if not coming:
        last = schedule.last_at_or_before(now)
        ended = f" (its last fire was {iso(last)})" if last is not None else ""
        raise InvalidInput("--schedule", f"this schedule has no fire after now{ended}; give a later DTSTART, UNTIL or COUNT")
    gaps = [b - a for a, b in itertools.pairwise(coming)]
    if gaps and min(gaps) < timedelta(minutes=1):
        every = format_interval(min(gaps))
        return (f"this schedule fires every {every}, more than once a minute: each admitted fire can be a paid run",)
    return ()


def _limit(field: str, value: int, most: int) -> None:
    if type(value) is not int or not 1 <= value <= most:
        raise InvalidInput(field, f"give 1..{most}")
