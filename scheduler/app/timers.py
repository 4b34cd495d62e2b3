"""Desired versus observed timers, for every host kind, and the ACK rule.

- desired: the owner's schedule made floor-compatible for the host (raised when the host can
  express a raised form exactly, else the automation is held with what the host lacks);
- apply: arm it on the host (crontab: write the managed block; external: the owner applies it in
  the app; apscheduler: the running ``floorgate run`` arms it and publishes its own readback);
- observe: a readback from the host itself, with when it was read;
- ack: accepted only on a readback taken after the last apply that means the desired schedule;
  a rejected ACK persists nothing.

A drift read (``drift``, ``observe``) that finds the host holding something other than the applied
schedule records a ``timer_drift`` event, once per drift episode: keyed by the automation, the
apply it drifted from and what the host holds, so rereading the same drift writes nothing.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Protocol, cast

from floorgate.admission import (
    Admission,
    Automation,
    AutomationState,
    Automations,
    HoldKind,
    InvalidInput,
    Store,
    StoreUnavailable,
    TimerBinding,
    TimerBindings,
    open_store,
)
from floorgate.admission.clock import Clock, SystemClock, iso, read_clock
from floorgate.admission.events import EventKind, Events
from floorgate.admission.intervals import format_interval
from floorgate.admission.liveness import HookAnswer, HookAnswers, HostBeats
from floorgate.admission.store import redact_url
from floorgate.hosts import InvalidSchedule, Schedule
from floorgate.hosts.contract import Capabilities, Held, Observation, ObservationState, Reported, TimerHost, TimerKind
from floorgate.hosts.crontab import CrontabHost, not_runnable
from floorgate.hosts.errors import HostUnavailable, UnsupportedSchedule
from floorgate.hosts.flooring import floor_compatible
from floorgate.hosts.registry import HostSetup, capabilities, timer_host

from .guarantee import GuaranteeReadback, guarantee_of

# How long a turn a timer host launches (a crontab line) waits for a floor a moment away.
LAUNCH_WAIT = timedelta(minutes=2)
log = logging.getLogger("floorgate.timers")


def own_timer_fix(automation_id: str) -> str:
    """The fix that always works for a schedule a host cannot fire exactly: floorgate's own timer
    (it fires any RFC 5545 schedule at its instants)."""
    return (
        f"floorgate's own timer fires it exactly: 'floorgate automation edit {automation_id} --timer "
        f"{TimerKind.APSCHEDULER.value}' (with 'floorgate run' running)"
    )


def store_problem(url: str) -> str | None:
    """Why this process cannot write the existing store at ``url`` (a write transaction opened and
    rolled back: nothing written), or None. Run as a crontab line's account (``_PROBE``)."""
    try:
        with open_store(url, create=False) as store, store.write():
            return None
    except (StoreUnavailable, InvalidInput, OSError) as exc:
        return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


# What the account of a crontab line runs to show it can: the line's entry point imports, and the
# store opens for writing. Exit 3: the store refused it (stderr says why).
_STORE_REFUSED = 3
_PROBE = (
    "import sys\n"
    "import floorgate.scheduler.cli.main\n"
    "from floorgate.scheduler.app.timers import store_problem\n"
    "problem = store_problem(sys.stdin.read())\n"
    "if problem:\n"
    "    print(problem, file=sys.stderr)\n"
    f"    sys.exit({_STORE_REFUSED})\n"
)


class AnswerSource(Protocol):
    """Where the hook's last answer for an automation comes from (a readback's bulk read)."""

    def answer(self, aid: str) -> HookAnswer | None: ...


@dataclass(frozen=True)
class Observed:
    """A fresh readback (None: the owner reported nothing) and the binding as recorded after it."""

    binding: TimerBinding | None
    observation: Observation | None


@dataclass(frozen=True)
class AckResult:
    accepted: bool
    reason: str
    observation: Observation | None
    asked_host: bool = False  # a read request for the running host was recorded (the one write of a rejected ACK)


