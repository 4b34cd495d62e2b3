"""The reads under a readback: ``_Direct`` reads what one automation's readback needs for that
automation alone; ``_Bulk`` reads the same for every automation of a ``status`` at once (each
table once), falling back to the direct read for a row that cannot be decoded."""

from __future__ import annotations

import os
import shutil
from datetime import datetime
from typing import NamedTuple, Protocol

from floorgate.admission import (
    Admission,
    Automation,
    Automations,
    Eligibility,
    Envelope,
    Journal,
    Mission,
    Missions,
    PendingTrigger,
    Rule,
    Store,
    TickLog,
    TimerBinding,
    TimerBindings,
    TimerKind,
    Triggers,
    TurnRecord,
    WakeState,
)
from floorgate.admission.clock import Clock
from floorgate.admission.errors import CorruptState
from floorgate.admission.liveness import HookAnswer, HookAnswers

from .budget_readback import BudgetReadback, LaneLimits, judged
from .preview import ScheduleQueries


class Readback(Protocol):
    """What these reads take from ``readback.Readback``: the repositories it holds (declared here
    so the reads need not import the module that uses them)."""

    store: Store
    clock: Clock
    admission: Admission
    automations: Automations
    journal: Journal
    ticklog: TickLog
    bindings: TimerBindings
    missions: Missions
    hook_answers: HookAnswers
    budgets: BudgetReadback


def host_problem(automation: Automation) -> str | None:
    """Why the command host cannot be launched right now, or None."""
    host = automation.spec.host
    if host is None:
        return None  # an external app launches it; floorgate cannot check that host
    if host.cwd is not None and not os.path.isdir(host.cwd):
        return f"working directory {host.cwd} does not exist"
    program = host.argv[0]
    if os.sep in program:
        base = host.cwd if host.cwd is not None and not os.path.isabs(program) else ""
        path = os.path.join(base, program) if base else program
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{program} is not an executable file"
    elif shutil.which(program) is None:
        return f"{program} is not on PATH"
    return None


class Listed(NamedTuple):
    """What a readback of many needs of an automation before it is read back: its lane (in the
    order the bulk reads are asked in), its model (for the lane's limits) and its timer."""

    lane: tuple[str, str, str]
    model: str | None
    timer: TimerKind


def listed_of(automation: Automation) -> Listed:
    spec = automation.spec
    return Listed((spec.goal_id, spec.agent_id, automation.automation_id), spec.model, spec.timer)


class _Direct:
    """What one automation's readback reads, read for that automation alone."""

    def __init__(self, rb: Readback) -> None:
        self.rb = rb
        self.queries = ScheduleQueries()

    def text(self, detail: str) -> str:
        return detail

    def eligibility(self, lane: tuple[str, str, str], limits: LaneLimits | None = None) -> Eligibility:
        """The lane's verdict, its counts and budgets judged from ``limits`` (as read for the
        readback: one read for the verdict and what is shown beside it)."""
        return self.rb.admission.eligibility(*lane, limits=judged(limits))

    def limits(self, lane: tuple[str, str, str], automation: Automation) -> LaneLimits:
        return self.rb.budgets.of(lane, automation.spec.model)

    def envelope(self, lane: tuple[str, str, str]) -> tuple[Envelope, str | None]:
        from .envelope_gate import EnvelopeGate, EnvelopeMode

        return EnvelopeGate(self.rb.store, clock=self.rb.clock, mode=EnvelopeMode.OBSERVE).envelope(*lane)

    def last_turn(self, aid: str) -> TurnRecord | None:
        recent = self.rb.journal.recent(aid, limit=1)
        return recent[0] if recent else None

    def binding(self, aid: str) -> TimerBinding | None:
        return self.rb.bindings.get(aid)

    def mission(self, aid: str) -> Mission | None:
        return self.rb.missions.current(aid) or next(iter(self.rb.missions.recent(aid, 1)), None)

    def answer(self, aid: str) -> HookAnswer | None:
        return self.rb.hook_answers.get(aid)

    def unsettled(self, aid: str) -> list[TurnRecord]:
        return self.rb.journal.unsettled(aid)  # an unreadable turn raises: the automation is held

    def wake(self, aid: str) -> WakeState | None:
        return _chain(self.rb.automations.wake_state(aid))

    def trigger(self, aid: str) -> PendingTrigger | None:
        return Triggers(self.rb.store).pending(aid)

    def last_ticked(self, aid: str) -> datetime | None:
        return self.rb.ticklog.last_nominal(aid).get(aid)

    def host_problem(self, automation: Automation) -> str | None:
        return host_problem(automation)


# Lanes whose eligibility a readback of many reads at once: the eligibilities of fifty thousand
# lanes held together take ~70 MB, and each read also scans the lanes' facts in full (a few ms per
# ten thousand), so larger parts would cost memory and smaller ones repeated scans.
_ELIGIBILITY_PART = 10_000


