"""Managed turns: one admitted unit is one host invocation, owned by one runner.

begin: reserve, journal the attempt with this runner's claim, open the mission, count the turn and
link the attempt to it (one commit) -> fork held (own process group; not exec'd yet) -> confirm
with the pid (journal and start in one commit: the point of no return) -> exec the program ->
wait under the timeout in slices,
renewing the claim's lease (kill the group at the deadline) -> settle the verdict and the mission
(one commit). Every step after the claim is conditional on still owning it. ``begin`` is the
decision (up to the committed reservation) and ``finish`` the rest, so a host decides a tick on one
thread and runs the admitted turn on another; ``run`` is both.

A settled turn id replays its settlement without admission and without launching; a turn id
another live runner owns is refused without writing anything; an orphaned one is taken over in
one compare-and-set. A retry is a new turn that passes admission again, so a failing host never
gets a free retry storm. Once a reservation is made, every failure settles the turn.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar, TypedDict, Unpack

from floorgate.admission import (
    Admission,
    Automation,
    Automations,
    Decision,
    FailureStreaks,
    InvalidInput,
    Journal,
    Mission,
    Overlap,
    Store,
    StoreUnavailable,
    TurnRecord,
    Verdict,
    WakeState,
)
from floorgate.admission.clock import Clock, SystemClock, iso, read_clock
from floorgate.admission.journal import ClaimLost, JournalEntry, TurnOwned
from floorgate.admission.scope import check_id
from floorgate.admission.unit import UnitOfWork
from floorgate.admission.usage import settle_turn, settle_unread

from ..agents._safe_files import UnsafePath, private_dir
from ..app.envelope_gate import EnvelopeGate, TurnGate, envelope_mode
from ..app.meters import metered, read_usage
from ..app.mission_hold import hold_for_stuck_mission
from ..app.start_refusals import failing_refusal, state_refusal
from ._host_env import TIMED_OUT, denied_verdict, exit_verdict, host_env, settled_unknown, spawn_failed
from ._process import boot_id, kill_group, open_log, pump, spawn_held, start_ticks
from .recovery import DEFAULT_LEASE, host_identity, new_owner_id, orphaned, settle_lost
from .turn_broker import RunnerBroker
from .turn_outcome import Admitted, Attempt, LogUnwritable, TurnOutcome, failure_verdict, new_turn_id
from .turn_wire import TurnCredential

__all__ = ["DEFAULT_LEASE", "Admitted", "LogUnwritable", "TurnExecutor", "TurnOutcome", "host_identity", "new_turn_id"]

DEFAULT_LOG_CAP = 1_000_000
# Tests only: "<step>:<path>" makes a runner stop at <step>, write its pid to <path>, and wait
# until <path>.go exists (so a test can SIGKILL it there, or change the world and let it go on).
PAUSE_ENV = "FLOORGATE_TEST_PAUSE"
log = logging.getLogger("floorgate.turns")
Begin = Callable[[UnitOfWork], None]
_T = TypeVar("_T")


class TurnRequest(TypedDict, total=False):
    """What a caller of ``TurnExecutor.run`` may say about the turn (``begin``'s parameters of the
    same names say what each means and its default)."""

    turn_id: str | None
    manual_reason: str | None
    nominal: datetime | None
    wait_eligible: timedelta
    overlap_checked: bool


class TurnExecutor:
    """Runs managed turns of command-host automations against one store.

    ``lease``: how long a claim holds without renewal; a running turn renews it every third of it.
    """

    def __init__(
        self,
        store: Store,
        clock: Clock | None = None,
        *,
        state_dir: Path,
        host: str | None = None,
        log_cap: int = DEFAULT_LOG_CAP,
        mode: str | None = None,
        sleep: Callable[[float], object] = time.sleep,
        lease: timedelta = DEFAULT_LEASE,
    ) -> None:
        if lease <= timedelta(0):
            raise InvalidInput("lease", f"{lease} is not positive")
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.admission = Admission(store, self.clock)
        self.journal = Journal(store, self.clock)
        self.streaks = FailureStreaks(store, self.clock)
        self.automations = Automations(store, self.clock)
        self.state_dir = Path(state_dir)
        self.host = host if host is not None else host_identity()
        self.owner = new_owner_id()
        self.log_cap = log_cap
        self.gate = EnvelopeGate(store, clock=self.clock, mode=envelope_mode(mode))
        self.sleep = sleep
        self.lease = lease
        self.broker = RunnerBroker(store, self.clock, self.gate.mode)  # the launched turns' hooks reach the store through it

    def close(self) -> None:
        """Stop the turn broker (the hooks of any turn still running here then block)."""
        self.broker.close()

    def run(self, automation: Automation, **request: Unpack[TurnRequest]) -> TurnOutcome:
        """Run one managed turn of ``automation``; see the module docstring for the phases.

        ``overlap_checked``: the caller (a host's tick) has already applied the overlap rule;
        otherwise a turn of an ``overlap skip`` automation that another live runner is running
        is not started (exit 3, ``overlap``).

        ``wait_eligible``: when the floor denies with a next eligible time at most this far away
        (a timer that fires a few hundred milliseconds before a floor equal to its period), wait
        for it and ask again instead of losing the whole period. The floor is never shortened.
        """
        begun = self.begin(automation, **request)
        return begun if isinstance(begun, TurnOutcome) else self.finish(begun)

    def begin(
        self,
        automation: Automation,
        *,
        turn_id: str | None = None,
        manual_reason: str | None = None,
        nominal: datetime | None = None,
        wait_eligible: timedelta = timedelta(0),
        overlap_checked: bool = False,
        minted: bool = False,
        pre: TurnGate | None = None,
        unit: UnitOfWork | None = None,
        wake: WakeState | None = None,
        read_may_admit: bool = False,
    ) -> TurnOutcome | Admitted:
        """The decision half of ``run``: every refusal and denial as a finished ``TurnOutcome``,
        or the admitted reservation (committed with this runner's claim) for ``finish``.

        ``minted``: ``turn_id`` was just made by ``new_turn_id`` (nothing to replay or take over,
        so it is not looked up). ``pre``: the envelope's precheck, already judged by the caller
        from facts it read (the stuck-mission hold included); else both are read here. ``unit``:
        reserve in the caller's open unit of work (the admitted turn is durable once it commits).
        ``wake``: the automation's wake state as the caller read it (else read here for an
        automatic start: its failure streak's wait refuses a start before it).
        ``read_may_admit``: the caller's plain read of the floor (``Admission.denial``) found just
        now that it may admit (``Admission.reserve`` does not repeat it).
        """
        if automation.spec.host is None:
            raise InvalidInput(
                "automation", f"{automation.automation_id} has an external timer: its app launches it (guard it with the hook)"
            )
        claimed: TurnRecord | None = None
        if turn_id is not None and not minted:
            check_id(turn_id, "turn_id")
            existing = self.journal.get(turn_id)
            if existing is not None and existing.verdict is not None:
                return TurnOutcome(turn_id, existing.verdict, None, existing, replayed=True)
            if existing is not None:
                claimed = existing if existing.owner_id == self.owner else self._take_over(existing)
                if claimed is None:
                    return self._not_owner(turn_id)
                if claimed.phase != "journaled":
                    # It passed confirm under a runner now gone: it may have spawned, never rerun.
                    settled = settle_lost(self.store, self.clock, claimed, self.owner, ran_on=existing.runner_host).record
                    return TurnOutcome(turn_id, settled.verdict or settled_unknown(), None, settled)
        turn = Attempt(turn_id if turn_id is not None else new_turn_id(automation.automation_id), owns_row=claimed is not None)

        def decide() -> TurnOutcome | Admitted:
            if not overlap_checked and not turn.owns_row:  # a manual run too: it bypasses only the interval
                busy = self._overlapping(automation, turn.turn_id, manual=manual_reason is not None)
                if busy is not None:
                    return busy
            # A resumed reservation was admitted already; a manual run is the owner's intent: only
            # automatic starts wait for the failure streak (after the envelope, which names a
            # bound the owner must act on before a wait that passes by itself).
            slowed = manual_reason is None and not turn.owns_row
            return self._decide(
                automation, turn, manual_reason, nominal, wait_eligible, pre, unit, wake if slowed else None, slowed, read_may_admit
            )

        return self._settling(automation, turn, decide)

    def finish(self, admitted: Admitted) -> TurnOutcome:
        """The execution half of ``run``: gate, confirm, launch, wait and settle an admitted turn."""
        return self._settling(admitted.automation, admitted.turn, lambda: self._execute(admitted))

    def _settling(self, automation: Automation, turn: Attempt, step: Callable[[], _T]) -> _T | TurnOutcome:
        """Run ``step``; once a reservation is made, every failure settles the turn."""
        try:
            return step()
        except (ClaimLost, StoreUnavailable):
            raise  # not ours to settle (lost), or cannot be settled now: recovery finds the claim
        except BaseException as exc:
            if not turn.owns_row:
                raise
            verdict = failure_verdict(exc)
            log.error("turn %s of %s failed before its verdict: %s: %s", turn.turn_id, automation.automation_id, type(exc).__name__, exc)
            with self.store.unit() as unit:  # an infra failure counts in the failure streak too
                self.streaks.lock(automation.automation_id, unit=unit)
                settled = self.journal.settle(turn.turn_id, verdict, owner=self.owner, unit=unit)
                if settled.verdict == verdict:  # this settlement wrote it: the streak moves once per verdict
                    self.streaks.note(automation, turn.turn_id, verdict, unit=unit)
            if not isinstance(exc, Exception):
                raise  # interrupted (Ctrl-C, shutdown): settled, and the interruption goes on
            return TurnOutcome(turn.turn_id, settled.verdict or verdict, turn.decision, settled, detail=f"{type(exc).__name__}: {exc}")

    def _decide(
        self,
        automation: Automation,
        turn: Attempt,
        manual_reason: str | None,
        nominal: datetime | None,
        wait_eligible: timedelta,
        pre: TurnGate | None,
        unit: UnitOfWork | None = None,
        wake: WakeState | None = None,
        slowed: bool = False,
        read_may_admit: bool = False,
    ) -> TurnOutcome | Admitted:
        turn_id = turn.turn_id
        if automation.spec.host is None:  # pragma: no cover - begin() refuses external timers first
            raise InvalidInput("automation", "no command host")
        if pre is None:
            automation = hold_for_stuck_mission(self.store, automation, self.clock)
        refused = state_refusal(automation, manual=manual_reason is not None)  # manual runs too: only the interval is bypassed
        if refused is not None:
            self._settle_claimed(turn, refused[0])
            return TurnOutcome(turn_id, refused[0], None, None, detail=refused[1])
        if pre is None:
            pre = self.gate.precheck(automation)
        if pre.refusal is not None:
            self._hold_if_stuck(automation, pre.refusal)
            self._settle_claimed(turn, pre.refusal)
            return TurnOutcome(turn_id, pre.refusal, None, None)
        waiting = self._failing(automation, wake) if slowed else None
        if waiting is not None:
            self._settle_claimed(turn, waiting.verdict)
            return replace(waiting, turn_id=turn_id)
        log_path = self._log_path(automation.automation_id, turn_id)
        trigger = nominal if nominal is not None else read_clock(self.clock)
        begun: list[tuple[bool, Mission]] = []
        begin = self._begin(automation, turn, pre, begun)
        try:
            decision = self._reserve(automation, turn_id, trigger, manual_reason, log_path, begin, unit, read_may_admit)
            gap = decision.opens_within(wait_eligible)
            if gap is not None:
                self.sleep(gap.total_seconds())
                decision = self._reserve(automation, turn_id, trigger, manual_reason, log_path, begin, unit)
        except TurnOwned:
            return self._not_owner(turn_id)
        turn.decision = decision
        if not decision.admitted:
            verdict = denied_verdict(decision)
            self._settle_claimed(turn, verdict)
            return TurnOutcome(turn_id, verdict, decision, None)
        turn.owns_row = True  # the journal row with this runner's claim committed with the start
        return Admitted(automation, turn, decision, pre, tuple(begun), log_path)

    def _execute(self, admitted: Admitted) -> TurnOutcome:
        automation, turn, decision, pre, log_path = admitted.automation, admitted.turn, admitted.decision, admitted.pre, admitted.log_path
        turn_id, begun = turn.turn_id, admitted.begun
        spec = automation.spec
        host = spec.host
        if host is None:  # pragma: no cover - begin() refuses external timers first
            raise InvalidInput("automation", "no command host")
        _pause("reserved")
        gate = pre
        if begun and begun[0][0]:
            gate = self.gate.gate_turn(automation, pre, begun[0][1], counted=True)
        elif begun:
            # The counting statement refused the turn. When the envelope refuses it, nothing
            # launches and the admitted start is not refunded (conservative); the mission's
            # exhaustion and the turn's verdict commit together.
            with self.store.unit() as unit:
                gate = self.gate.gate_turn(automation, pre, begun[0][1], counted=False, unit=unit)
                if gate.refusal is not None:
                    settled = self.journal.settle(turn_id, gate.refusal, owner=self.owner, unit=unit)
            if gate.refusal is not None:
                self._hold_if_stuck(automation, gate.refusal)
                return TurnOutcome(turn_id, gate.refusal, decision, settled)
        now = read_clock(self.clock)
        timeout = timedelta(seconds=host.timeout_seconds)
        wall_capped = gate.deadline_cap is not None and gate.deadline_cap < timeout
        if wall_capped:
            timeout = gate.deadline_cap  # type: ignore[assignment]
        try:
            os.close(open_log(log_path))  # the log must be writable (owner-only, no link) before anything can spawn
        except OSError as exc:
            raise LogUnwritable("state_dir", f"cannot write the turn log {log_path}: {exc.strerror or exc}") from exc
        tapped: list[str] = []
        with self.broker.turn(turn_id) as credential:
            verdict, problem = self._launch(automation, turn_id, log_path, now, timeout, tapped, credential)
        ran = read_clock(self.clock) - now
        if wall_capped and verdict.status == "timed_out":
            verdict = verdict.model_copy(update={"stop_reason": "compute bound exhausted: max_wall_seconds", "bound": "max_wall_seconds"})
            ran = max(ran, timeout)  # killed at the cap: it ran all of what was left
        usage = read_usage(spec.meter, tapped)  # budgets count it whether or not envelopes are on
        if gate.mission is not None:
            self.gate.account(gate.mission, turn_id, usage)  # its own commits: nothing else may write inside the unit
        with self.store.unit() as unit:  # the turn's verdict and its mission's settlement: one commit
            self.streaks.lock(automation.automation_id, unit=unit)  # the lock order of a begin
            if gate.mission is not None:
                verdict = self.gate.after_turn(automation, gate.mission, turn_id, verdict, usage, ran=ran, unit=unit)
            settled = self.journal.settle(turn_id, verdict, owner=self.owner, unit=unit)
            if settled.verdict == verdict:  # this settlement wrote it: the streak moves once per verdict
                self.streaks.note(automation, turn_id, verdict, unit=unit)
            if usage is not None:  # budgets count it: reconcile the held estimate, in the same commit
                settle_turn(unit.connection, turn_id, **metered(automation, usage, now), now=read_clock(self.clock))
            else:  # no meter: a held estimate settles unknown (counted in full, no longer in flight)
                settle_unread(unit.connection, turn_id, now=read_clock(self.clock))
        self._hold_if_stuck(automation, verdict)
        return TurnOutcome(turn_id, settled.verdict or verdict, decision, settled, detail=problem)

    # -- claims --------------------------------------------------------------------------------
    def _take_over(self, record: TurnRecord) -> TurnRecord | None:
        now = read_clock(self.clock)
        if not orphaned(record, now):
            return None
        return self.journal.take_over(record, self.owner, now + self.lease, runner_host=self.host, runner_pid=os.getpid())

    def _not_owner(self, turn_id: str) -> TurnOutcome:
        current = self.journal.get(turn_id)
        if current is not None and current.verdict is not None:
            return TurnOutcome(turn_id, current.verdict, None, current, replayed=True)
        owner = current.owner_id if current is not None else None
        lease = iso(current.lease_expires) if current is not None else None
        phase = current.phase if current is not None else "unknown"
        verdict = Verdict.denied("turn_owned", retryable=True)
        detail = f"turn {turn_id} is {phase} and owned by live runner {owner} (lease until {lease}); nothing run or written"
        return TurnOutcome(turn_id, verdict, None, None, detail=detail, owner=owner or "")

    def _failing(self, automation: Automation, wake: WakeState | None) -> TurnOutcome | None:
        """An automatic start before its failure streak's wait is refused (nothing reserved)."""
        refused = failing_refusal(automation, wake or self.automations.wake_state(automation.automation_id), read_clock(self.clock))
        return TurnOutcome("", refused[0], None, None, detail=refused[1]) if refused is not None else None

    def _settle_claimed(self, turn: Attempt, verdict: Verdict) -> None:
        """A taken-over turn refused before admission admits it again is settled, not left open."""
        if turn.owns_row:
            self.journal.settle(turn.turn_id, verdict, owner=self.owner)

    def _renew(self, turn_id: str) -> None:
        try:
            self.journal.renew(turn_id, self.owner, read_clock(self.clock) + self.lease)
        except StoreUnavailable as exc:
            # Keep the healthy turn running; if the lease runs out meanwhile, the next renewal
            # finds the claim taken over and stops it.
            log.warning("turn %s: lease renewal failed, retrying: %s", turn_id, exc)

    # -- steps ---------------------------------------------------------------------------------
    _BESIDE = "; a manual run bypasses only the interval: run it once that turn ends, or let runs overlap: 'floorgate automation edit {} --overlap allow'"

    def _overlapping(self, automation: Automation, turn_id: str, *, manual: bool = False) -> TurnOutcome | None:
        """Another process (a host, a cron fire) runs this ``overlap skip`` automation: skip, as a host
        does (a ``manual`` run is told how to run beside it)."""
        if automation.spec.overlap != Overlap.SKIP:
            return None
        now = read_clock(self.clock)
        live = [r for r in self.journal.unsettled(automation.automation_id) if not orphaned(r, now)]
        if not live:
            return None
        verdict = Verdict.denied("overlap")
        running = live[0]
        return TurnOutcome(
            turn_id,
            verdict,
            None,
            None,
            detail=f"turn {running.turn_id} is still running ({running.owner_id}); overlap skip"
            + (self._BESIDE.format(automation.automation_id) if manual else ""),
        )

    def _log_path(self, automation_id: str, turn_id: str) -> Path:
        """Where the turn's log goes; the directory is made and checked before anything is reserved."""
        log_dir = self.state_dir / "logs" / automation_id
        try:
            # Owner-only, and no link below the state directory: one planted in a shared state
            # directory must not redirect (or expose) a turn's output.
            private_dir(self.state_dir, ("logs", automation_id), "state_dir")
        except UnsafePath as exc:
            raise LogUnwritable("state_dir", f"{str(exc).removeprefix('state_dir: ')}; choose another --state-dir") from None
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise LogUnwritable(
                "state_dir", f"cannot create {log_dir}: {reason}; choose a writable --state-dir (or $FLOORGATE_STATE_DIR)"
            ) from None
        if not os.access(log_dir, os.W_OK | os.X_OK):
            raise LogUnwritable("state_dir", f"{log_dir} is not writable; choose a writable --state-dir (or $FLOORGATE_STATE_DIR)")
        return log_dir / f"{turn_id}.log"

    def _hold_if_stuck(self, automation: Automation, verdict: Verdict) -> None:
        """A stuck mission is a wall for the owner: hold the automation so the next episode does
        not start on a fresh allowance until the owner resumes it."""
        if verdict.status == "stuck":
            hold_for_stuck_mission(self.store, automation, self.clock)

    def _begin(self, automation: Automation, turn: Attempt, pre: TurnGate, begun: list[tuple[bool, Mission]]) -> Begin | None:
        """The envelope's part of the turn's begin, run inside the admitting transaction: open the
        mission, count the turn, link the attempt to it. ``begun`` receives (counted, mission)."""
        if self.gate.mode == "disabled":
            return None
        resumed = turn.owns_row  # a taken-over attempt: its begin may have committed before a crash

        def begin(unit: UnitOfWork) -> None:
            if resumed:
                record = self.journal.get(turn.turn_id, unit=unit)
                if record is not None and record.mission_id is not None:
                    mission = self.gate.missions.get(record.mission_id, unit=unit)
                    if mission.status == "open":  # counted in that commit: never twice
                        begun[:] = [(True, mission)]
                        return
            counted, mission = self.gate.open_turn(automation, pre, unit=unit)
            if counted:
                self.journal.link(turn.turn_id, self.owner, mission_id=mission.mission_id, attempt=mission.turns, unit=unit)
            begun[:] = [(counted, mission)]

        return begin

    def _reserve(
        self,
        automation: Automation,
        turn_id: str,
        trigger: datetime,
        manual_reason: str | None,
        log_path: Path,
        begin: Begin | None,
        unit: UnitOfWork | None = None,
        read_may_admit: bool = False,
    ) -> Decision:
        spec = automation.spec
        now = read_clock(self.clock)
        entry = JournalEntry(
            turn_id=turn_id,
            automation_id=automation.automation_id,
            goal_id=spec.goal_id,
            agent_id=spec.agent_id,
            kind="manual" if manual_reason is not None else "automatic",
            manual_reason=manual_reason,
            runner_host=self.host,
            runner_pid=os.getpid(),
            owner_id=self.owner,
            lease_expires=now + self.lease,
            deadline=now + timedelta(seconds=spec.host.timeout_seconds if spec.host is not None else 0),
            log_path=str(log_path),
        )
        return self.admission.reserve(
            goal=spec.goal_id,
            agent=spec.agent_id,
            automation=automation.automation_id,
            turn_id=turn_id,
            trigger_time=trigger,
            manual_reason=manual_reason,
            journal=entry,
            on_admit=begin,
            unit=unit,
            read_may_admit=read_may_admit,
        )

    def _launch(
        self,
        automation: Automation,
        turn_id: str,
        log_path: Path,
        now: datetime,
        timeout: timedelta,
        tapped: list[str],
        cred: TurnCredential,
    ) -> tuple[Verdict, str]:
        """Spawn the host held, pass the point of no return with its pid (one commit: ``launch``),
        then let it run until ``timeout`` after ``now``; the verdict, and why it could not start
        ('' when it did)."""
        host = automation.spec.host
        if host is None:  # pragma: no cover - begin() refuses external timers first
            raise InvalidInput("automation", "no command host")
        lease_expires, deadline = now + self.lease, now + timeout
        record = self.journal.get(turn_id)  # its attempt and mission, for the host's environment
        if record is None:  # pragma: no cover - the begin committed it under this runner's claim
            raise ClaimLost(turn_id, self.owner, None, "launch")
        env = host_env(automation, record, runner_env=dict(os.environ), credential=cred, envelope_mode=self.gate.mode)
        launched: list[int] = []

        def confirm(pid: int) -> None:  # the point of no return: the host has not run yet
            _pause("held")
            # Who the pid is (its boot, its start time), read while it is our unreaped child: recovery
            # signals a group only while both still match.
            self.journal.launch(
                turn_id,
                self.owner,
                lease_expires=lease_expires,
                deadline=deadline,
                child_pid=pid,
                child_boot_id=boot_id(),
                child_start_ticks=start_ticks(pid),
            )
            launched.append(pid)

        try:
            proc = spawn_held(list(host.argv), cwd=host.cwd, env=env, confirm=confirm)
        except OSError as exc:
            # Nothing ran, but the start is spent: confirmed (with the held child's pid when exec
            # failed after it), so the turn is never launched again.
            if not launched:
                self.journal.confirm(turn_id, self.owner, lease_expires=lease_expires, deadline=deadline)
            problem = f"could not start {host.argv[0]!r}" + (f" in {host.cwd}" if host.cwd else "") + f": {exc.strerror or exc}"
            with contextlib.suppress(OSError), os.fdopen(open_log(log_path), "a", encoding="utf-8") as log:  # the log says so too
                log.write(f"floorgate: {problem}\n")
            return spawn_failed(exc), problem
        pumper = pump(proc.stdout, log_path, self.log_cap, tapped)  # type: ignore[arg-type]
        try:
            code = self._wait(proc, turn_id, timeout)
            if code is None:
                kill_group(proc.pid, wait=proc.wait)
                proc.wait()
                return TIMED_OUT, ""
        except BaseException:
            # Interrupted, or the claim was lost: stop the whole group; the caller settles or reports.
            kill_group(proc.pid, wait=proc.wait)
            proc.wait()
            raise
        finally:
            pumper.join(timeout=5)
        return exit_verdict(code), pumper.problem or ""

    def _wait(self, proc: subprocess.Popen[bytes], turn_id: str, timeout: timedelta) -> int | None:
        """Wait for the host until the deadline (None when it passes), renewing the lease in
        slices of a third of it."""
        end = time.monotonic() + timeout.total_seconds()
        step = self.lease.total_seconds() / 3
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return None
            try:
                return proc.wait(timeout=min(left, step))
            except subprocess.TimeoutExpired:
                pass
            self._renew(turn_id)


def _pause(step: str) -> None:
    spec = os.environ.get(PAUSE_ENV)
    if not spec or spec.partition(":")[0] != step:
        return
    path = Path(spec.partition(":")[2])
    path.write_text(str(os.getpid()))
    go = Path(f"{path}.go")
    deadline = time.monotonic() + 120
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