class TimerService:
    """Timer bindings of automations on one store, over the registered timer hosts."""

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock | None = None,
        crontab_user: str | None = None,
        state_dir: Path | None = None,
        can_run: Callable[[str | None], None] | None = None,  # None or raise HostUnavailable for a user; tests swap it
    ) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.bindings = TimerBindings(store)
        self.asked_host = False  # whether the last read of a runtime-armed timer recorded a read request
        self.automations = Automations(store, self.clock)
        self.admission = Admission(store, self.clock)
        self.crontab_user = crontab_user
        self.state_dir = state_dir
        self.can_run = can_run if can_run is not None else self._check_runnable

    def guarantee(
        self, automation: Automation, binding: TimerBinding | None, now: datetime | None = None, *, answers: AnswerSource | None = None
    ) -> GuaranteeReadback:
        """What floorgate can honestly promise for ``automation`` at ``now`` (default: the clock's),
        from the hook's answers and whether its agent app will run the hook as installed
        (``answers``: where a readback of many already read the hook answers)."""
        from ..agents.hook_clients import hook_problem

        aid = automation.automation_id
        answer = answers.answer(aid) if answers is not None else HookAnswers(self.store).get(aid)
        problem = (
            hook_problem(self.store, automation.automation_id) if capabilities(automation.spec.timer).needs_hook_for_guarantee else None
        )
        return guarantee_of(
            automation,
            binding,
            answer,
            read_clock(self.clock) if now is None else now,
            hook_problem=problem,
            launch_problem=self._launch_problem(automation, binding),
        )

    def _launch_problem(self, automation: Automation, binding: TimerBinding | None) -> str | None:
        """Why the timer line applied on a host floorgate reads back (a crontab) cannot launch
        admitted turns now, read from the host itself: it runs something else, or its program is gone."""
        caps = self.capabilities(automation)
        if binding is None or binding.applied_at is None or not caps.can_read_back or caps.armed_by_runtime:
            return None
        try:
            observation = self.read(automation)
        except (HostUnavailable, OSError):
            return None  # unreadable is not proof of a bad line; the drift readback says it
        return not_runnable(observation) if observation is not None else None

    # -- hosts ----------------------------------------------------------------------------------
    def capabilities(self, automation: Automation) -> Capabilities:
        """The declared capabilities of the automation's timer host."""
        return capabilities(automation.spec.timer)

    def host(self, automation: Automation, *, applying: bool = False) -> TimerHost:
        """The automation's timer host. A timer applied to another account's crontab is read and
        removed there; a new apply goes to the account this service was given, else to the one the
        automation was bound to (an apply never falls back to the caller's own crontab unasked)."""
        return timer_host(automation.spec.timer, self._setup(automation.automation_id, applying=applying))

    def crontab(self, automation_id: str | None = None) -> CrontabHost:
        """The crontab host; for an automation already applied, the account it was applied to."""
        return cast(CrontabHost, timer_host(TimerKind.CRONTAB, self._setup(automation_id)))

    def _setup(self, automation_id: str | None, *, applying: bool = False) -> HostSetup:
        user = self.crontab_user
        if automation_id is not None:
            binding = self.bindings.get(automation_id)
            bound = binding.host_user if binding is not None else None
            if bound is not None and (binding.applied_at is not None or (applying and user is None)):  # type: ignore[union-attr]
                # Read and remove where the line was written; apply again where it was meant to go.
                user = bound if not applying or user is None else user
        return HostSetup(command_for=self._cron_command, user=user, check_account=self.can_run)

    def remove_from_host(self, automation: Automation) -> None:
        """Disarm the automation's timer where floorgate can (a running ``floorgate run`` drops
        its own jobs when the automation goes; an external app's owner removes it there)."""
        if not self.capabilities(automation).armed_by_runtime:
            self.host(automation).remove(automation.automation_id)

    def remove_or_describe(self, automation: Automation) -> str | None:
        """``remove_from_host``; when the host cannot confirm it (no ``crontab`` command, an
        account gone), what to delete by hand, or None when nothing was ever armed there."""
        try:
            self.remove_from_host(automation)
            return None
        except (HostUnavailable, OSError) as exc:
            binding = self.bindings.get(automation.automation_id)
            if binding is None or binding.applied_at is None:
                return None  # never armed: nothing can be left on the host
            host = self.host(automation)
            manual = getattr(host, "manual_removal", None)
            what = (
                manual(automation.automation_id) if manual is not None else f"remove the timer of {automation.automation_id} from its host"
            )
            return f"{what} (floorgate could not: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"

    def _cron_command(self, automation_id: str) -> str:
        url = self.store.url  # absolute (open_store resolves a relative SQLite path)
        # cron fires on the minute; a start a moment before a floor equal to the period waits for it.
        argv = [
            sys.executable,
            "-m",
            "floorgate",
            "--db",
            url,
            "turn",
            "run",
            automation_id,
            "--wait-eligible",
            format_interval(LAUNCH_WAIT),
        ]
        if self.state_dir is not None:
            argv += ["--state-dir", str(self.state_dir.resolve())]
        for field, value in (("--db", url), ("--state-dir", argv[-1]), ("python", sys.executable)):
            if "\n" in value or "\r" in value:
                shown = redact_url(value) if field == "--db" else value
                raise InvalidInput(field, f"{shown!r} contains a line break, which would end the crontab line; choose a path without one")
        # cron turns an unescaped % in the command into a newline (stdin), cutting the command off;
        # cron itself removes the backslash, so the shell sees the % (inside quotes, or not).
        return (shlex.join(argv) + " >/dev/null 2>&1").replace("%", "\\%")

    # -- desired ---------------------------------------------------------------------------------
    def desired_form(
        self, schedule: Schedule, timer: str, *, goal: str, agent: str, automation_id: str
    ) -> tuple[Schedule | None, bool, str | None]:
        """What ``timer`` would arm for ``schedule`` under today's floors: (schedule, raised, None),
        or (None, False, why it is held). Writes nothing (``desire`` and previews share it)."""
        now = read_clock(self.clock)
        desired: Schedule | None = schedule
        raised, hold = False, None
        if not capabilities(timer).floor_aware:
            floor = self.admission.eligibility(goal, agent, automation_id).floor
            result = floor_compatible(schedule, floor.floor if floor is not None else timedelta(0), now)
            desired, raised, hold = result.schedule, result.raised, result.hold_reason
        if desired is not None:
            form = timer_host(timer, self._setup(None, applying=True)).express(desired, now)
            if isinstance(form, Held):
                desired, raised, hold = None, False, f"{form.reason}; held, never shortened; {own_timer_fix(automation_id)}"
        return desired, raised, hold

    def desire(self, automation: Automation) -> TimerBinding:
        """Compute and record the desired schedule; hold the automation when no host form exists."""
        now = read_clock(self.clock)
        spec = automation.spec
        desired, raised, hold = self.desired_form(
            Schedule.parse(spec.schedule), spec.timer, goal=spec.goal_id, agent=spec.agent_id, automation_id=automation.automation_id
        )
        binding = self.bindings.set_desired(
            automation.automation_id, spec.timer, desired.canonical() if desired is not None else None, raised, hold, now
        )
        if hold is not None and automation.state == AutomationState.ACTIVE:
            self.automations.set_state(automation.automation_id, AutomationState.HELD, hold, HoldKind.TIMER)
        elif hold is None and automation.state == AutomationState.HELD and automation.hold_kind is HoldKind.TIMER:
            # Only the timer's own hold ends here; a stuck mission or a failure streak waits for
            # the owner's resume (an edit, say of --hold-after, is not one).
            self.automations.set_state(automation.automation_id, AutomationState.ACTIVE, None)
        return binding

    # -- apply / observe / ack ------------------------------------------------------------------
    def apply(self, automation: Automation) -> TimerBinding:
        """Arm the desired schedule on the host, then read back and ACK if the readback matches.
        A host armed by the running ``floorgate run`` is armed there (it publishes its own apply);
        a host floorgate cannot write records the apply for its owner to carry out."""
        binding = self.desire(automation)
        now = read_clock(self.clock)
        caps = self.capabilities(automation)
        if binding.desired is None or caps.armed_by_runtime:
            return binding
        host = self.host(automation, applying=True)
        try:
            applied = host.apply(automation.automation_id, Schedule.parse(binding.desired), now)
        except (HostUnavailable, UnsupportedSchedule) as exc:
            # Remember the account it was meant for: a later apply goes there, not to the caller's.
            self.bindings.record_apply(automation.automation_id, now, str(exc), host_user=getattr(host, "user", None))
            return self.bindings.get(automation.automation_id) or binding
        self.bindings.record_apply(automation.automation_id, now, None, host_user=applied.host_user)
        if applied.armed and caps.can_read_back:
            self.ack(automation)
        return self.bindings.get(automation.automation_id) or binding

    def _check_runnable(self, user: str | None) -> None:
        """A crontab line for another account must be able to start this installation and write
        this store (a line that cannot would fail at every fire, unseen: cron drops its output)."""
        if user is None or os.geteuid() != 0:
            return
        probe = subprocess.run(
            ["runuser", "-u", user, "--", sys.executable, "-c", _PROBE],
            input=self.store.url,  # on stdin: a URL's password stays off the process list
            capture_output=True,
            text=True,
            timeout=60,
            cwd="/",
        )
        if probe.returncode == _STORE_REFUSED:
            why = probe.stderr.strip().splitlines()[-1] if probe.stderr.strip() else f"{self.store.safe_url} could not be opened"
            raise HostUnavailable(
                f"crontab: user {user} cannot write the store: {why}; give {user} write access to it (a SQLite "
                "store: the file and its folder), or choose an account that has it with --crontab-user"
            )
        if probe.returncode != 0:
            raise HostUnavailable(
                f"crontab: user {user} cannot run {sys.executable} with floorgate installed; install floorgate where {user} can run it"
            )

    def read(
        self, automation: Automation, *, current_rrule: str | None = None, unavailable: bool = False, wait: float = 10.0
    ) -> Observation | None:
        """A fresh readback from the host itself (None when nothing could be observed).
        ``current_rrule``/``unavailable`` are the owner's report, for hosts floorgate cannot read;
        ``wait`` bounds how long a running ``floorgate run`` may take to answer for its timers."""
        caps = self.capabilities(automation)
        if caps.can_read_back and (current_rrule is not None or unavailable):
            field = "--current-rrule" if current_rrule is not None else "--unavailable"
            raise InvalidInput(field, f"{automation.spec.timer} timers are read back from the host itself; drop {field}")
        if caps.armed_by_runtime:
            return self._ask_running_host(automation, wait)
        reported = None if caps.can_read_back else Reported(current_rrule=current_rrule, unavailable=unavailable)
        return self.host(automation).read(automation.automation_id, read_clock(self.clock), reported)

    def _ask_running_host(self, automation: Automation, wait: float) -> Observation | None:
        # The live scheduler belongs to a running `floorgate run`: ask it to read its own job and
        # publish the readback, then wait for an answer newer than the question.
        asked = read_clock(self.clock)
        self.asked_host = False
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            # The question is recorded only once a host is alive to answer it (a host starting up
            # beats within the wait); with none, the read writes nothing.
            if not self.asked_host and self._host_alive(read_clock(self.clock)):
                self.bindings.request_read(automation.automation_id, asked)
                self.asked_host = True
            binding = self.bindings.get(automation.automation_id)
            if binding is not None and binding.observed_at is not None and binding.observed_at >= asked:
                return Observation(state=binding.observed_state or "unavailable", text=binding.observed, read_at=binding.observed_at)
            time.sleep(0.2)
        now = read_clock(self.clock)
        if self._host_alive(now):
            detail = f"the running floorgate host did not answer within {wait:g}s"
        else:
            detail = "no floorgate host is running (start 'floorgate run')"
        return Observation(state="unavailable", text=None, read_at=now, detail=detail)

    def _host_alive(self, now: datetime) -> bool:
        return any(h.alive(now) for h in HostBeats(self.store).all())

    def observe(self, automation: Automation, **kwargs) -> Observed:  # type: ignore[no-untyped-def]
        """Read back and record what the host reports (an absent report keeps earlier facts)."""
        observation = self.read(automation, **kwargs)
        if observation is not None and not self.capabilities(automation).armed_by_runtime:  # that host publishes its own
            self.bindings.record_observation(automation.automation_id, observation.state.value, observation.text, observation.read_at)
        binding = self.bindings.get(automation.automation_id)
        if observation is not None and binding is not None and self._drifted(automation, binding, observation):
            self._note_drift(automation, binding, observation, f"the host armed {observation.text!r}, not the applied schedule")
        return Observed(binding, observation)

    def _drifted(self, automation: Automation, binding: TimerBinding, observation: Observation) -> bool:
        """A readback taken after the last apply that holds a schedule other than the applied one."""
        if binding.desired is None or binding.applied_at is None or observation.state != ObservationState.PRESENT:
            return False
        return observation.read_at >= binding.applied_at and not self._matches(automation, observation, Schedule.parse(binding.desired))

    def ack(self, automation: Automation, **kwargs) -> AckResult:  # type: ignore[no-untyped-def]
        """Re-read the host and accept the ACK only on a fresh, matching readback. A rejected ACK
        writes nothing, except the read request a running ``floorgate run`` is asked to answer
        (``asked_host``)."""
        self.asked_host = False
        result = self._ack(automation, **kwargs)
        return replace(result, asked_host=self.asked_host)

    def _ack(self, automation: Automation, **kwargs) -> AckResult:  # type: ignore[no-untyped-def]
        if self.capabilities(automation).armed_by_runtime:
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
        if observation.state != ObservationState.PRESENT:
            return AckResult(False, f"host readback is {observation.state}: {observation.detail or 'nothing armed'}", observation)
        if observation.read_at < binding.applied_at:
            # Same-instant readbacks are allowed: the read is only ever made after apply returned.
            return AckResult(False, "the readback is not newer than the last apply; re-read the host", observation)
        if not self._matches(automation, observation, Schedule.parse(binding.desired)):
            return AckResult(False, f"the host armed {observation.text!r}, not the desired schedule", observation)
        stored = self.bindings.acknowledge(
            automation.automation_id,
            binding.desired,
            binding.applied_at,
            observation.text or "",
            observation.read_at,
            read_clock(self.clock),
        )
        if not stored:
            return AckResult(False, "the desired schedule was re-applied during the ACK; acknowledge again", observation)
        return AckResult(True, "acknowledged on a fresh readback", observation)

    def drift(self, automation: Automation, binding: TimerBinding | None) -> str | None:
        """How the host's live timer differs from what was applied, read now from the host itself
        (hosts that read back by themselves and keep their own timers, e.g. a crontab edited by
        hand); None when it matches, or when there is nothing applied or nothing to read."""
        caps = self.capabilities(automation)
        if binding is None or binding.desired is None or binding.applied_at is None:
            return None
        if not caps.can_read_back or caps.armed_by_runtime:
            return None  # the owner reports it, or the running host publishes its own readback
        try:
            observation = self.read(automation)
        except (HostUnavailable, OSError) as exc:
            return f"the host cannot be read: {exc}"
        if observation is None:
            return None
        if observation.state != ObservationState.PRESENT:
            why = f"the host has no timer for it now ({observation.state}{': ' + observation.detail if observation.detail else ''})"
        elif not self._matches(automation, observation, Schedule.parse(binding.desired)):
            why = f"the host now has {observation.text!r}, not the applied schedule (see 'floorgate automation diff')"
        else:
            return None
        self._note_drift(automation, binding, observation, why)
        return why

    def _note_drift(self, automation: Automation, binding: TimerBinding, observation: Observation, why: str) -> None:
        """Record ``timer_drift`` for this episode (once: the key names the apply and what the host holds)."""
        held = hashlib.sha256(f"{observation.state}\n{observation.text or ''}".encode()).hexdigest()[:16]
        key = f"timer_drift:{automation.automation_id}:{iso(binding.applied_at)}:{held}"
        data = {"automation_id": automation.automation_id, "desired": binding.desired, "observed": observation.text, "why": why}
        try:
            Events(self.store, self.clock).note(EventKind.TIMER_DRIFT, automation.automation_id, data, key=key)
        except StoreUnavailable as exc:  # the read goes on; the next drift read records it
            log.warning("timer_drift of %s not recorded: %s", automation.automation_id, exc)

    def _matches(self, automation: Automation, observation: Observation, desired: Schedule) -> bool:
        return self.host(automation).matches(observation, desired, read_clock(self.clock))

    def _reads_itself(self, automation: Automation) -> bool:
        """Whether floorgate reads this host's live timer itself (a crontab), rather than being
        told (an owner's report, or a running ``floorgate run`` publishing its own)."""
        caps = self.capabilities(automation)
        return caps.can_read_back and not caps.armed_by_runtime

    def _live(self, automation: Automation, binding: TimerBinding, now: datetime) -> Observation | None:
        """The host's timer read now, as ``drift`` (and so ``status``) reads it; None for a host
        floorgate does not read itself, or with nothing applied."""
        if not self._reads_itself(automation) or binding.desired is None or binding.applied_at is None:
            return None
        try:
            return self.read(automation)
        except (HostUnavailable, OSError) as exc:
            return Observation(state=ObservationState.UNAVAILABLE, text=None, read_at=now, detail=f"the host cannot be read: {exc}")

    def diff(self, automation: Automation) -> dict:  # type: ignore[type-arg]
        """Desired versus observed, compared by meaning, with the first differing fires. The
        observation is the host's live timer where floorgate reads it itself (as ``status``
        does), else the last one published or reported."""
        binding = self.bindings.get(automation.automation_id)
        now = read_clock(self.clock)
        out: dict = {"automation": automation.automation_id, "desired": None, "observed": None, "match": False}  # type: ignore[type-arg]
        if binding is None:
            return out
        observation = self._live(automation, binding, now)  # what the host holds now, as status reads it
        if observation is None:  # the running host (or the owner) publishes it: the last published
            state = ObservationState(binding.observed_state) if binding.observed_state is not None else None
            observation = Observation(state=state, text=binding.observed, read_at=binding.observed_at or now) if state is not None else None
        out.update(
            desired=binding.desired,
            observed=observation.text if observation is not None else None,
            observed_state=observation.state.value if observation is not None else None,
            observed_at=iso(observation.read_at) if observation is not None else None,
            observed_detail=observation.detail if observation is not None and observation.detail else None,
            read_live=self._reads_itself(automation),
        )
        if binding.desired is None or observation is None or observation.state != ObservationState.PRESENT or not observation.text:
            return out
        desired = Schedule.parse(binding.desired)
        out["match"] = self._matches(automation, observation, desired)
        out["desired_next"] = [o.isoformat() for o in desired.occurrences(5, after=now)]
        try:
            observed_schedule = Schedule.parse(observation.text)
            out["observed_next"] = [o.isoformat() for o in observed_schedule.occurrences(5, after=now)]
        except InvalidSchedule:
            out["observed_next"] = None  # a cron line: compared by instants above
        return out
