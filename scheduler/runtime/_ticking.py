"""The host's tick path: a tick is decided where it fires, and only an admitted turn needs a worker.

``HostRuntime._tick`` (what APScheduler runs on its own threads) reads the tick's inputs in one
statement (``_tick_inputs``), applies the overlap rule, and decides the floor's denial from one
plain read of admission's facts taken after the fire (``Admission.denial``: no lock, no write); a
denial or a skip is recorded there and then, and the timer is re-planned from the decision itself.
A tick that read may admit goes to an admitter thread, where the executor's ``begin`` (the envelope
precheck and the serialized reservation) decides it again, so that a burst's denials never wait
behind its admissions' commits. An admitted reservation is handed to the ``TurnPool``; its tick is
recorded with the turn's verdict once the turn settles, and the timer is re-planned again after the
wake state moved. ``tick`` does the same with everything in the calling thread (tests, benchmarks,
readback).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple

from floorgate.admission import Automation, Automations, Decision, Reason, Store, Tick, Triggers, TurnRecord, WakeState
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.unit import UnitOfWork

from ..app.envelope_gate import TurnGate
from ..app.wake import BackoffPolicy, nominal_time
from ._plan import Armed, Episode, PlanInputs
from ._tick_inputs import TickInputs, TickReader
from ._turn_pool import TurnPool
from .executor import Admitted, TurnExecutor, TurnOutcome, new_turn_id

log = logging.getLogger("floorgate.run")

# Decisions whose ``next_eligible_at`` is the lane's next eligible time as of that decision, so the
# timer can be re-planned from it without reading the store again.
_PLANNED_BY_DECISION = frozenset(Reason) - {Reason.STATE_UNAVAILABLE, Reason.TURN_ALREADY_STARTED}


def _groupable(admitting: _Admitting) -> bool:
    """Whether its ``begin`` can write nothing outside the reservation's transaction (no backoff
    to advance, no mission to read and hold): only then may it join a group."""
    pre = admitting.inputs.pre
    return pre is not None and pre.refusal is None and admitting.inputs.wake.backoff_step == 0


class AdmitGroups:
    """One thread that takes the queued ticks that may admit in groups (of at most ``most``)."""

    def __init__(self, run: Callable[[list[_Admitting]], None], first: Callable[[], AbstractContextManager[None]], most: int = 512) -> None:
        self._run = run
        self._first = first  # the store's: a group's reservations go before the turns' writes
        self._most = most
        self._queue: deque[_Admitting] = deque()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def submit(self, admitting: _Admitting) -> bool:
        """Queue it; False once stopped (the caller decides it another way)."""
        with self._cond:
            if self._stopped:
                return False
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="floorgate-admit-group", daemon=True)
                self._thread.start()
            self._queue.append(admitting)
            self._cond.notify()
        return True

    def stop(self) -> None:
        """Take no more; the queued ones are still decided before this returns."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait()
                if not self._queue:
                    return
                group = [self._queue.popleft() for _ in range(min(self._most, len(self._queue)))]
            try:
                with self._first():
                    self._run(group)
            except BaseException:  # the job records its own failures; the thread never dies
                log.exception("reserving a group of ticks failed")


class Siblings:
    """The ticks that may admit, one agent at a time: while one tick of an agent is being decided
    (its reservation queued or running), its siblings on the same agent wait here; once that
    decision is committed they are read again (one plain read each), and those the read now denies
    are denied without taking the write lock. A burst of ten lanes under an agent floor then makes
    one serialized decision per agent, not ten."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, str], list[_Admitting]] = {}  # present: one of the agent's is in flight

    def lead_or_wait(self, admitting: _Admitting) -> bool:
        """True: no other tick of its agent is in flight, this one leads (decide it now); False:
        it waits for the leader's decision (``done`` hands it back)."""
        key = _agent_of(admitting)
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is None:
                self._waiting[key] = []
                return True
            waiting.append(admitting)
            return False

    def take(self, key: tuple[str, str]) -> list[_Admitting]:
        """The leader of ``key`` was decided: the ticks that waited for it (the agent stays in
        flight until ``settle`` finds no more waiting)."""
        with self._lock:
            waiting = self._waiting.get(key, [])
            self._waiting[key] = []
            return waiting

    def lead(self, key: tuple[str, str], rest: list[_Admitting]) -> None:
        """A waiter leads now; ``rest`` wait for it (ahead of any that came meanwhile)."""
        with self._lock:
            self._waiting.setdefault(key, [])[:0] = rest

    def settle(self, key: tuple[str, str]) -> bool:
        """No decision of ``key`` in flight any more, unless some tick came meanwhile (False: take again)."""
        with self._lock:
            if self._waiting.get(key):
                return False
            self._waiting.pop(key, None)
            return True


