"""Desired versus observed timers, for every host kind, and the ACK rule.

- desired: the owner's schedule made floor-compatible for the host (raised when the host can
  express a raised form exactly, else the automation is held with what the host lacks);
- apply: arm it on the host (crontab: write the managed block; external: the owner applies it in
  the app; apscheduler: the running ``floorgate run`` arms it and publishes its own readback);
- observe: a readback from the host itself, with when it was read;
- ack: accepted only on a readback taken after the last apply that means the desired schedule;
  a rejected ACK persists nothing.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from admission import Admission, Automation, Automations, AutomationState, HoldKind, Store, TimerBinding, TimerBindings
from admission.clock import Clock, SystemClock, read_clock
from hosts import InvalidSchedule, Schedule
from hosts.contract import Guarantee, Observation
from hosts.crontab import CrontabHost
from hosts.errors import HostUnavailable, UnsupportedSchedule
from hosts.external import ExternalTimer
from hosts.flooring import floor_compatible



@dataclass(frozen=True)
class AckResult:
    accepted: bool
    reason: str
    observation: Observation | None


def guarantee(automation: Automation, binding: TimerBinding | None) -> Guarantee:
    """What floorgate can honestly promise about premature model wake-ups for this automation."""
    if automation.spec.timer in ("apscheduler", "crontab"):
        return "enforced"
    if binding is not None and binding.hook_seen_at is not None:
        return "pre-model hook"
    return "schedule-only"


class TimerService:
    """Timer bindings of automations on one store."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        crontab_user: str | None = None,
        state_dir: Path | None = None,
        can_run=None,  # type: ignore[no-untyped-def]  # user -> None or raise HostUnavailable; tests swap it
    ) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.bindings = TimerBindings(store)
        self.automations = Automations(store, self.clock)
        self.admission = Admission(store, self.clock)
        self.crontab_user = crontab_user
        self.state_dir = state_dir
        self.can_run = can_run if can_run is not None else self._check_runnable

    # -- hosts ----------------------------------------------------------------------------------
    def crontab(self, automation_id: str | None = None) -> CrontabHost:
        """The crontab host; for an automation already applied, the account it was applied to."""
        user = self.crontab_user
        if automation_id is not None:
            binding = self.bindings.get(automation_id)
            if binding is not None and binding.host_user is not None and binding.applied_at is not None:
                user = binding.host_user
        return CrontabHost(self._cron_command, user=user)

    def _cron_command(self, automation_id: str) -> str:
        url = self.store.url
        if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
            url = "sqlite:///" + str(Path(url[len("sqlite:///"):]).resolve())
        # cron fires on the minute; a start a moment before a floor equal to the period waits for it.
        argv = [sys.executable, "-m", "scheduler", "--db", url, "turn", "run", automation_id, "--wait-eligible", "2m"]
        if self.state_dir is not None:
            argv += ["--state-dir", str(self.state_dir.resolve())]
        return shlex.join(argv) + " >/dev/null 2>&1"

    def remove_from_host(self, automation: Automation) -> None:
        """Take the automation's line off the timer host it was applied to (a host that keeps no
        line of ours has nothing to remove)."""
        if automation.spec.timer == "crontab":
            self.crontab(automation.automation_id).remove(automation.automation_id)

    # -- desired ---------------------------------------------------------------------------------
    def desire(self, automation: Automation) -> TimerBinding:
        """Compute and record the desired schedule; hold the automation when no host form exists."""
        now = read_clock(self.clock)
        spec = automation.spec
        schedule = Schedule.parse(spec.schedule)
        raised = False
        if spec.timer == "apscheduler":
            desired: Schedule | None = schedule  # floor-aware: every fire is clamped to the floor
            hold = None
        else:
            floor = self.admission.eligibility(spec.goal_id, spec.agent_id, automation.automation_id).floor
            result = floor_compatible(schedule, floor.floor if floor is not None else timedelta(0), now)
            desired, raised, hold = result.schedule, result.raised, result.hold_reason
            if desired is not None and spec.timer == "crontab":
                try:
                    self.crontab().express(desired, now)
                except UnsupportedSchedule as exc:
                    desired, raised, hold = None, False, f"{exc}; held, never shortened"
        binding = self.bindings.set_desired(
            automation.automation_id, spec.timer, desired.canonical() if desired is not None else None, raised, hold, now
        )
        if hold is not None and automation.state == AutomationState.ACTIVE:
            self.automations.set_state(automation.automation_id, AutomationState.HELD, hold, HoldKind.TIMER)
        elif hold is None and automation.state == AutomationState.HELD and automation.hold_kind is not HoldKind.MISSION_STUCK:
            self.automations.set_state(automation.automation_id, AutomationState.ACTIVE, None)
        return binding

    # -- apply / observe / ack ------------------------------------------------------------------
    def apply(self, automation: Automation) -> TimerBinding:
        """Arm the desired schedule on the host, then read back and ACK if the readback matches."""
        binding = self.desire(automation)
        now = read_clock(self.clock)
        if binding.desired is None:
            return binding
        desired = Schedule.parse(binding.desired)
        if automation.spec.timer == "crontab":
            host = self.crontab()
            try:
                self.can_run(host.user)
                host.apply(automation.automation_id, desired, now)
            except (HostUnavailable, UnsupportedSchedule) as exc:
                self.bindings.record_apply(automation.automation_id, now, str(exc))
                return self.bindings.get(automation.automation_id) or binding
            self.bindings.record_apply(automation.automation_id, now, None, host_user=host.user)
            self.ack(automation)
        elif automation.spec.timer == "external":
            self.bindings.record_apply(automation.automation_id, now, None)  # the owner applies it in the app
        return self.bindings.get(automation.automation_id) or binding

    def _check_runnable(self, user: str | None) -> None:
        """A crontab line for another account must be able to start this installation."""
        if user is None or os.geteuid() != 0:
            return
        probe = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c", "import scheduler"], capture_output=True, timeout=60, cwd="/")
        if probe.returncode != 0:
            raise HostUnavailable(f"crontab: user {user} cannot run {sys.executable} with floorgate installed; install floorgate where {user} can run it")

    def read(self, automation: Automation, *, current_rrule: str | None = None, unavailable: bool = False, wait: float = 10.0) -> Observation | None:
        """A fresh readback from the host itself (None when nothing could be observed)."""
        now = read_clock(self.clock)
        timer = automation.spec.timer
        if timer == "crontab":
            return self.crontab(automation.automation_id).read(automation.automation_id, now)
        if timer == "external":
            return ExternalTimer().observation(current_rrule, unavailable, now)
        return self._ask_running_host(automation, wait)

    def _ask_running_host(self, automation: Automation, wait: float) -> Observation | None:
        # The live scheduler belongs to a running `floorgate run`: ask it to read its own job and
        # publish the readback, then wait for an answer newer than the question.
        asked = read_clock(self.clock)
        self.bindings.request_read(automation.automation_id, asked)
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            binding = self.bindings.get(automation.automation_id)
            if binding is not None and binding.observed_at is not None and binding.observed_at >= asked:
                return Observation(state=binding.observed_state or "unavailable", text=binding.observed, read_at=binding.observed_at)
            time.sleep(0.2)
        return Observation(state="unavailable", text=None, read_at=read_clock(self.clock), detail=f"no running floorgate host answered within {wait:g}s")

    def observe(self, automation: Automation, **kwargs) -> TimerBinding | None:  # type: ignore[no-untyped-def]
        """Read back and record what the host reports (an absent report keeps earlier facts)."""
        observation = self.read(automation, **kwargs)
        if observation is not None and automation.spec.timer != "apscheduler":
            self.bindings.record_observation(automation.automation_id, observation.state, observation.text, observation.read_at)
        return self.bindings.get(automation.automation_id)

    def ack(self, automation: Automation, **kwargs) -> AckResult:  # type: ignore[no-untyped-def]
        """Re-read the host and accept the ACK only on a fresh, matching readback."""
        if automation.spec.timer == "apscheduler":
            observation = self.read(automation, **kwargs)  # the running host also publishes its apply
            binding = self.bindings.get(automation.automation_id)
        else:
            binding = self.bindings.get(automation.automation_id)
            observation = self.read(automation, **kwargs) if binding is not None and binding.applied_at is not None else None
        if binding is None or binding.desired is None:
            return AckResult(False, "nothing to acknowledge: no desired schedule (held or never applied)", observation)
        if binding.applied_at is None:
            return AckResult(False, "the desired schedule was never applied to the host; apply it first", observation)
        if observation is None:
            return AckResult(False, "no readback: an ACK needs the host's current schedule", None)
        if observation.state != "present":
            return AckResult(False, f"host readback is {observation.state}: {observation.detail or 'nothing armed'}", observation)
        if observation.read_at < binding.applied_at:
            # Same-instant readbacks are allowed: the read is only ever made after apply returned.
            return AckResult(False, "the readback is not newer than the last apply; re-read the host", observation)
        if not self._matches(automation, observation, Schedule.parse(binding.desired)):
            return AckResult(False, f"the host armed {observation.text!r}, not the desired schedule", observation)
        stored = self.bindings.acknowledge(
            automation.automation_id, binding.desired, binding.applied_at, observation.text or "", observation.read_at, read_clock(self.clock)
        )
        if not stored:
            return AckResult(False, "the desired schedule was re-applied during the ACK; acknowledge again", observation)
        return AckResult(True, "acknowledged on a fresh readback", observation)

    def _matches(self, automation: Automation, observation: Observation, desired: Schedule) -> bool:
        now = read_clock(self.clock)
        if automation.spec.timer == "crontab":
            return self.crontab(automation.automation_id).matches(observation, desired, now)
        return ExternalTimer().matches(observation, desired, now)

    def diff(self, automation: Automation) -> dict:  # type: ignore[type-arg]
        """Desired versus last observed, compared by meaning, with the first differing fires."""
        binding = self.bindings.get(automation.automation_id)
        now = read_clock(self.clock)
        out: dict = {"automation": automation.automation_id, "desired": None, "observed": None, "match": False}  # type: ignore[type-arg]
        if binding is None:
            return out
        out.update(desired=binding.desired, observed=binding.observed, observed_state=binding.observed_state)
        if binding.desired is None or binding.observed_state != "present" or not binding.observed:
            return out
        desired = Schedule.parse(binding.desired)
        observation = Observation(state="present", text=binding.observed, read_at=binding.observed_at or now)
        out["match"] = self._matches(automation, observation, desired) if automation.spec.timer != "apscheduler" else _rrule_same(binding.observed, desired, now)
        out["desired_next"] = [o.isoformat() for o in desired.occurrences(5, after=now)]
        try:
            observed_schedule = Schedule.parse(binding.observed)
            out["observed_next"] = [o.isoformat() for o in observed_schedule.occurrences(5, after=now)]
        except InvalidSchedule:
            out["observed_next"] = None  # a cron line: compared by instants above
        return out


def _rrule_same(text: str, desired: Schedule, now: datetime) -> bool:
    from hosts.apscheduler_timer import rrule_matches

    return rrule_matches(Observation(state="present", text=text, read_at=now), desired, now)
