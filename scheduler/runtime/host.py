"""``floorgate run``: the host runtime. One APScheduler 3 timer per active automation.

The store is the truth: APScheduler keeps its jobs in memory, never shared between processes. A
sync loop picks up added, edited, paused and poked automations, changed floors and other hosts'
starts within ``poll`` seconds. Missed ticks coalesce (at most one catch-up tick, within the
catch-up window); every tick passes admission, so several hosts ticking one automation still give
one start per window. A tick is decided on APScheduler's threads (``_ticking``) and only an
admitted turn runs on a turn worker (``_turn_pool``). Ticks are recorded in batches. SIGINT/SIGTERM stop the timers, let running
turns settle, flush, and exit.

Faults: triggers are pure (``_plan.WakeTrigger``), so a store error can never reach APScheduler's
main loop. Every store read or write on every thread is caught, logged once per episode and
retried; a tick that fails is recorded as an error tick and its timer stays armed. A row that
cannot be decoded holds its automation in memory (``holds()``) and never the host. Crashed turns of
other runners are recovered every few polls, not only at start.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from types import MappingProxyType

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, EVENT_JOB_REMOVED, JobExecutionEvent, JobSubmissionEvent
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.base import JobLookupError
from apscheduler.schedulers.background import BackgroundScheduler

from floorgate.admission import (
    Admission,
    Automation,
    Automations,
    HostPolicies,
    HostPolicy,
    Journal,
    Store,
    StoreUnavailable,
    Tick,
    TimerBindings,
    Triggers,
)
from floorgate.admission.automations import idle_wake
from floorgate.admission.changes import ChangeFeed
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.intervals import format_interval
from floorgate.hosts import Schedule
from floorgate.hosts.apscheduler_timer import ApschedulerTimer

from . import recovery
from ._plan import (
    Armed,
    Decoded,
    Episode,
    PlanInputs,
    RuntimeConfig,
    Snapshot,
    WakeTrigger,
    decode,
    lane_of,
    misfire_grace,
    next_eligible_each,
    next_eligible_tolerant,
)
from ._heartbeat import Heartbeat
from ._sync import SyncMarks
from ._tick_inputs import TickReader
from ._tick_log import TickRecords
from ._ticking import DECIDERS, TickParts, Ticking
from .executor import TurnExecutor
from ..app.notify import NotifyService
from ..app.retention import HostPruner
from ..app.wake import BackoffPolicy, catch_up_window

__all__ = ["HostParts", "HostRuntime", "RuntimeConfig"]  # RuntimeConfig lives with the planning values

log = logging.getLogger("floorgate.run")


@dataclass(frozen=True)
class HostParts:
    """What a host runtime works with, built by the composition root (``Floorgate.host_runtime``):
    the store, the clock, this host's identity, the repositories and services over them, and the
    host's tick records."""

    store: Store
    clock: Clock
    host: str
    heartbeat: Heartbeat
    automations: Automations
    admission: Admission
    journal: Journal
    records: TickRecords
    timers: TimerBindings
    triggers: Triggers  # new work: pending until a turn starts for it
    executor: TurnExecutor
    host_policies: HostPolicies
    notifier: NotifyService
    changes: ChangeFeed
    pruner: HostPruner  # the retention pass of the host policy's ``retention``


