"""Managed turns: one admitted unit is one host invocation.

reserve -> journal the attempt -> confirm -> spawn (own process group) -> record the pid ->
wait under the timeout (kill the group at the deadline) -> settle the verdict.
A settled turn id replays its settlement without admission and without launching; a retry is a
new turn that passes admission again, so a failing host never gets a free retry storm.
"""

from __future__ import annotations

import os
import signal
import time
import socket
import subprocess
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from admission import Admission, Automation, Automations, AutomationState, HoldKind, Decision, InvalidInput, Journal, Missions, Store, TurnRecord, Verdict
from admission.clock import Clock, SystemClock, read_clock
from admission.scope import check_id

from ._process import kill_group, pump, spawn
from .envelope_gate import EnvelopeGate, envelope_mode
from .meters import read_usage

DEFAULT_LOG_CAP = 1_000_000
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class TurnOutcome:
    """What ``run`` did: the admission decision (None on replay) and the verdict."""

    turn_id: str
    verdict: Verdict
    decision: Decision | None
    record: TurnRecord | None
    replayed: bool = False
    detail: str = ""

    @property
    def launched(self) -> bool:
        return self.record is not None and self.record.child_pid is not None and not self.replayed


def host_identity() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def new_turn_id(automation_id: str) -> str:
    return f"{automation_id[:100]}-{uuid.uuid4().hex[:12]}"


MISSION_HOLD = "mission "


def hold_for_stuck_mission(store: Store, automation: Automation, clock: Clock | None = None) -> Automation:
    """Hold ``automation`` if its latest mission got stuck after the owner last touched it (a
    resume after a stuck mission starts a new one); returns the automation as it now stands."""
    automation_id = automation.automation_id
    recent = Missions(store, clock).recent(automation_id, 1)
    if not recent or recent[0].status != "stuck" or automation.state != "active":
        return automation
    mission = recent[0]
    if mission.settled_at is not None and mission.settled_at >= automation.updated_at:
        return Automations(store, clock).set_state(
            automation_id,
            AutomationState.HELD,
            hold_kind=HoldKind.MISSION_STUCK,
            note=f"{MISSION_HOLD}{mission.mission_id} is stuck ({mission.stop_reason}); 'floorgate automation resume {automation_id}' starts a new one",
        )
    return automation


def denied_verdict(decision: Decision) -> Verdict:
    return Verdict(status="denied", stop_reason=f"admission_{decision.reason.value}", retryable=False, failure_category="policy")