def _agent_of(admitting: _Admitting) -> tuple[str, str]:
    spec = admitting.inputs.automation.spec
    return (spec.goal_id, spec.agent_id or "")


class _Admitting(NamedTuple):
    """A claimed tick that the plain read did not deny: ``begin`` decides it."""

    automation_id: str
    nominal: datetime
    fired_at: datetime
    inputs: TickInputs
    turn_id: str


@dataclass(frozen=True)
class PendingTurn:
    """An admitted tick whose turn has not run yet."""

    automation_id: str
    nominal: datetime
    fired_at: datetime
    wake: WakeState
    admitted: Admitted


class Ticking:
    """The tick methods of ``HostRuntime`` (a mixin: the state lives on the runtime)."""

    clock: Clock
    automations: Automations
    executor: TurnExecutor
    tick_reader: TickReader
    turns: TurnPool
    admitters: ThreadPoolExecutor
    groups: AdmitGroups | None
    siblings: Siblings
    store: Store
    triggers: Triggers
    _lock: threading.Lock
    _running: dict[str, int]
    _inflight: set[str]
    _resuming: set[str]
    _armed: dict[str, Armed]
    _tick_episodes: dict[str, Episode]
    _episodes: dict[str, Episode]

    if TYPE_CHECKING:  # provided by HostRuntime

        def _record(
            self, automation_id: str, nominal: datetime, actual: datetime, decision: str, reason: str, turn_id: str | None = None
        ) -> Tick: ...

        def _ticked_merge(self, latest: dict[str, datetime]) -> None: ...

        def _unsettled(self, automation_id: str | None) -> list[TurnRecord]: ...

        def _replan_after_tick(self, automation_id: str, inputs: PlanInputs | None = None, *, turn_ended: bool = False) -> None: ...

        def _backoff(self) -> BackoffPolicy: ...

        def _save_wake(self, state: WakeState) -> None: ...

    # -- ticks -----------------------------------------------------------------------------------
    def tick(self, automation_id: str) -> Tick:
        """One timer tick, its admitted turn run in this thread: skip on overlap, else a managed
        turn (which passes admission); the timer is re-planned after the decision and the turn."""
        first = self._tick_once(automation_id)
        decided = self._admit(first) if isinstance(first, _Admitting) else first
        if isinstance(decided, Tick):
            return decided
        return self._run_pending(decided)

    def _tick(self, automation_id: str) -> None:
        """What APScheduler runs: decide the tick here; a tick that may admit goes on to an admitter
        (its reservation waits for the store's write lock there, never holding up the denials of
        other ticks), and an admitted turn to the turn pool. A tick can fail (recorded as an error
        tick) but never kills its timer."""
        episode = self._tick_episode(automation_id)
        try:
            decided = self._tick_once(automation_id)
        except Exception as exc:
            self._tick_failed(episode, automation_id, exc, None)
            return
        if isinstance(decided, _Admitting):
            if self.siblings.lead_or_wait(decided):
                self._dispatch(decided)
            return
        episode.ok()

    def _dispatch(self, decided: _Admitting) -> None:
        if self.groups is not None and _groupable(decided) and self.groups.submit(decided):
            return
        try:
            self.admitters.submit(self._admit_queued, decided)
        except RuntimeError:  # the admitters stopped (the host is stopping): decide it here
            self._admit_queued(decided)

    def _led(self, key: tuple[str, str]) -> None:
        """The leader of ``key`` was decided (and its reservation committed, or nothing written):
        each waiting sibling is read again; a denial is recorded here, the first that may still
        admit leads next (the others wait for it)."""
        while True:
            waiting = self.siblings.take(key)
            for i, admitting in enumerate(waiting):
                if self._denied_sibling(admitting):
                    continue
                self.siblings.lead(key, waiting[i + 1 :])
                self._dispatch(admitting)
                return
            if self.siblings.settle(key):
                return

    def _denied_sibling(self, admitting: _Admitting) -> bool:
        """Deny a waiting sibling from a plain read taken now (after its leader's commit); False
        when that read may admit."""
        automation_id, nominal, fired_at, inputs, turn_id = admitting
        episode = self._tick_episode(automation_id)
        try:
            early = self._denied_early(inputs.automation, turn_id, nominal, inputs.pre)
            if early is None:
                return False
            self._release_claim(automation_id, turn_id)
            self._denied(automation_id, nominal, fired_at, inputs.wake, early.reason, early.next_eligible_at, turn_id)
        except Exception as exc:
            self._tick_failed(episode, automation_id, exc, None)
            return True
        episode.ok()
        return True

    def _admit_queued(self, admitting: _Admitting) -> None:
        """An admitter's job: the reservation of a tick that may admit, and its hand-off."""
        episode = self._tick_episode(admitting.automation_id)
        try:
            with self.store.first():  # before the turns' bookkeeping waiting for SQLite's writer
                decided = self._admit(admitting)
            if not isinstance(decided, Tick):
                self._hand_off(decided)
        except Exception as exc:
            self._tick_failed(episode, admitting.automation_id, exc, None)
        else:
            episode.ok()
        finally:
            self._led(_agent_of(admitting))

    def _tick_failed(self, episode: Episode, automation_id: str, exc: Exception, turn_id: str | None) -> None:
        episode.failed(exc)
        now = read_clock(self.clock)
        self._record(automation_id, now, now, "error", type(exc).__name__, turn_id)

    def _tick_once(self, automation_id: str) -> Tick | _Admitting:
        """The first half of a tick's decision: a recorded tick (skipped, or denied from one plain
        read taken after the fire), or the claimed tick that may admit, for ``_admit``."""
        fired_at = read_clock(self.clock)
        inputs = self.tick_reader.read(automation_id)
        automation, wake = inputs.automation, inputs.wake
        armed = self._armed.get(automation_id)
        nominal = nominal_time(inputs.schedule, wake, fired_at, armed.snapshot.trigger_at if armed is not None else None)
        self._ticked_merge({automation_id: nominal})  # a re-plan while the turn runs must not fire it again
        if automation.state != "active":
            return self._record(automation_id, nominal, fired_at, "skipped", automation.state)
        if automation.spec.overlap == "skip" and (self._is_running(automation_id) or (inputs.unsettled and self._unsettled(automation_id))):
            return self._record(automation_id, nominal, fired_at, "skipped", "overlap")
        turn_id = new_turn_id(automation_id)
        early = self._denied_early(automation, turn_id, nominal, inputs.pre)
        if early is not None:
            return self._denied(automation_id, nominal, fired_at, wake, early.reason, early.next_eligible_at, turn_id)
        self._claim(automation_id, turn_id)  # before this job ends: the overlap rule sees it from here on
        return _Admitting(automation_id, nominal, fired_at, inputs, turn_id)

    def _denied_early(self, automation: Automation, turn_id: str, nominal: datetime, pre: TurnGate | None) -> Decision | None:
        """The floor's denial of a tick whose envelope precheck let it through (as ``begin`` would
        have), from one plain read: nothing ``begin`` checks or writes for an admission (the log
        directory, the lock) is needed for it. None: ``begin`` decides."""
        if pre is None or pre.refusal is not None or automation.spec.host is None:
            return None
        spec = automation.spec
        return self.executor.admission.denial(
            goal=spec.goal_id, agent=spec.agent_id, automation=automation.automation_id, turn_id=turn_id, trigger_time=nominal
        )

    def _admit_group(self, group: list[_Admitting]) -> None:
        """SQLite: reserve a group of ticks in one write transaction, one durable commit for all,
        each in its own savepoint (a refused or failed one leaves nothing); the admitted turns are
        handed over once the commit is durable. A failed commit admitted none of them."""
        if len(group) == 1:
            self._admit_queued(group[0])
            return
        try:
            self._reserve_group(group)
        finally:
            for key in dict.fromkeys(_agent_of(a) for a in group):
                self._led(key)

    def _reserve_group(self, group: list[_Admitting]) -> None:
        admitted: list[PendingTurn] = []
        left = list(group)  # not decided yet: none of them holds a reservation
        try:
            with self.store.unit() as unit:
                while left:
                    pending = self._admit_within(unit, left[0])
                    left.pop(0)
                    if pending is not None:
                        admitted.append(pending)
        except Exception as exc:
            lost = [(p.automation_id, p.admitted.turn_id) for p in admitted] + [(a.automation_id, a.turn_id) for a in left]
            for automation_id, turn_id in lost:
                self._release_claim(automation_id, turn_id)
                self._tick_failed(self._tick_episode(automation_id), automation_id, exc, turn_id)
                self._replan_after_tick(automation_id)  # an admitted one was re-planned as if it had started
            return
        for pending in admitted:
            self._hand_off(pending)

    def _admit_within(self, unit: UnitOfWork, admitting: _Admitting) -> PendingTurn | None:
        episode = self._tick_episode(admitting.automation_id)
        savepoint = unit.begin_nested()
        try:
            decided = self._admit(admitting, within=unit)
        except Exception as exc:
            savepoint.rollback()
            self._tick_failed(episode, admitting.automation_id, exc, None)
            return None
        episode.ok()
        if isinstance(decided, Tick):
            savepoint.rollback()  # a denial wrote nothing; a refused admission's writes go
            return None
        savepoint.commit()
        return decided

    def _admit(self, admitting: _Admitting, within: UnitOfWork | None = None) -> Tick | PendingTurn:
        """The second half: ``begin`` (the envelope precheck and the serialized reservation)."""
        automation_id, nominal, fired_at, inputs, turn_id = admitting
        automation, wake = inputs.automation, inputs.wake
        begun: TurnOutcome | Admitted | None = None
        try:
            begun = self.executor.begin(
                automation, nominal=nominal, turn_id=turn_id, minted=True, overlap_checked=True, pre=inputs.pre, within=within, wake=wake
            )
        finally:
            if not isinstance(begun, Admitted):
                self._release_claim(automation_id, turn_id)
        if isinstance(begun, Admitted):
            served = self._serve_triggers(automation_id, turn_id, within)
            self._replan_from(automation_id, wake, begun.decision.reason, begun.decision.next_eligible_at, served=served)
            return PendingTurn(automation_id, nominal, fired_at, wake, begun)
        decision = begun.decision
        if decision is None:
            # The envelope refused before admission (latch, owner ask, allowlist, exhausted bound):
            # nothing ran, nothing moved, and the wake cadence is not a failure to back off from.
            return self._record(automation_id, nominal, fired_at, "denied", begun.verdict.stop_reason, begun.turn_id)
        if decision.admitted:  # pragma: no cover - begin hands every admission over unlaunched
            return self._after_turn(automation_id, nominal, fired_at, wake, begun)
        return self._denied(automation_id, nominal, fired_at, wake, decision.reason, decision.next_eligible_at, begun.turn_id)

    def _denied(
        self,
        automation_id: str,
        nominal: datetime,
        fired_at: datetime,
        wake: WakeState,
        reason: Reason,
        next_eligible_at: datetime | None,
        turn_id: str,
    ) -> Tick:
        """Record a denial, advance a running backoff, and re-plan from what the denial said."""
        if wake.backoff_step > 0:
            wake = self._backoff().advance(wake, read_clock(self.clock))
            self._save_wake(wake)
        tick = self._record(automation_id, nominal, fired_at, "denied", reason.value, turn_id)
        self._replan_from(automation_id, wake, reason, next_eligible_at)
        return tick

    def _hand_off(self, pending: PendingTurn) -> None:
        """Queue the admitted turn for a turn worker; a stopped pool leaves it to recovery."""
        log.debug("decided %s (due %s): admitted %s", pending.automation_id, pending.nominal.isoformat(), pending.admitted.turn_id)
        if not self.turns.submit(pending.admitted.turn_id, lambda: self._run_queued(pending)):
            self._release_claim(pending.automation_id, pending.admitted.turn_id)
            log.warning(
                "turn %s of %s was admitted as the host stopped: left journaled, recovery resumes it",
                pending.admitted.turn_id,
                pending.automation_id,
            )

    def _tick_episode(self, automation_id: str) -> Episode:
        """The failure episode of an automation's ticks (decisions and their turns share one)."""
        episode = self._tick_episodes.get(automation_id)
        if episode is None:
            episode = self._tick_episodes.setdefault(automation_id, Episode(f"ticks of {automation_id}", log))
        return episode

    def _run_queued(self, pending: PendingTurn) -> None:
        """A turn worker's job: run the turn; a failure is recorded as an error tick."""
        episode = self._tick_episode(pending.automation_id)
        try:
            self._run_pending(pending)
        except Exception as exc:
            episode.failed(exc)
            self._record(pending.automation_id, pending.nominal, pending.fired_at, "error", type(exc).__name__, pending.admitted.turn_id)

    def _run_pending(self, pending: PendingTurn) -> Tick:
        try:
            outcome = self.executor.finish(pending.admitted)
        finally:
            self._release_claim(pending.automation_id, pending.admitted.turn_id)
        tick = self._after_turn(pending.automation_id, pending.nominal, pending.fired_at, pending.wake, outcome)
        self._replan_after_tick(pending.automation_id, turn_ended=True)  # the wake state may have moved, a trigger come
        return tick

    def _after_turn(self, automation_id: str, nominal: datetime, fired_at: datetime, wake: WakeState, outcome: TurnOutcome) -> Tick:
        if outcome.verdict.status == "succeeded":
            if wake.backoff_step > 0:
                self._save_wake(self._backoff().clear(wake))
        else:
            step = wake.backoff_step
            now = read_clock(self.clock)
            self._save_wake(self._backoff().advance(wake, now) if step > 0 else self._backoff().reset(automation_id, now))
        return self._record(automation_id, nominal, fired_at, "admitted", outcome.verdict.status, outcome.turn_id)

    def _replan_from(
        self, automation_id: str, wake: WakeState, reason: Reason, next_eligible_at: datetime | None, *, served: bool = False
    ) -> None:
        """Re-plan after a decision from what it said (no read), or from a fresh read when it could
        not say (the state was unreadable). ``served``: the start served the pending triggers."""
        armed = self._armed.get(automation_id)
        if armed is None:
            return
        if reason not in _PLANNED_BY_DECISION:
            self._replan_after_tick(automation_id)
            return
        trigger = None if served else armed.snapshot.inputs.trigger
        self._replan_after_tick(
            automation_id, replace(armed.snapshot.inputs, wake=wake, next_eligible_at=next_eligible_at, trigger=trigger)
        )

    def _serve_triggers(self, automation_id: str, turn_id: str, within: UnitOfWork | None) -> bool:
        """A turn starts: it serves the triggers pending until now (in the reservation's transaction
        when it has one). Only when this host knows of one: a trigger it has not read yet stays
        pending and wakes the automation once more, still subject to floors. True: it served."""
        armed = self._armed.get(automation_id)
        if armed is None or armed.snapshot.inputs.trigger is None:
            return False
        self.triggers.serve(automation_id, turn_id, unit=within)
        return True

    # -- recovery --------------------------------------------------------------------------------
    def _resume(self, automation_id: str, turn_id: str) -> None:
        """A turn worker's job: resume a crashed runner's reservation by its turn id."""
        self._claim(automation_id, turn_id)
        try:
            automation = self.automations.get(automation_id)
            outcome = self.executor.run(automation, turn_id=turn_id)
            now = read_clock(self.clock)
            self._record(automation_id, now, now, "admitted", f"resumed_{outcome.verdict.status}", turn_id)
        except Exception as exc:
            self._episodes["recover"].failed(exc)
        finally:
            with self._lock:
                self._resuming.discard(turn_id)
            self._release_claim(automation_id, turn_id)

    # -- bookkeeping -----------------------------------------------------------------------------
    def _claim(self, automation_id: str, turn_id: str) -> None:
        """Count the turn as this process's (running or queued) before it can be journaled, so
        neither the overlap rule nor the abandoned-turn check ever mistakes it for someone else's."""
        with self._lock:
            self._running[automation_id] = self._running.get(automation_id, 0) + 1
            self._inflight.add(turn_id)

    def _release_claim(self, automation_id: str, turn_id: str) -> None:
        with self._lock:
            self._running[automation_id] -= 1
            self._inflight.discard(turn_id)

    def _is_running(self, automation_id: str) -> bool:
        with self._lock:
            return self._running.get(automation_id, 0) > 0
