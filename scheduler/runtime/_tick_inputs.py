"""What one tick decides from, in one read: ``admission.tick_facts`` plus what the host keeps.

The automation row is decoded once per revision (the sync loop's decode is reused when it is
current) and the envelope's precheck is judged once per change of the lane's rules, as long as no
mission of the automation is open, waiting for its owner, or stuck since the owner's last change;
then the precheck depends on the automation and the rules alone. Otherwise the executor reads the
missions and judges it itself, as a ``floorgate turn run`` does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from floorgate.admission import Automation, Automations, NotFound, Store, WakeState
from floorgate.admission.clock import to_us
from floorgate.admission.errors import CorruptState
from floorgate.admission.tick_facts import TickFacts, read_tick_facts
from floorgate.hosts import Schedule
from floorgate.hosts.schedule import parse_canonical

from ..app.envelope_gate import UNREADABLE_RULES, EnvelopeGate, TurnGate, merged
from ._plan import Decoded, lane_of

PRIME_EVERY = 1.0  # seconds between two bulk judgements of every automation's precheck


@dataclass(frozen=True)
class TickInputs:
    """A tick's inputs. ``pre`` None: the executor judges the envelope from the missions.
    ``ruled`` False: the read found no rule (floor or limit) of the lane, its goal or its agent,
    so no other tick's start can change this one's decision."""

    automation: Automation
    schedule: Schedule
    wake: WakeState
    unsettled: bool
    pre: TurnGate | None
    ruled: bool = True


@dataclass(frozen=True)
class _Known:
    automation: Automation
    schedule: Schedule
    rules: tuple[int, int, int] | None = None
    pre: TurnGate | None = None


class TickReader:
    """Reads a tick's inputs: one statement when the automation and its rules are unchanged."""

    def __init__(self, store: Store, automations: Automations, gate: EnvelopeGate, decoded: Callable[[], dict[str, Decoded]]) -> None:
        self.store = store
        self.automations = automations
        self.gate = gate
        self._decoded = decoded  # the sync loop's decoded rows
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()
        self._primed_at = -PRIME_EVERY

    def read(self, automation_id: str) -> TickInputs:
        """The inputs of a tick of ``automation_id`` (``NotFound`` when it is gone)."""
        known = self._lookup(automation_id)
        facts = read_tick_facts(self.store, automation_id, known.automation.spec.goal_id, known.automation.spec.agent_id)
        if facts.revision != known.automation.revision:
            known = self._load(automation_id)  # edited (or removed) since: read the row, and the facts of its lane
            facts = read_tick_facts(self.store, automation_id, known.automation.spec.goal_id, known.automation.spec.agent_id)
        if facts.revision is None:
            raise NotFound(f"automation {automation_id!r} does not exist (see 'floorgate automation list')")
        pre = self._precheck(known, facts)
        return TickInputs(known.automation, known.schedule, facts.wake, facts.unsettled, pre, ruled=facts.rules[0] != 0)

    def prime(self) -> None:
        """Judge every decoded automation's precheck now (a host does it once its timers are
        armed, on its sync thread: otherwise a burst's first tick would, on a deciding thread)."""
        self._prime()

    def _precheck(self, known: _Known, facts: TickFacts) -> TurnGate | None:
        if facts.missions_pending:
            return None
        if known.rules == facts.rules and known.pre is not None:
            return known.pre
        if self._prime():
            with self._lock:
                known = self._known.get(known.automation.automation_id, known)
            if known.rules == facts.rules and known.pre is not None:
                return known.pre
        pre = self.gate.precheck(known.automation)
        if pre.mission is not None or pre.refusal is UNREADABLE_RULES:
            # A mission opened meanwhile, or a damaged rule (repaired in place, the fingerprint
            # may not change): judged this time, never kept.
            return pre
        with self._lock:
            current = self._known.get(known.automation.automation_id)
            if current is not None and current.automation.revision == known.automation.revision:
                self._known[known.automation.automation_id] = _Known(current.automation, current.schedule, facts.rules, pre)
        return pre

    def _prime(self) -> bool:
        """Judge the precheck of every automation the sync loop decoded, from one read of all rules
        (a host's first ticks, or the ticks after a rule changed, would each read their lane's);
        at most once per ``PRIME_EVERY`` seconds. True when it primed."""
        with self._lock:
            now = time.monotonic()
            if now - self._primed_at < PRIME_EVERY:
                return False
            self._primed_at = now
        decoded = list(self._decoded().values())  # the sync loop replaces entries meanwhile
        usable = [(d.automation, d.schedule) for d in decoded if d.automation is not None and d.schedule is not None and d.problem is None]
        if not usable:
            return False
        rules = self.gate.lane_rules(list({lane_of(automation) for automation, _ in usable}))
        primed = {}
        for automation, schedule in usable:
            found = rules[lane_of(automation)]
            if isinstance(found, CorruptState):
                continue  # a damaged rule may be this lane's: its ticks judge it themselves (and deny)
            fingerprint = (len(found), sum(r.revision for r in found), max((to_us(r.updated_at) for r in found), default=0))
            pre = self.gate.judge(automation, None, *merged(found))
            primed[automation.automation_id] = _Known(automation, schedule, fingerprint, pre)
        with self._lock:
            for automation_id, known in primed.items():
                current = self._known.get(automation_id)
                if current is None or current.automation.revision <= known.automation.revision:
                    self._known[automation_id] = known
        return True

    def _lookup(self, automation_id: str) -> _Known:
        with self._lock:
            known = self._known.get(automation_id)
        if known is not None:
            return known
        decoded = self._decoded().get(automation_id)
        if decoded is not None and decoded.automation is not None and decoded.schedule is not None and decoded.problem is None:
            return self._keep(_Known(decoded.automation, decoded.schedule))
        return self._load(automation_id)

    def _load(self, automation_id: str) -> _Known:
        automation = self.automations.get(automation_id)
        return self._keep(_Known(automation, parse_canonical(automation.spec.schedule)))

    def _keep(self, known: _Known) -> _Known:
        with self._lock:
            self._known[known.automation.automation_id] = known
        return known
