"""The host's tick path: a tick is decided where it fires, and only an admitted turn needs a worker.

``Ticking.job`` (what APScheduler runs on its own threads) reads the tick's inputs in one
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

import functools
import inspect
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from floorgate.admission import Automation, Automations, Decision, Journal, Reason, Store, Tick, Triggers, TurnRecord, WakeState
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.decide.checks import PLANNED_BY_DECISION
from floorgate.admission.unit import UnitOfWork

from ..app.envelope_gate import TurnGate
from ..app.wake import BackoffPolicy, nominal_time
from . import recovery
from ._admit_queue import AdmitGroups, Admitters, Admitting, Siblings, agent_of, groupable
from ._plan import Armed, Episode, PlanInputs
from ._tick_inputs import TickReader
from ._tick_log import TickRecords
from ._turn_pool import TurnPool
from .executor import Admitted, TurnExecutor, TurnOutcome, new_turn_id

log = logging.getLogger("floorgate.run")

DECIDERS = 4  # APScheduler's threads: they decide ticks (a few statements each) and never run a turn


class TickJob:
    """What every timer runs: ``tick(automation_id)``, one object shared by all jobs.

    Its signature is stated, so APScheduler's check of each new job's arguments reads it instead
    of building it with ``inspect.signature`` (a third of arming 10,000 timers at host start).
    """

    __slots__ = ("tick",)
    __signature__ = inspect.Signature([inspect.Parameter("automation_id", inspect.Parameter.POSITIONAL_OR_KEYWORD)])

    def __init__(self, tick: Callable[[str], None]) -> None:
        self.tick = tick

    def __call__(self, automation_id: str) -> None:
        self.tick(automation_id)


class TimerPlans(Protocol):
    """The timers a tick's decision moves (the host's).

    ``replan_after_tick`` re-arms the automation's timer when its inputs changed since it was
    armed: ``inputs`` as the decision gave them, None to read them again now; ``turn_ended``: a
    trigger pending now wakes it again. It never raises (a failed read is its own failure episode)
    and does nothing for an automation that is not armed. ``backoff`` is the host policy's backoff
    as of now (the policy changes at a sync).
    """

    def replan_after_tick(self, automation_id: str, inputs: PlanInputs | None = None, *, turn_ended: bool = False) -> None: ...

    def backoff(self) -> BackoffPolicy: ...


@dataclass(frozen=True)
class PendingTurn:
    """An admitted tick whose turn has not run yet."""

    automation_id: str
    nominal: datetime
    fired_at: datetime
    wake: WakeState
    admitted: Admitted


@dataclass(frozen=True)
class TickParts:
    """What ``Ticking`` decides with: the store and the repositories it reads and writes, the
    executor that begins and runs turns, the tick's reader, the tick records, and the host's
    timers (``armed``: what each automation's timer was armed from, read only; ``plans``)."""

    store: Store
    clock: Clock
    executor: TurnExecutor
    reader: TickReader
    automations: Automations
    journal: Journal
    triggers: Triggers
    records: TickRecords
    armed: Mapping[str, Armed]
    plans: TimerPlans
    recovering: Episode  # the host's recovery episode: a resumed turn that fails is one of its failures


class Ticking:
    """Decides the host's ticks and runs their admitted turns.

    Contract: ``job`` is what every timer runs; it decides the tick on the calling (APScheduler's)
    thread, records it or passes it on to be reserved and run, and never raises. ``tick`` decides
    and runs one tick in the calling thread and returns its record. ``resume`` runs crashed
    runners' reservations on the turn workers; ``unsettled`` reads the unsettled turns after
    settling those this process abandoned. ``stop`` lets every decision and running turn finish.
    Its state is its own: which turns this process runs (the overlap rule's and the abandoned-turn
    check's), the ticks waiting for a sibling's decision, and the failure episodes of each
    automation's ticks.
    """

    def __init__(self, parts: TickParts, workers: int) -> None:
        self.store = parts.store
        self.clock = parts.clock
        self.executor = parts.executor
        self.tick_reader = parts.reader
        self.automations = parts.automations
        self.journal = parts.journal
        self.triggers = parts.triggers
        self.records = parts.records
        self.plans = parts.plans
        self._armed = parts.armed
        self._recovering = parts.recovering
        # Turns run here, never on APScheduler's threads, which only decide ticks.
        self.turns = TurnPool(workers, self._renew_waiting, self.executor.lease.total_seconds() / 3)
        # Ticks that may admit reserve here, so the deciders never wait for the store's write lock.
        self.admitters = Admitters(self._admit_released, DECIDERS)
        # SQLite has one writer: there they reserve in groups, one durable commit per group.
        self.groups = AdmitGroups(self._admit_group_released, self.store.first) if self.store.dialect == "sqlite" else None
        self.siblings = Siblings()  # one decision in flight per agent; its siblings are read again after it
        self.job = TickJob(self._tick)
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._inflight: set[str] = set()  # turn ids this process is running (or has queued) right now
        self._resuming: set[str] = set()
        self._tick_episodes: dict[str, Episode] = {}

    def stop(self) -> None:
        """After the timers stopped: the reservations passed on are decided, running turns settle
        (those never started stay journaled: recovery resumes them)."""
        if self.groups is not None:
            self.groups.stop()
        self.admitters.stop()
        for turn_id in self.turns.stop():
            log.warning("turn %s was admitted but not started before the host stopped: left journaled, recovery resumes it", turn_id)

    # -- ticks -----------------------------------------------------------------------------------
    def tick(self, automation_id: str) -> Tick:
        """One timer tick, its admitted turn run in this thread: skip on overlap, else a managed
        turn (which passes admission); the timer is re-planned after the decision and the turn."""
        first = self._tick_once(automation_id)
        decided = self._admit(first) if isinstance(first, Admitting) else first
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
        if isinstance(decided, Admitting):
            # Siblings wait for one decision of their agent only where a rule could make it deny them.
            if not decided.inputs.ruled or self.siblings.lead_or_wait(decided):
                self._dispatch(decided)
            return
        episode.ok()

    def _dispatch(self, decided: Admitting) -> None:
        self.turns.hold()  # released once it is decided: queued turns wait for the burst's decisions
        try:
            if self.groups is not None and groupable(decided) and self.groups.submit(decided):
                return
            queued = self.admitters.submit(decided)
        except BaseException:
            self.turns.release()
            raise
        if not queued:  # the admitters stopped (the host is stopping): decide it here
            self._admit_released(decided)

    def _admit_released(self, admitting: Admitting) -> None:
        try:
            self._admit_queued(admitting)
        finally:
            self.turns.release()

    def _admit_group_released(self, group: list[Admitting]) -> None:
        try:
            self._admit_group(group)
        finally:
            for _ in group:
                self.turns.release()

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

    def _denied_sibling(self, admitting: Admitting) -> bool:
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

    def _admit_queued(self, admitting: Admitting) -> None:
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
            if admitting.inputs.ruled:  # it led its agent's decisions (see ``_tick``)
                self._led(agent_of(admitting))

    def _tick_failed(self, episode: Episode, automation_id: str, exc: Exception, turn_id: str | None) -> None:
        episode.failed(exc)
        now = read_clock(self.clock)
        self.records.record(automation_id, now, now, "error", type(exc).__name__, turn_id)

    def _tick_once(self, automation_id: str) -> Tick | Admitting:
        """The first half of a tick's decision: a recorded tick (skipped, or denied from one plain
        read taken after the fire), or the claimed tick that may admit, for ``_admit``."""
        fired_at = read_clock(self.clock)
        inputs = self.tick_reader.read(automation_id)
        automation, wake = inputs.automation, inputs.wake
        armed = self._armed.get(automation_id)
        nominal = nominal_time(inputs.schedule, wake, fired_at, armed.trigger_at if armed is not None else None)
        self.records.merge({automation_id: nominal})  # a re-plan while the turn runs must not fire it again
        if automation.state != "active":
            return self.records.record(automation_id, nominal, fired_at, "skipped", automation.state)
        if automation.spec.overlap == "skip" and (self._is_running(automation_id) or (inputs.unsettled and self.unsettled(automation_id))):
            return self.records.record(automation_id, nominal, fired_at, "skipped", "overlap")
        turn_id = new_turn_id(automation_id)
        early = self._denied_early(automation, turn_id, nominal, inputs.pre)
        if early is not None:
            return self._denied(automation_id, nominal, fired_at, wake, early.reason, early.next_eligible_at, turn_id)
        self._claim(automation_id, turn_id)  # before this job ends: the overlap rule sees it from here on
        return Admitting(automation_id, nominal, fired_at, inputs, turn_id)

    def _denied_early(self, automation: Automation, turn_id: str, nominal: datetime, pre: TurnGate | None) -> Decision | None:
        """The floor's denial of a tick whose envelope precheck let it through (as ``begin`` would
        have), from one plain read: nothing ``begin`` checks or writes for an admission (the log
        directory, the lock) is needed for it. None: ``begin`` decides."""
        if not _read_early(automation, pre):
            return None
        spec = automation.spec
        return self.executor.admission.denial(
            goal=spec.goal_id, agent=spec.agent_id, automation=automation.automation_id, turn_id=turn_id, trigger_time=nominal
        )

    def _admit_group(self, group: list[Admitting]) -> None:
        """SQLite: reserve a group of ticks in one write transaction, one durable commit for all,
        each in its own savepoint (a refused or failed one leaves nothing); the admitted turns are
        handed over once the commit is durable. A failed commit admitted none of them."""
        if len(group) == 1:
            self._admit_queued(group[0])
            return
        try:
            self._reserve_group(group)
        finally:
            for key in dict.fromkeys(agent_of(a) for a in group if a.inputs.ruled):
                self._led(key)

    def _reserve_group(self, group: list[Admitting]) -> None:
        admitted: list[PendingTurn] = []
        left = list(group)  # not decided yet: none of them holds a reservation
        try:
            with self.store.unit() as unit:
                while left:
                    pending = self._admit_in_unit(unit, left[0])
                    left.pop(0)
                    if pending is not None:
                        admitted.append(pending)
        except Exception as exc:
            lost = [(p.automation_id, p.admitted.turn_id) for p in admitted] + [(a.automation_id, a.turn_id) for a in left]
            for automation_id, turn_id in lost:
                self._release_claim(automation_id, turn_id)
                self._tick_failed(self._tick_episode(automation_id), automation_id, exc, turn_id)
                self.plans.replan_after_tick(automation_id)  # an admitted one was re-planned as if it had started
            return
        for pending in admitted:
            self._hand_off(pending)

    def _admit_in_unit(self, unit: UnitOfWork, admitting: Admitting) -> PendingTurn | None:
        episode = self._tick_episode(admitting.automation_id)
        savepoint = unit.begin_nested()
        try:
            decided = self._admit(admitting, unit=unit)
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

    def _admit(self, admitting: Admitting, unit: UnitOfWork | None = None) -> Tick | PendingTurn:
        """The second half: ``begin`` (the envelope precheck and the serialized reservation)."""
        automation_id, nominal, fired_at, inputs, turn_id = admitting
        automation, wake = inputs.automation, inputs.wake
        begun: TurnOutcome | Admitted | None = None
        try:
            begun = self.executor.begin(
                automation,
                nominal=nominal,
                turn_id=turn_id,
                minted=True,
                overlap_checked=True,
                pre=inputs.pre,
                unit=unit,
                wake=wake,
                read_may_admit=_read_early(automation, inputs.pre),  # its plain read (``_denied_early``) found it may admit
            )
        finally:
            if not isinstance(begun, Admitted):
                self._release_claim(automation_id, turn_id)
        if isinstance(begun, Admitted):
            served = self._serve_triggers(automation_id, turn_id, unit)
            self._replan_from(automation_id, wake, begun.decision.reason, begun.decision.next_eligible_at, served=served)
            return PendingTurn(automation_id, nominal, fired_at, wake, begun)
        decision = begun.decision
        if decision is None:
            # The envelope refused before admission (latch, owner ask, allowlist, exhausted bound):
            # nothing ran, nothing moved, and the wake cadence is not a failure to back off from.
            return self.records.record(automation_id, nominal, fired_at, "denied", begun.verdict.stop_reason, begun.turn_id)
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
            wake = self.plans.backoff().advance(wake, read_clock(self.clock))
            self.automations.save_wake_state(wake)
        tick = self.records.record(automation_id, nominal, fired_at, "denied", reason.value, turn_id)
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
            self.records.record(
                pending.automation_id, pending.nominal, pending.fired_at, "error", type(exc).__name__, pending.admitted.turn_id
            )

    def _run_pending(self, pending: PendingTurn) -> Tick:
        try:
            outcome = self.executor.finish(pending.admitted)
        finally:
            self._release_claim(pending.automation_id, pending.admitted.turn_id)
        tick = self._after_turn(pending.automation_id, pending.nominal, pending.fired_at, pending.wake, outcome)
        self.plans.replan_after_tick(pending.automation_id, turn_ended=True)  # the wake state may have moved, a trigger come
        return tick

    def _after_turn(self, automation_id: str, nominal: datetime, fired_at: datetime, wake: WakeState, outcome: TurnOutcome) -> Tick:
        if outcome.verdict.status == "succeeded":
            if wake.backoff_step > 0:
                self.automations.save_wake_state(self.plans.backoff().clear(wake))
        else:
            step = wake.backoff_step
            now = read_clock(self.clock)
            self.automations.save_wake_state(
                self.plans.backoff().advance(wake, now) if step > 0 else self.plans.backoff().reset(automation_id, now)
            )
        return self.records.record(automation_id, nominal, fired_at, "admitted", outcome.verdict.status, outcome.turn_id)

    def _replan_from(
        self, automation_id: str, wake: WakeState, reason: Reason, next_eligible_at: datetime | None, *, served: bool = False
    ) -> None:
        """Re-plan after a decision from what it said (no read), or from a fresh read when it could
        not say (the state was unreadable). ``served``: the start served the pending triggers."""
        armed = self._armed.get(automation_id)
        if armed is None:
            return
        if reason not in PLANNED_BY_DECISION:
            self.plans.replan_after_tick(automation_id)
            return
        trigger = None if served else armed.snapshot.inputs.trigger
        self.plans.replan_after_tick(
            automation_id, replace(armed.snapshot.inputs, wake=wake, next_eligible_at=next_eligible_at, trigger=trigger)
        )

    def _serve_triggers(self, automation_id: str, turn_id: str, unit: UnitOfWork | None) -> bool:
        """A turn starts: it serves the triggers pending until now (in the reservation's transaction
        when it has one). Only when this host knows of one: a trigger it has not read yet stays
        pending and wakes the automation once more, still subject to floors. True: it served."""
        armed = self._armed.get(automation_id)
        if armed is None or armed.snapshot.inputs.trigger is None:
            return False
        self.triggers.serve(automation_id, turn_id, unit=unit)
        return True

    # -- recovery --------------------------------------------------------------------------------
    def resume(self, records: list[TurnRecord]) -> None:
        """Queue crashed runners' unconfirmed reservations on the turn workers (each once: not one
        being resumed, or admitted here and waiting for a worker)."""
        for record in records:
            with self._lock:
                if record.turn_id in self._resuming or record.turn_id in self._inflight:
                    continue
                self._resuming.add(record.turn_id)
            log.info("resuming turn %s of %s (its runner crashed before launching it)", record.turn_id, record.automation_id)
            if not self.turns.submit(record.turn_id, functools.partial(self._resume, record.automation_id, record.turn_id)):
                with self._lock:
                    self._resuming.discard(record.turn_id)

    def unsettled(self, automation_id: str | None) -> list[TurnRecord]:
        """Unsettled turns (of one automation, or all), after settling this process's abandoned ones.

        A turn journaled by this process that it is no longer running was abandoned by an executor
        that failed mid-way (the store went away before the settlement was written). Its runner is
        alive, so crash recovery never takes it; left alone it would be an overlap forever.
        """
        records = self.journal.unsettled(automation_id)
        mine = self.executor.owner
        with self._lock:
            abandoned = [r for r in records if r.owner_id == mine and r.turn_id not in self._inflight]
        for record in abandoned:
            # A compare-and-set: a turn settled since the read above (its executor finished in
            # between) is left as it is, charged nothing more, and not reported lost.
            if recovery.settle_lost(self.store, self.clock, record, mine, ran_on=record.runner_host).won:
                log.warning(
                    "turn %s of %s settled as unknown outcome: its settlement was lost to a store error",
                    record.turn_id,
                    record.automation_id,
                )
        return [r for r in records if r not in abandoned]

    def _renew_waiting(self, turn_ids: list[str]) -> None:
        """Keep the claims of admitted turns that wait for a turn worker (see ``TurnPool``)."""
        self.journal.renew_waiting(turn_ids, self.executor.owner, read_clock(self.clock) + self.executor.lease)

    def _resume(self, automation_id: str, turn_id: str) -> None:
        """A turn worker's job: resume a crashed runner's reservation by its turn id."""
        self._claim(automation_id, turn_id)
        try:
            automation = self.automations.get(automation_id)
            outcome = self.executor.run(automation, turn_id=turn_id)
            now = read_clock(self.clock)
            self.records.record(automation_id, now, now, "admitted", f"resumed_{outcome.verdict.status}", turn_id)
        except Exception as exc:
            self._recovering.failed(exc)
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


def _read_early(automation: Automation, pre: TurnGate | None) -> bool:
    """Whether a tick's floor is read before ``begin`` (``_denied_early``): its envelope
    precheck let it through, and floorgate launches it."""
    return pre is not None and pre.refusal is None and automation.spec.host is not None
