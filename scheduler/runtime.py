"""``floorgate run``: the host runtime. One APScheduler 3 timer per active automation.

The store is the truth: APScheduler keeps its jobs in memory, never shared between processes. A
sync loop picks up added, edited, paused and poked automations within ``poll`` seconds. Missed
ticks coalesce (at most one catch-up tick, within the catch-up window); every tick passes
admission, so several hosts ticking one automation still give one start per window. Ticks are
recorded in batches. SIGINT/SIGTERM stop the timers, let running turns settle, flush, and exit.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.base import BaseTrigger
from admission import Admission, Automation, Automations, Journal, Store, Tick, TickLog, TimerBindings, WakeState
from admission.clock import Clock, SystemClock, read_clock
from hosts import Schedule
from hosts.apscheduler_timer import ApschedulerTimer
from hosts.schedule import parse_canonical

from .executor import TurnExecutor, host_identity
from .recovery import recover
from .wake import BackoffPolicy, next_wake, nominal_time

log = logging.getLogger("floorgate.run")


@dataclass(frozen=True)
class RuntimeConfig:
    """How the host runs. ``catch_up`` bounds how old a missed tick may be and still fire once."""

    state_dir: Path
    poll: timedelta = timedelta(seconds=2)
    catch_up: timedelta = timedelta(hours=1)
    workers: int = 8
    flush_every: timedelta = timedelta(seconds=1)
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)


@dataclass(frozen=True)
class ArmHint:
    """Facts read in bulk by ``sync`` for arming a timer, so arming 10,000 timers is not 30,000 reads."""

    wake: WakeState
    last_ticked: datetime | None
    next_eligible_at: datetime | None


class WakeTrigger(BaseTrigger):
    """An APScheduler trigger for one automation: its schedule, its backoff, never before the floor."""

    def __init__(self, runtime: "HostRuntime", automation: Automation, schedule: Schedule, hint: ArmHint | None = None) -> None:
        self.runtime = runtime
        self.automation = automation
        self.schedule = schedule
        self._hint = hint

    def get_next_fire_time(self, previous_fire_time, now):  # type: ignore[no-untyped-def]
        hint, self._hint = self._hint, None  # bulk facts are fresh only for the first arming
        return self.runtime.plan(self.automation, self.schedule, previous_fire_time, now, hint)

    def __str__(self) -> str:
        return f"floorgate[{self.schedule.canonical()!r}]"


class HostRuntime:
    """Keeps the timers of every active automation and runs their ticks."""

    def __init__(self, store: Store, config: RuntimeConfig, *, clock: Clock | None = None) -> None:
        self.store = store
        self.config = config
        self.clock = clock if clock is not None else SystemClock()
        self.host = host_identity()
        self.automations = Automations(store, self.clock)
        self.admission = Admission(store, self.clock)
        self.journal = Journal(store, self.clock)
        self.ticklog = TickLog(store)
        self.timers = TimerBindings(store)
        self.executor = TurnExecutor(store, state_dir=config.state_dir, clock=self.clock, host=self.host)
        self._known: dict[str, tuple[int, WakeState]] = {}
        self._ticked: dict[str, datetime] = {}
        self._ticked_complete = False
        self._unpublished: set[str] = set()
        self._running: dict[str, int] = {}
        self._buffer: list[Tick] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.scheduler = BackgroundScheduler(
            timezone=timezone.utc,
            executors={"default": ThreadPoolExecutor(max_workers=config.workers)},
            job_defaults={
                # One run for any number of missed fire times; a missed time older than the
                # catch-up window is dropped. (APScheduler 3's default grace of 1 s drops runs.)
                "coalesce": True,
                "misfire_grace_time": max(1, int(config.catch_up.total_seconds())),
                "max_instances": 1,
            },
        )
        self.scheduler.add_listener(self._on_max_instances, EVENT_JOB_MAX_INSTANCES)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        recovered = recover(self.store, self.clock)
        for record in recovered.settled:
            log.warning("turn %s of %s settled as unknown outcome after a host crash", record.turn_id, record.automation_id)
        self.sync()
        self.scheduler.start()
        for record in recovered.resumable:
            self.scheduler.add_job(self._resume, args=(record.automation_id, record.turn_id), id=f"resume:{record.turn_id}")
        for target, name in ((self._sync_loop, "floorgate-sync"), (self._flush_loop, "floorgate-ticks")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop firing, let running turns settle, flush the tick log."""
        self._stop.set()
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)
        for thread in self._threads:
            thread.join(timeout=10)
        self.flush()

    def wait(self, timeout: float | None = None) -> bool:
        return self._stop.wait(timeout)

    # -- timers ------------------------------------------------------------------------------
    def sync(self) -> None:
        """Make the timers match the store: add, re-arm or remove jobs that changed."""
        revisions = self.automations.revisions()
        wakes = self.automations.wake_states()
        for automation_id in list(self._known):
            if automation_id not in revisions:
                self._known.pop(automation_id)
                self._remove_job(automation_id)
        changed = {}
        for automation_id, revision in revisions.items():
            state = (revision, wakes.get(automation_id, WakeState(automation_id=automation_id)))
            if self._known.get(automation_id) != state:
                changed[automation_id] = state
        if not changed:
            return
        self._ticked.update(self.ticklog.last_nominal())
        self._ticked_complete = True  # every automation without an entry has never ticked
        loaded = {a.automation_id: a for a in self.automations.list()} if len(changed) > 1 else {
            aid: self.automations.get(aid) for aid in changed
        }
        lanes = [(a.spec.goal_id, a.spec.agent_id, a.automation_id) for aid, a in loaded.items() if aid in changed]
        eligible = self.admission.next_eligible_many(lanes)
        for automation_id, state in changed.items():
            self._known[automation_id] = state
            automation = loaded.get(automation_id)
            if automation is None:
                continue
            if automation.state != "active" or automation.spec.timer != "apscheduler":
                self._remove_job(automation_id)
                continue
            try:
                schedule = parse_canonical(automation.spec.schedule)
            except ValueError as exc:
                log.error("automation %s has an unreadable schedule: %s", automation_id, exc)
                self._remove_job(automation_id)
                continue
            spec = automation.spec
            hint = ArmHint(
                wake=state[1],
                last_ticked=self._last_ticked(automation_id),
                next_eligible_at=eligible.get((spec.goal_id, spec.agent_id, automation_id)),
            )
            trigger = WakeTrigger(self, automation, schedule, hint)
            instances = 1 if automation.spec.overlap == "skip" else self.config.workers
            self.scheduler.add_job(
                self._tick,
                trigger=trigger,
                args=(automation_id,),
                id=automation_id,
                name=automation_id,
                replace_existing=True,
                max_instances=instances,
            )
            self._unpublished.add(automation_id)

    def plan(
        self, automation: Automation, schedule: Schedule, previous: datetime | None, now: datetime, hint: ArmHint | None = None
    ) -> datetime | None:
        """Next fire time for the trigger (reads the floor from admission, or takes it from ``hint``)."""
        if hint is None:
            wake = self.automations.wake_state(automation.automation_id)
            spec = automation.spec
            eligibility = self.admission.eligibility(spec.goal_id, spec.agent_id, automation.automation_id)
            next_eligible = eligibility.next_eligible_at if eligibility.status != "unavailable" else None
            last_ticked = self._last_ticked(automation.automation_id) if previous is None else None
        else:
            wake, next_eligible, last_ticked = hint.wake, hint.next_eligible_at, hint.last_ticked
        return next_wake(
            schedule,
            previous=previous,
            now=now,
            wake=wake,
            next_eligible_at=next_eligible,
            last_ticked=last_ticked,
            catch_up=self.config.catch_up,
        )

    # -- ticks -------------------------------------------------------------------------------
    def tick(self, automation_id: str) -> Tick:
        """One timer tick: skip on overlap, else a managed turn (which passes admission)."""
        fired_at = read_clock(self.clock)
        automation = self.automations.get(automation_id)
        schedule = parse_canonical(automation.spec.schedule)
        wake = self.automations.wake_state(automation_id)
        nominal = nominal_time(schedule, wake, fired_at)
        if automation.state != "active":
            return self._record(automation_id, nominal, fired_at, "skipped", automation.state)
        if automation.spec.overlap == "skip" and (self._is_running(automation_id) or self.journal.unsettled(automation_id)):
            return self._record(automation_id, nominal, fired_at, "skipped", "overlap")
        with self._lock:
            self._running[automation_id] = self._running.get(automation_id, 0) + 1
        try:
            outcome = self.executor.run(automation, nominal=nominal)
        finally:
            with self._lock:
                self._running[automation_id] -= 1
        decision = outcome.decision
        if decision is None:
            # The envelope refused before admission (latch, owner ask, allowlist, exhausted bound):
            # nothing ran, and the wake cadence is not a failure to back off from.
            return self._record(automation_id, nominal, fired_at, "denied", outcome.verdict.stop_reason[:32], outcome.turn_id)
        if not decision.admitted:
            if wake.backoff_step > 0:
                self._save_wake(self.config.backoff.advance(wake, read_clock(self.clock)))
            return self._record(automation_id, nominal, fired_at, "denied", decision.reason.value, outcome.turn_id)
        self._rearm(automation, schedule, fired_at)
        if outcome.verdict.status == "succeeded":
            if wake.backoff_step > 0:
                self._save_wake(self.config.backoff.clear(wake))
        else:
            step = wake.backoff_step
            now = read_clock(self.clock)
            self._save_wake(self.config.backoff.advance(wake, now) if step > 0 else self.config.backoff.reset(automation_id, now))
        return self._record(automation_id, nominal, fired_at, "admitted", outcome.verdict.status, outcome.turn_id)

    def _rearm(self, automation: Automation, schedule: Schedule, fired_at: datetime) -> None:
        """APScheduler computed this job's next fire before the turn's start moved the floor;
        recompute it now so the next wake is never before next_eligible_at."""
        job = self.scheduler.get_job(automation.automation_id) if self.scheduler.running else None
        if job is None:
            return
        nxt = self.plan(automation, schedule, fired_at, read_clock(self.clock))
        if nxt is not None and (job.next_run_time is None or nxt > job.next_run_time):
            self.scheduler.modify_job(automation.automation_id, next_run_time=nxt)

    def _tick(self, automation_id: str) -> None:
        try:
            self.tick(automation_id)
        except Exception as exc:  # a tick must never kill the timer; the error is recorded
            log.exception("tick of %s failed", automation_id)
            now = read_clock(self.clock)
            self._record(automation_id, now, now, "error", type(exc).__name__)

    def _resume(self, automation_id: str, turn_id: str) -> None:
        automation = self.automations.get(automation_id)
        outcome = self.executor.run(automation, turn_id=turn_id)
        now = read_clock(self.clock)
        self._record(automation_id, now, now, "admitted", f"resumed_{outcome.verdict.status}", turn_id)

    def _on_max_instances(self, event: JobSubmissionEvent) -> None:
        when = event.scheduled_run_times[-1] if event.scheduled_run_times else read_clock(self.clock)
        self._record(event.job_id, when, read_clock(self.clock), "skipped", "overlap")

    def _is_running(self, automation_id: str) -> bool:
        with self._lock:
            return self._running.get(automation_id, 0) > 0

    def _record(self, automation_id: str, nominal: datetime, actual: datetime, decision: str, reason: str, turn_id: str | None = None) -> Tick:
        tick = Tick(
            automation_id=automation_id,
            nominal_at=nominal,
            actual_at=actual,
            decision=decision,  # type: ignore[arg-type]
            reason=reason,
            turn_id=turn_id,
            host=self.host,
        )
        with self._lock:
            self._buffer.append(tick)
        log.info("tick %s (due %s): %s %s %s", automation_id, nominal.isoformat(), decision, reason, turn_id or "")
        return tick

    def flush(self) -> None:
        with self._lock:
            batch, self._buffer = self._buffer, []
        if batch:
            try:
                self.ticklog.append(batch)
                for tick in batch:
                    known = self._ticked.get(tick.automation_id)
                    if known is None or tick.nominal_at > known:
                        self._ticked[tick.automation_id] = tick.nominal_at
            except Exception:
                log.exception("could not record %d ticks; keeping them for the next flush", len(batch))
                with self._lock:
                    self._buffer[:0] = batch

    # -- helpers -----------------------------------------------------------------------------
    def _save_wake(self, state: WakeState) -> None:
        self.automations.save_wake_state(state)

    def _last_ticked(self, automation_id: str) -> datetime | None:
        if automation_id not in self._ticked and not self._ticked_complete:
            self._ticked.update(self.ticklog.last_nominal(automation_id))
        with self._lock:
            pending = [t.nominal_at for t in self._buffer if t.automation_id == automation_id]
            stored = self._ticked.get(automation_id)
        candidates = ([stored] if stored is not None else []) + pending
        return max(candidates) if candidates else None

    def _remove_job(self, automation_id: str) -> None:
        if self.scheduler.get_job(automation_id) is not None:
            self.scheduler.remove_job(automation_id)

    def publish(self) -> None:
        """Publish readbacks of the live jobs: newly armed ones, and those someone asked about."""
        bindings = self.timers.all()
        wanted = set(self._unpublished)
        for automation_id, binding in bindings.items():
            if binding.timer == "apscheduler" and binding.read_requested_at is not None and (
                binding.observed_at is None or binding.read_requested_at > binding.observed_at
            ):
                wanted.add(automation_id)
        if not wanted:
            return
        live = ApschedulerTimer(self.scheduler)
        now = read_clock(self.clock)
        rows = []
        for automation_id in sorted(wanted):
            job = self.scheduler.get_job(automation_id)
            desired = job.trigger.schedule.canonical() if job is not None and isinstance(job.trigger, WakeTrigger) else None
            observation = live.read(automation_id, now)
            rows.append((automation_id, "apscheduler", desired, observation.text if observation.state == "present" else None, now))
        self.timers.publish_own(rows)
        self._unpublished -= wanted

    def _sync_loop(self) -> None:
        while not self._stop.wait(self.config.poll.total_seconds()):
            try:
                self.sync()
                self.publish()
            except Exception:
                log.exception("sync with the store failed; timers keep their last state")

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.config.flush_every.total_seconds()):
            self.flush()