class _Bulk:
    """The same reads for every automation at once: each table read once per readback of many
    (eligibility: once per ``_ELIGIBILITY_PART`` lanes, in the order ``automations`` are read back).
    A row that cannot be decoded holds only its automation, as the direct read would."""

    def __init__(self, rb: Readback, automations: list[Automation] | list[Listed]) -> None:
        from .envelope_gate import EnvelopeGate, EnvelopeMode

        self.direct = _Direct(rb)  # a damaged row is read again on its own: the same error, word for word
        listed = [listed_of(a) if isinstance(a, Automation) else a for a in automations]
        lanes = [x.lane for x in listed]
        self._admission = rb.admission
        self._lanes, self._read = lanes, 0  # the lanes, and how many of them have been read
        self.eligibilities: dict[tuple[str, str, str], Eligibility] = {}
        gate = EnvelopeGate(rb.store, clock=rb.clock, mode=EnvelopeMode.OBSERVE)
        rules = gate.lane_rules_or_none(lanes)  # one read of every rule: the envelopes and which lanes have limits
        self.envelopes = gate.envelopes(lanes, rules)
        models = {x.lane: x.model for x in listed}
        del listed
        readable: dict[tuple[str, str, str | None], tuple[list[Rule], str | None]] = {
            lane: (found, models[lane]) for lane, found in (rules or {}).items() if not isinstance(found, CorruptState)
        }
        self.lane_limits: dict[tuple[str, str, str | None], LaneLimits] = rb.budgets.many(readable) if rules is not None else {}
        self.turns, self.bad_turns = rb.journal.latest_scan()
        self.bindings = rb.bindings.all()
        self.damaged_bindings = rb.bindings.ids() - set(self.bindings)
        try:
            self.missions: dict[str, Mission] | None = rb.missions.latest_many()
        except CorruptState:
            self.missions = None  # some mission row is damaged: each automation reads its own
        self.answers = rb.hook_answers.all()
        unsettled, bad_unsettled = rb.journal.unsettled_scan(None)
        self.running: dict[str, list[TurnRecord]] = {}
        for record in unsettled:
            self.running.setdefault(record.automation_id, []).append(record)
        self.wakes, self.bad_wakes = rb.automations.wake_scan()
        self.triggers = Triggers(rb.store).pending_scan()
        self.ticked, self.bad_ticks = rb.ticklog.last_nominal_scan()
        self.damaged_turns = bool(bad_unsettled)  # keyed by turn id: whose they are needs a read
        self.launchable: dict[tuple[str | None, str], str | None] = {}
        self.queries = ScheduleQueries()  # automations sharing a schedule share its answers
        self.texts: dict[str, str] = {}

    def text(self, detail: str) -> str:
        """One string object per distinct detail (ten thousand automations waiting for one floor say the same)."""
        return self.texts.setdefault(detail, detail)

    def eligibility(self, lane: tuple[str, str, str], limits: LaneLimits | None = None) -> Eligibility:
        found = self.eligibilities.pop(lane, None)  # each lane is read back once: let it go
        while found is None and self._read < len(self._lanes):
            part = self._lanes[self._read : self._read + _ELIGIBILITY_PART]
            self._read += len(part)
            given = {k: states for k in part if (states := judged(self.lane_limits.get(k))) is not None}
            self.eligibilities.update(self._admission.eligibility_many(part, limits=given))  # type: ignore[arg-type]
            found = self.eligibilities.pop(lane, None)
        return found if found is not None else self.direct.eligibility(lane, limits)

    def envelope(self, lane: tuple[str, str, str]) -> tuple[Envelope, str | None]:
        return self.envelopes[lane]

    def limits(self, lane: tuple[str, str, str], automation: Automation) -> LaneLimits:
        found = self.lane_limits.get(lane)
        return found if found is not None else self.direct.limits(lane, automation)  # its rules could not be read in bulk

    def last_turn(self, aid: str) -> TurnRecord | None:
        return self.direct.last_turn(aid) if aid in self.bad_turns else self.turns.get(aid)

    def binding(self, aid: str) -> TimerBinding | None:
        return self.direct.binding(aid) if aid in self.damaged_bindings else self.bindings.get(aid)

    def mission(self, aid: str) -> Mission | None:
        return self.direct.mission(aid) if self.missions is None else self.missions.get(aid)

    def answer(self, aid: str) -> HookAnswer | None:
        return self.answers.get(aid)

    def unsettled(self, aid: str) -> list[TurnRecord]:
        return self.direct.unsettled(aid) if self.damaged_turns else self.running.get(aid, [])

    def wake(self, aid: str) -> WakeState | None:
        return self.direct.wake(aid) if aid in self.bad_wakes else _chain(self.wakes.get(aid))

    def trigger(self, aid: str) -> PendingTrigger | None:
        return self.triggers.get(aid)

    def last_ticked(self, aid: str) -> datetime | None:
        return self.direct.last_ticked(aid) if aid in self.bad_ticks else self.ticked.get(aid)

    def host_problem(self, automation: Automation) -> str | None:
        """``host_problem``, looked up once per program and working directory in one readback."""
        host = automation.spec.host
        if host is None:
            return None
        key = (host.cwd, host.argv[0])
        if key not in self.launchable:
            self.launchable[key] = host_problem(automation)
        return self.launchable[key]


def _chain(wake: WakeState | None) -> WakeState | None:
    """The wake state a plan needs: only a running backoff chain or failure streak (None plans as
    no backoff, and ten thousand automations without one share it)."""
    return wake if wake is not None and (wake.backoff_step > 0 or wake.failures > 0) else None