class TurnExecutor:
    """Runs managed turns of command-host automations against one store."""

    def __init__(
        self,
        store: Store,
        *,
        state_dir: Path,
        clock: Clock | None = None,
        host: str | None = None,
        log_cap: int = DEFAULT_LOG_CAP,
        mode: str | None = None,
        sleep=time.sleep,  # type: ignore[no-untyped-def]
    ) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.admission = Admission(store, self.clock)
        self.journal = Journal(store, self.clock)
        self.state_dir = Path(state_dir)
        self.host = host if host is not None else host_identity()
        self.log_cap = log_cap
        self.gate = EnvelopeGate(store, clock=self.clock, mode=envelope_mode(mode))
        self.sleep = sleep

    def run(
        self,
        automation: Automation,
        *,
        turn_id: str | None = None,
        manual_reason: str | None = None,
        nominal: datetime | None = None,
        wait_eligible: timedelta = timedelta(0),
    ) -> TurnOutcome:
        """Run one managed turn of ``automation``; see the module docstring for the phases.

        ``wait_eligible``: when the floor denies with a next eligible time at most this far away
        (a timer that fires a few hundred milliseconds before a floor equal to its period), wait
        for it and ask again instead of losing the whole period. The floor is never shortened.
        """
        if turn_id is not None:
            check_id(turn_id, "turn_id")
            existing = self.journal.get(turn_id)
            if existing is not None and existing.verdict is not None:
                return TurnOutcome(turn_id, existing.verdict, None, existing, replayed=True)
        turn_id = turn_id if turn_id is not None else new_turn_id(automation.automation_id)
        spec = automation.spec
        if spec.host is None:
            raise InvalidInput(
                "automation", f"{automation.automation_id} has an external timer: its app launches it (guard it with the hook)"
            )
        automation = hold_for_stuck_mission(self.store, automation, self.clock)
        if automation.state != "active" and manual_reason is None:
            note = f": {automation.state_note}" if automation.state_note else ""
            verdict = Verdict(status="denied", stop_reason=f"automation_{automation.state}", retryable=False, failure_category="policy")
            hint = "" if "automation resume" in note else f"; 'floorgate automation resume {automation.automation_id}'"
            return TurnOutcome(turn_id, verdict, None, None, detail=f"{automation.automation_id} is {automation.state}{note}{hint} (or pass --manual-reason)")
        now = read_clock(self.clock)
        pre = self.gate.precheck(automation)
        if pre.refusal is not None:
            self._hold_if_stuck(automation, pre.refusal)
            return TurnOutcome(turn_id, pre.refusal, None, None)
        trigger = nominal if nominal is not None else now
        decision = self._reserve(automation, turn_id, trigger, manual_reason)
        if not decision.admitted and decision.reason.value == "interval_wait" and decision.next_eligible_at is not None:
            gap = decision.next_eligible_at - read_clock(self.clock)
            if timedelta(0) < gap <= wait_eligible:
                self.sleep(gap.total_seconds())
                decision = self._reserve(automation, turn_id, trigger, manual_reason)
        now = read_clock(self.clock)
        if not decision.admitted:
            return TurnOutcome(turn_id, denied_verdict(decision), decision, None)
        gate = self.gate.begin_turn(automation, pre)
        if gate.refusal is not None:
            self._hold_if_stuck(automation, gate.refusal)
            # Admitted, but the envelope refused it in the counting statement: nothing launches,
            # and the admitted start is not refunded (conservative).
            return TurnOutcome(turn_id, gate.refusal, decision, None)
        log_dir = self.state_dir / "logs" / automation.automation_id
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = log_dir / f"{turn_id}.log"
        timeout = timedelta(seconds=spec.host.timeout_seconds)  # host is set: checked above
        wall_capped = gate.deadline_cap is not None and gate.deadline_cap < timeout
        if wall_capped:
            timeout = gate.deadline_cap  # type: ignore[assignment]
        record = self.journal.begin(
            turn_id=turn_id,
            automation_id=automation.automation_id,
            goal_id=spec.goal_id,
            agent_id=spec.agent_id,
            attempt=gate.mission.turns if gate.mission is not None else self.journal.attempts(automation.automation_id) + 1,
            kind=decision.kind.value,
            manual_reason=manual_reason,
            runner_host=self.host,
            runner_pid=os.getpid(),
            deadline=now + timeout,
            log_path=str(log_path),
            mission_id=gate.mission.mission_id if gate.mission is not None else None,
        )
        if record.phase != "journaled":
            # This turn already launched once (a crashed host): its outcome is unknown, never rerun.
            verdict = Verdict(status="failed", stop_reason="unknown_outcome", retryable=True, failure_category="infra")
            return TurnOutcome(turn_id, self.journal.settle(turn_id, verdict).verdict or verdict, decision, record)
        self.admission.confirm(turn_id)
        tapped: list[str] = []
        verdict = self._launch(automation, record, log_path, timeout, tapped)
        if wall_capped and verdict.status == "timed_out":
            verdict = verdict.model_copy(update={"stop_reason": "compute bound exhausted: max_wall_seconds"})
        if gate.mission is not None:
            usage = read_usage(spec.meter, tapped)
            verdict = self.gate.after_turn(automation, gate.mission, turn_id, verdict, usage)
        settled = self.journal.settle(turn_id, verdict)
        self._hold_if_stuck(automation, verdict)
        return TurnOutcome(turn_id, settled.verdict or verdict, decision, settled)

    def _hold_if_stuck(self, automation: Automation, verdict: Verdict) -> None:
        """A stuck mission is a wall for the owner: hold the automation so the next episode does
        not start on a fresh allowance until the owner resumes it."""
        if verdict.status == "stuck":
            hold_for_stuck_mission(self.store, automation, self.clock)

    def _reserve(self, automation: Automation, turn_id: str, trigger: datetime, manual_reason: str | None) -> Decision:
        spec = automation.spec
        return self.admission.reserve(
            goal=spec.goal_id,
            agent=spec.agent_id,
            automation=automation.automation_id,
            turn_id=turn_id,
            trigger_time=trigger,
            manual_reason=manual_reason,
        )

    def _launch(self, automation: Automation, record: TurnRecord, log_path: Path, timeout: timedelta, tapped: list[str]) -> Verdict:
        host = automation.spec.host
        if host is None:  # pragma: no cover - run() refuses external timers first
            raise InvalidInput("automation", "no command host")
        env = {k: os.environ[k] for k in (*_PASSED_ENV, *host.env_allow) if k in os.environ}
        env.update(
            FLOORGATE_TURN_ID=record.turn_id,
            FLOORGATE_AUTOMATION=automation.automation_id,
            FLOORGATE_GOAL=automation.spec.goal_id,
            FLOORGATE_AGENT=automation.spec.agent_id,
            FLOORGATE_ATTEMPT=str(record.attempt),
        )
        if automation.spec.model is not None:
            env["FLOORGATE_MODEL"] = automation.spec.model
        if record.mission_id is not None:
            # Hooks the host runs (PreToolUse) find the mission and the store through these.
            env["FLOORGATE_MISSION_ID"] = record.mission_id
            env["FLOORGATE_DB"] = self.store.url
            env["FLOORGATE_ENVELOPE_MODE"] = self.gate.mode
        try:
            proc = spawn(list(host.argv), cwd=host.cwd, env=env)
        except FileNotFoundError:
            return Verdict(status="failed", stop_reason="host_missing", retryable=True, failure_category="infra")
        except (PermissionError, NotADirectoryError, OSError) as exc:
            reason = "host_not_executable" if isinstance(exc, PermissionError) else "spawn_error"
            return Verdict(status="failed", stop_reason=reason, retryable=True, failure_category="infra")
        pumper = pump(proc.stdout, log_path, self.log_cap, tapped)  # type: ignore[arg-type]
        try:
            self.journal.launched(record.turn_id, proc.pid)
            try:
                code = proc.wait(timeout=timeout.total_seconds())
            except subprocess.TimeoutExpired:
                kill_group(proc.pid, wait=proc.wait)
                proc.wait()
                return Verdict(status="timed_out", stop_reason="deadline_exceeded", retryable=False, failure_category="task")
        except BaseException:
            # Interrupted (Ctrl-C, shutdown): stop the whole group and settle as an infra failure.
            kill_group(proc.pid, wait=proc.wait)
            proc.wait()
            self.journal.settle(
                record.turn_id, Verdict(status="failed", stop_reason="interrupted", retryable=True, failure_category="infra")
            )
            raise
        finally:
            pumper.join(timeout=5)
        if code == 0:
            return Verdict(status="succeeded", stop_reason="completed", retryable=False, failure_category="none", exit_code=0)
        if code < 0:
            name = signal.Signals(-code).name if -code in signal.Signals._value2member_map_ else str(-code)
            return Verdict(status="failed", stop_reason=f"killed_by_{name}", retryable=True, failure_category="infra", exit_code=code)
        return Verdict(status="failed", stop_reason=f"exit_code_{code}", retryable=False, failure_category="task", exit_code=code)