class HostRuntime:
    """Keeps the timers of every active automation; its ``ticking`` decides their ticks and runs
    the turns, its ``records`` keep the ticks for the tick log."""

    def __init__(self, parts: HostParts, config: RuntimeConfig) -> None:
        """Build it with ``Floorgate.host_runtime(config)``: the composition root makes ``parts``."""
        store = parts.store
        self.store = store
        self.config = config
        self.clock = parts.clock
        self.host = parts.host
        self.heartbeat = parts.heartbeat
        self.pruner = parts.pruner
        self.automations = parts.automations
        self.admission = parts.admission
        self.journal = parts.journal
        self.records = parts.records
        self.timers = parts.timers
        self.executor = parts.executor
        self.triggers = parts.triggers
        self.tick_reader = TickReader(store, self.automations, self.executor.gate, lambda: self._decoded)
        self.host_policies = parts.host_policies
        self.notifier = parts.notifier
        self.policy = HostPolicy()  # replaced by the stored policy at every sync
        self.changes = parts.changes
        self._marks = SyncMarks(self.changes)
        self._decoded: dict[str, Decoded] = {}
        self._armed: dict[str, Armed] = {}
        self._holds: dict[str, str] = {}
        self._unpublished: set[str] = set()
        self._seq = itertools.count(1)
        self._lock = threading.Lock()
        self._arm_lock = threading.RLock()  # orders every change of a job against shutdown
        self._stop = threading.Event()
        self._closing = False  # set under _arm_lock: no tick worker touches the scheduler after it
        self._threads: list[threading.Thread] = []
        self._episodes = {
            name: Episode(what, log)
            for name, what in (
                ("sync", "sync with the store"),
                ("publish", "publishing timer readbacks"),
                ("flush", "recording ticks"),
                ("recover", "recovery of crashed turns"),
                ("replan", "re-planning a timer after its tick"),
                ("beat", "recording this host's heartbeat"),
                ("notify", "delivering events to webhooks"),
                ("prune", "pruning what is older than the retention"),
                ("prime", "judging every automation's envelope precheck"),
            )
        }
        self.ticking = Ticking(
            TickParts(
                store=store,
                clock=self.clock,
                executor=self.executor,
                reader=self.tick_reader,
                automations=self.automations,
                journal=self.journal,
                triggers=self.triggers,
                records=self.records,
                armed=MappingProxyType(self._armed),  # read only: the timers below write it
                plans=self,
                recovering=self._episodes["recover"],
            ),
            config.workers,
        )
        self.scheduler = BackgroundScheduler(
            timezone=timezone.utc,
            executors={"default": ThreadPoolExecutor(max_workers=DECIDERS)},
            job_defaults={
                # One run for any number of missed fire times; a missed time older than the
                # catch-up window is dropped. (APScheduler 3's default grace of 1 s drops runs.)
                "coalesce": True,
                "misfire_grace_time": misfire_grace(self.policy),
                "max_instances": 1,
            },
        )
        self.scheduler.add_listener(self._on_max_instances, EVENT_JOB_MAX_INSTANCES)
        self.scheduler.add_listener(self._on_missed, EVENT_JOB_MISSED)
        # APScheduler drops a job whose trigger has nothing more (or failed): the next sync looks.
        self.scheduler.add_listener(lambda event: self._marks.dropped(event.job_id), EVENT_JOB_REMOVED)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        """Recover, arm every timer and start the loops; a store that fails here is retried by them."""
        self._guarded("beat", self.heartbeat.beat)
        self._guarded("recover", self.recover)
        self._guarded("sync", self.sync)
        self.scheduler.start()
        loops = (
            (self._sync_loop, "floorgate-sync"),
            (self._flush_loop, "floorgate-ticks"),
            (self._recovery_loop, "floorgate-recovery"),
            (self._notify_loop, "floorgate-notify"),
        )
        for target, name in loops:
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        """Stop firing, let running turns settle, flush the tick log."""
        self._stop.set()
        with self._arm_lock:
            # APScheduler's shutdown holds its job-store lock while it waits for running jobs; a
            # tick re-arming its timer then would wait for that lock forever.
            self._closing = True
        if self.scheduler.running:
            self.scheduler.shutdown(wait=True)  # the ticks being decided finish (and hand their turns over)
        self.ticking.stop()  # so do the reservations they passed on, and the running turns
        for thread in self._threads:
            thread.join(timeout=10)
        self.executor.close()  # its turn broker: no turn runs here any more
        self._guarded("flush", self.flush)
        self._guarded("beat", self.heartbeat.stopped)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until stopped (True) or ``timeout`` seconds passed (False)."""
        return self._stop.wait(timeout)

    def tick(self, automation_id: str) -> Tick:
        """One tick decided and its admitted turn run in this thread (``Ticking.tick``)."""
        return self.ticking.tick(automation_id)

    def flush(self) -> None:
        """Write the buffered ticks in one transaction (``TickRecords.flush``)."""
        self.records.flush()

    def armed(self) -> dict[str, datetime | None]:
        """automation id -> the next fire its live timer will make (None: nothing more to fire)."""
        return {job.id: job.next_run_time for job in self.scheduler.get_jobs()}

    def holds(self) -> dict[str, str]:
        """automation id -> why this host keeps it un-armed (a row it cannot decode or plan)."""
        with self._lock:
            return dict(self._holds)

    def _guarded(self, name: str, step) -> bool:  # type: ignore[no-untyped-def]
        episode = self._episodes[name]
        try:
            step()
        except Exception as exc:
            episode.failed(exc)
            return False
        episode.ok()
        return True

    # -- timers ------------------------------------------------------------------------------
    def sync(self) -> None:
        """Make the timers match the store: arm, re-plan or remove the timers whose inputs changed
        (revision, wake state, floor, the lane's latest start). Reads only what changed since the
        last sync (``ChangeFeed``), so an idle poll costs a few rows; every ``FULL_SYNC_EVERY`` polls,
        after a removal, a floor or host policy change, or many changes, everything in bulk."""
        seq = next(self._seq)
        now = read_clock(self.clock)
        policy_changed = self.load_policy()
        with self._lock:
            held = set(self._holds)
        changes = self._marks.read(now)  # before every other read: what changes after it is read again next time
        ids = None if policy_changed else self._marks.changed(changes, self._decoded, held)
        self._reconcile(ids, self.automations.revisions() if ids is None else changes.revisions, seq, now, policy_changed)
        self._marks.synced(now, changes, full=ids is None)

    def _reconcile(self, only: set[str] | None, revisions: dict[str, int], seq: int, now: datetime, policy_changed: bool) -> None:
        """Re-plan the automations ``only`` names (None: every one; then ``revisions`` is every
        automation's, and the timers of removed ones go)."""
        if only is None:
            for automation_id in [aid for aid in self._decoded if aid not in revisions]:
                self._forget(automation_id)
        candidates = revisions if only is None else only
        stale = [aid for aid in candidates if aid in revisions and ((d := self._decoded.get(aid)) is None or d.revision != revisions[aid])]
        if stale:
            found, bad = self.automations.scan(None if len(stale) > 200 else stale)
            for automation_id in stale:
                if automation_id in found:
                    self._remember(automation_id, decode(found[automation_id]))
                elif automation_id in bad:
                    self._remember(automation_id, Decoded(revisions[automation_id], None, None, bad[automation_id]))
        ids = list(self._decoded) if only is None else [aid for aid in only if aid in self._decoded]
        wakes, bad_wakes = self.automations.wake_scan(None if only is None else ids)
        pending = self.triggers.pending_scan(None if only is None else ids)
        timed = {}
        for automation_id in ids:
            d = self._decoded[automation_id]
            a = d.automation
            if a is not None and d.problem is None and a.state == "active" and a.spec.timer == "apscheduler":
                timed[automation_id] = a
        lanes = [lane_of(a) for a in timed.values()]
        eligible, bad_lanes = next_eligible_tolerant(self.admission, lanes) if only is None else next_eligible_each(self.admission, lanes)
        if only is None:
            live = {job.id for job in self.scheduler.get_jobs()}
        else:
            live = {aid for aid in ids if self.scheduler.get_job(aid) is not None}
        plans: list[tuple[Decoded, PlanInputs]] = []
        for automation_id in ids:
            decoded = self._decoded[automation_id]
            if decoded.problem is not None:
                self._hold(automation_id, decoded.problem)
                continue
            automation = timed.get(automation_id)
            if automation is None:  # paused, held by the owner, or fired by another timer host
                self._unarm(automation_id)
                continue
            problem = bad_wakes.get(automation_id) or self.records.problem(automation_id) or bad_lanes.get(lane_of(automation))
            if problem is not None:
                self._hold(automation_id, problem)
                continue
            wake = wakes.get(automation_id)
            inputs = PlanInputs(
                revision=decoded.revision,
                wake=wake if wake is not None else idle_wake(automation_id),
                next_eligible_at=eligible.get(lane_of(automation)),
                trigger=pending.get(automation_id),
            )
            armed = self._armed.get(automation_id)
            if armed is not None and armed.snapshot.inputs == inputs and not policy_changed:
                if armed.trigger is None or automation_id in live:
                    continue  # unchanged
                if armed.trigger.failure is not None:
                    self._hold(
                        automation_id,
                        f"the next fire of automation {automation_id!r} cannot be computed: {armed.trigger.failure}",
                        keep=True,
                    )
                else:  # APScheduler dropped the job: the schedule has ended
                    self._armed[automation_id] = replace(armed, trigger=None)
                continue
            plans.append((decoded, inputs))
        if not plans:
            return
        # One read, and only when something is (re)armed: of those automations' ticks alone.
        self.records.refresh(None if only is None else [d.automation.automation_id for d, _ in plans])  # type: ignore[union-attr]
        for decoded, inputs in plans:
            automation_id = decoded.automation.automation_id  # type: ignore[union-attr]
            bad_ticks = self.records.problem(automation_id)
            if bad_ticks is not None:
                self._hold(automation_id, bad_ticks)
                continue
            since = decoded.automation.updated_at  # type: ignore[union-attr]
            window = catch_up_window(decoded.automation.spec, self.policy)  # type: ignore[union-attr]
            when_denied = decoded.automation.spec.when_denied  # type: ignore[union-attr]
            debounce = decoded.automation.spec.debounce  # type: ignore[union-attr]
            snapshot = Snapshot(
                automation_id, decoded.schedule, inputs, self.records.last_ticked(automation_id), window, since, when_denied, debounce
            )  # type: ignore[arg-type]
            self._arm(decoded.automation, snapshot, seq, previous=None, now=now)  # type: ignore[arg-type]

    def _remember(self, automation_id: str, decoded: Decoded) -> None:
        self._marks.moved(automation_id, self._decoded.get(automation_id), decoded)
        self._decoded[automation_id] = decoded

    def _arm(
        self, automation: Automation, snapshot: Snapshot, seq: int, *, previous: datetime | None, now: datetime, replan: bool = False
    ) -> None:
        """Arm (or re-arm) the timer with a new trigger; its first fire is computed here, off
        APScheduler's locks. A read older than what is armed (``seq``) never overwrites it."""
        automation_id = snapshot.automation_id
        trigger = WakeTrigger(snapshot)
        first = trigger.get_next_fire_time(previous, now)
        with self._arm_lock:
            current = self._armed.get(automation_id)
            if self._closing or (current is not None and current.seq > seq):
                return
            if replan and (current is None or current.trigger is None or automation_id in self._holds):
                return  # unarmed or held meanwhile: only sync arms it again
            if trigger.failure is not None:
                self._armed[automation_id] = Armed(snapshot, trigger, seq)
                self._hold(automation_id, f"the next fire of automation {automation_id!r} cannot be computed: {trigger.failure}", keep=True)
                return
            if first is None:
                self._remove_job(automation_id)
                self._armed[automation_id] = Armed(snapshot, None, seq)
                self._release(automation_id)
                return
            instances = 1 if automation.spec.overlap == "skip" else self.config.workers
            # Before the scheduler starts, APScheduler looks a job up in a list (arming 10,000 timers
            # at host start would be quadratic): a timer never armed has no job to look up.
            known = current is not None and current.trigger is not None
            job = self.scheduler.get_job(automation_id) if self.scheduler.running or known else None
            if job is None:
                self.scheduler.add_job(
                    self.ticking.job,
                    trigger=trigger,
                    args=(automation_id,),
                    id=automation_id,
                    name=automation_id,
                    max_instances=instances,
                    next_run_time=first,
                    misfire_grace_time=misfire_grace(self.policy),
                    coalesce=True,  # the job default, given here: APScheduler fills in no default then
                )
            else:
                self.scheduler.modify_job(
                    automation_id,
                    trigger=trigger,
                    next_run_time=first,
                    max_instances=instances,
                    misfire_grace_time=misfire_grace(self.policy),
                )
            self._armed[automation_id] = Armed(snapshot, trigger, seq)
            self._release(automation_id)
        self._unpublished.add(automation_id)

    def replan_after_tick(self, automation_id: str, inputs: PlanInputs | None = None, *, turn_ended: bool = False) -> None:
        """The trigger planned this job's next fire before the tick moved the floor or the backoff;
        re-arm when this automation's inputs changed: ``inputs`` as the tick's decision gave them,
        else re-read now. ``turn_ended``: a trigger pending now (it came while the turn ran, and a
        fire for it was skipped as overlap) wakes it again, subject to floors."""
        armed = self._armed.get(automation_id)
        decoded = self._decoded.get(automation_id)
        if armed is None or armed.trigger is None or decoded is None or decoded.automation is None:
            return
        seq = next(self._seq)
        if inputs is None:
            try:
                inputs = self._read_inputs(decoded.automation, armed.snapshot.inputs.revision)
            except Exception as exc:
                self._episodes["replan"].failed(exc)
                return
            self._episodes["replan"].ok()
        woken = turn_ended and inputs.trigger is not None
        if inputs == armed.snapshot.inputs and not woken:
            return
        now = read_clock(self.clock)
        snapshot = replace(armed.snapshot, inputs=inputs, last_ticked=self.records.last_ticked(automation_id))
        # ``previous`` is now: every occurrence up to here was fired (or skipped as overlap) already;
        # a pending trigger is not (a start would have served it): armed as new.
        self._arm(decoded.automation, snapshot, seq, previous=None if woken else now, now=now, replan=True)

    def _read_inputs(self, automation: Automation, revision: int) -> PlanInputs:
        spec = automation.spec
        wake = self.automations.wake_state(automation.automation_id)
        eligibility = self.admission.eligibility(spec.goal_id, spec.agent_id, automation.automation_id)
        if eligibility.status == "unavailable":
            raise StoreUnavailable(eligibility.detail)
        trigger = self.triggers.pending(automation.automation_id)
        return PlanInputs(revision=revision, wake=wake, next_eligible_at=eligibility.next_eligible_at, trigger=trigger)

    def plan(self, automation: Automation, schedule: Schedule, previous: datetime | None, now: datetime) -> datetime | None:
        """Next fire time from this automation's inputs read now (readback and tests; the
        trigger itself never reads)."""
        self.records.load(automation.automation_id)
        inputs = self._read_inputs(automation, automation.revision)
        snapshot = Snapshot(
            automation.automation_id,
            schedule,
            inputs,
            self.records.last_ticked(automation.automation_id),
            catch_up_window(automation.spec, self.policy),
            automation.updated_at,
            automation.spec.when_denied,
            automation.spec.debounce,
        )
        return snapshot.plan(previous, now)

    def _hold(self, automation_id: str, reason: str, *, keep: bool = False) -> None:
        """Keep the automation un-armed with ``reason`` (logged once per reason)."""
        with self._lock:
            changed = self._holds.get(automation_id) != reason
            self._holds[automation_id] = reason
        if changed:
            log.error("automation %s is held by this host: %s", automation_id, reason)
        with self._arm_lock:
            self._remove_job(automation_id)
            if not keep:
                self._armed.pop(automation_id, None)  # re-armed from scratch once the row reads again

    def _release(self, automation_id: str) -> None:
        with self._lock:
            reason = self._holds.pop(automation_id, None)
        if reason is not None:
            log.info("automation %s is armed again (it was held: %s)", automation_id, reason)

    def _unarm(self, automation_id: str) -> None:
        self._release(automation_id)
        with self._arm_lock:
            self._armed.pop(automation_id, None)
            self._remove_job(automation_id)

    def _forget(self, automation_id: str) -> None:
        self._unarm(automation_id)
        self._marks.moved(automation_id, self._decoded.pop(automation_id, None), None)

    # -- recovery ----------------------------------------------------------------------------
    def recover(self) -> None:
        """Settle crashed turns of dead runners and resume their unconfirmed reservations."""
        recovered = recovery.recover(self.store, self.clock)
        self.ticking.unsettled(None)
        for record in recovered.settled:
            why = record.verdict.stop_reason if record.verdict is not None else "settled"
            log.warning("turn %s of %s recovered and settled: %s", record.turn_id, record.automation_id, why)
        self.ticking.resume(recovered.resumable)

    def _on_max_instances(self, event: JobSubmissionEvent) -> None:
        when = event.scheduled_run_times[-1] if event.scheduled_run_times else read_clock(self.clock)
        self.records.record(event.job_id, when, read_clock(self.clock), "skipped", "overlap")

    def _on_missed(self, event: JobExecutionEvent) -> None:
        # APScheduler drops a fire it could not start within the staleness limit (misfire grace,
        # ``STALE_AFTER``): the tick log says so instead of leaving a silent gap.
        self.records.record(event.job_id, event.scheduled_run_time, read_clock(self.clock), "skipped", "missed")

    # -- helpers -----------------------------------------------------------------------------
    def load_policy(self) -> bool:
        """Read the deployment's host policy from the store; True when it changed (and logged)."""
        stored = self.host_policies.get()
        changed, self.policy = stored.policy != self.policy, stored.policy
        if changed:
            p = stored.policy
            log.info(
                "host policy r%d: catch-up %s, backoff %s..%s; timers re-planned",
                stored.revision,
                format_interval(p.catch_up),
                format_interval(p.backoff_initial),
                format_interval(p.backoff_cap),
            )
        return changed

    def backoff(self) -> BackoffPolicy:
        """The host policy's backoff (``TimerPlans``)."""
        return BackoffPolicy(self.policy.backoff_initial, self.policy.backoff_cap)

    def _remove_job(self, automation_id: str) -> None:
        if self._closing:
            return  # see stop(): the scheduler is being shut down
        with contextlib.suppress(JobLookupError):  # already gone
            self.scheduler.remove_job(automation_id)

    def publish(self) -> None:
        """Publish readbacks of the live jobs: newly armed ones, and those someone asked about."""
        wanted = set(self._unpublished) | self.timers.read_requests("apscheduler")
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
        self._guarded("prime", self.tick_reader.prime)
        while not self._stop.wait(self.config.poll.total_seconds()):
            self._guarded("beat", self.heartbeat.beat)
            if self._guarded("sync", self.sync):
                self._guarded("publish", self.publish)

    def _flush_loop(self) -> None:
        while not self._stop.wait(self.config.flush_every.total_seconds()):
            self._guarded("flush", self.flush)

    def _notify_loop(self) -> None:
        # Its own thread: a slow receiver delays only other deliveries, never ticks or admission.
        while not self._stop.wait(self.config.poll.total_seconds()):
            self._guarded("notify", self.notifier.deliver)

    def _recovery_loop(self) -> None:
        interval = self.config.poll.total_seconds() * max(1, self.config.recover_every)
        while not self._stop.wait(interval):
            self._guarded("recover", self.recover)
            self._guarded("prune", lambda: self.pruner.step(self.policy.retention))  # its own short transactions
