"""The compute envelope at its deterministic seams (seed 000), in one place for every surface.

- turn start (``precheck``, then ``open_turn`` inside the admitting transaction and ``gate_turn``
  once it committed): accounting latch, owner ask pending, model/backend allowlists, tokens
  already spent, mission wall clock, and max_turns (counted in one refusing statement);
- the turn's deadline (``deadline_cap``): what is left of max_wall_seconds, which bounds the run
  time of the mission's turns (counted as each settles), never the calendar time it spent waiting
  for its owner or between turns;
- between turns (``after_turn``): usage the host reported (never a missing report as zero),
  reported models/backends, wall-clock exhaustion;
- tool dispatch (``count_tool_call``): max_tool_calls, for the PreToolUse hook.

Modes (a deployment setting, $FLOORGATE_ENVELOPE_MODE): ``disabled`` keeps no envelope state,
``observe`` computes and records every decision but blocks nothing, ``enforce`` blocks. A
malformed compute block fails the mission closed in enforce, and runs it unbounded in observe
with the problem reported loudly; it never becomes a phantom ceiling.
"""

from __future__ import annotations

import logging
import math
import os
import re
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from floorgate.admission import (
    Accounting,
    Approvals,
    Automation,
    Envelope,
    InvalidInput,
    Mission,
    Missions,
    Policies,
    Rule,
    Store,
    StoreUnavailable,
    UnitOfWork,
    Verdict,
    merge,
)
from floorgate.admission.clock import Clock, SystemClock, read_clock
from floorgate.admission.envelope import CAPS
from floorgate.admission.errors import CorruptState
from floorgate.admission.journal import FailureCategory
from floorgate.admission.missions import MissionStatus
from floorgate.admission.policies import applicable_rules

from .meters import Usage


class EnvelopeMode(StrEnum):
    """How envelope decisions act: not at all, recorded only, or enforced."""

    DISABLED = "disabled"
    OBSERVE = "observe"
    ENFORCE = "enforce"


ENV_MODE = "FLOORGATE_ENVELOPE_MODE"
log = logging.getLogger("floorgate.envelope")


def envelope_mode(value: str | None = None) -> EnvelopeMode:
    """The mode: the argument, else $FLOORGATE_ENVELOPE_MODE, else enforce."""
    chosen = value if value is not None else os.environ.get(ENV_MODE) or EnvelopeMode.ENFORCE.value
    try:
        return EnvelopeMode(chosen)
    except ValueError:
        raise InvalidInput("envelope mode", f"{chosen!r}: use {', '.join(m.value for m in EnvelopeMode)}") from None


@dataclass(frozen=True)
class TurnGate:
    """What the envelope says at turn start. ``refusal`` set: do not launch."""

    mission: Mission | None
    envelope: Envelope | None
    refusal: Verdict | None = None
    deadline_cap: timedelta | None = None
    problem: str | None = None


# The least run time worth launching a turn for under max_wall_seconds.
MIN_WALL_LEFT = timedelta(seconds=1)
_BOUND_IN_REASON = re.compile(r"compute bound exhausted: (max_\w+)=")


# What admission itself answers for a lane whose stored rules it cannot decode.
UNREADABLE_RULES = Verdict.denied("admission_state_unavailable", retryable=True, category=FailureCategory.INFRA)


def _stuck(reason: str, bound: str | None = None) -> Verdict:
    return Verdict.stuck(reason, bound)


class EnvelopeGate:
    def __init__(self, store: Store, *, clock: Clock | None = None, mode: EnvelopeMode | None = None) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.mode: EnvelopeMode = mode if mode is not None else envelope_mode()
        self.missions = Missions(store, self.clock)
        self.approvals = Approvals(store, self.clock)
        self.accounting = Accounting(store, self.clock)

    # -- the envelope --------------------------------------------------------------------------
    def envelope(self, goal: str, agent: str, automation: str | None) -> tuple[Envelope, str | None]:
        """The merged envelope for a lane, and the problem if a stored block is malformed."""
        with self.store.read() as conn:
            rules = applicable_rules(conn, goal, agent, automation)
        return merged(rules)

    def envelopes(
        self, lanes: list[tuple[str, str, str]], found: dict[tuple[str, str, str], list[Rule] | CorruptState] | None = None
    ) -> dict[tuple[str, str, str], tuple[Envelope, str | None]]:
        """``envelope`` for many lanes from one read of the rules (a readback of every automation;
        ``found``: ``lane_rules_or_none``, already read); a lane a damaged rule row may cover
        reads its own rules instead (and fails as ``envelope``)."""
        if found is None:
            found = self.lane_rules_or_none(lanes)
        if found is None:
            return {lane: self.envelope(*lane) for lane in lanes}
        shared: dict[tuple[tuple[str, int], ...], tuple[Envelope, str | None]] = {}  # lanes with the same rules share one
        out = {}
        for lane, rules in found.items():
            if isinstance(rules, CorruptState):
                out[lane] = self.envelope(*lane)
                continue
            key = tuple((str(r.scope), r.revision) for r in rules)
            if key not in shared:
                shared[key] = merged(rules)
            out[lane] = shared[key]
        return out

    # -- turn start ----------------------------------------------------------------------------
    def precheck(self, automation: Automation) -> TurnGate:
        """Read-only checks before admission (so a floor denial writes nothing here either). A rule
        row of the lane that cannot be decoded denies the turn ``state_unavailable``, as admission
        does (retryable: it holds nothing once the row is repaired)."""
        if self.mode == "disabled":
            return TurnGate(None, None)
        spec = automation.spec
        mission = self.missions.current(automation.automation_id)
        try:
            envelope, problem = self.envelope(spec.goal_id, spec.agent_id, automation.automation_id)
        except CorruptState as exc:
            return self.unreadable(automation, mission, exc)
        return self.judge(automation, mission, envelope, problem)

    def unreadable(self, automation: Automation, mission: Mission | None, problem: CorruptState) -> TurnGate:
        """The precheck of a lane whose stored rules cannot be decoded: denied, nothing written."""
        log.error("%s: its rules cannot be read, denied state_unavailable: %s", automation.automation_id, problem)
        return TurnGate(mission, None, UNREADABLE_RULES)

    def lane_rules_or_none(self, lanes: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], list[Rule] | CorruptState] | None:
        """``lane_rules``, or None when the rules cannot be read at all (each lane then reads its own)."""
        try:
            return self.lane_rules(lanes)
        except StoreUnavailable:
            return None

    def lane_rules(self, lanes: list[tuple[str, str, str]]) -> dict[tuple[str, str, str], list[Rule] | CorruptState]:
        """The stored rules of each lane (goal, agent, automation), from one read of every rule; a
        lane that a rule row which cannot be decoded may cover maps to that row's problem (only
        those lanes: a damaged rule of another goal or agent leaves this lane's rules standing)."""
        rules, damaged = Policies(self.store, self.clock).scan()
        by_scope = {(r.scope.goal_id, r.scope.agent_id or "", r.scope.automation_id or ""): r for r in rules}
        out: dict[tuple[str, str, str], list[Rule] | CorruptState] = {}
        for goal, agent, automation in lanes:
            bad = next((d for d in damaged if d.may_cover(goal, agent, automation)), None)
            if bad is not None:
                out[(goal, agent, automation)] = bad.problem
                continue
            keys = ((goal, "", ""), (goal, agent, ""), (goal, agent, automation))
            out[(goal, agent, automation)] = [by_scope[k] for k in keys if k in by_scope]
        return out

    def judge(self, automation: Automation, mission: Mission | None, envelope: Envelope, problem: str | None) -> TurnGate:
        """``precheck`` from facts already read: the automation's unsettled mission (None: none)
        and its lane's merged envelope (``merged``). With no mission it reads and writes nothing."""
        if self.mode == "disabled":
            return TurnGate(None, None)
        if problem is not None:
            if self.mode == "enforce":
                reason = f"envelope unreadable, failed closed: {problem}"
                if mission is not None:
                    mission = self.missions.settle(mission.mission_id, MissionStatus.STUCK, reason)
                return TurnGate(mission, None, _stuck(reason))
            log.error("OBSERVE: %s runs unbounded: %s", automation.automation_id, problem)
            return TurnGate(mission, None, problem=problem)
        if mission is not None:
            refusal = self._precheck(automation, mission, envelope)
            if refusal is not None:
                return refusal
        elif self.mode == "enforce":
            allow = self._allowlist_problem(automation, envelope)
            if allow is not None:
                return TurnGate(None, envelope, _stuck(allow))
        return TurnGate(mission, envelope)

    def open_turn(self, automation: Automation, pre: TurnGate, *, unit: UnitOfWork) -> tuple[bool, Mission]:
        """In the caller's transaction: open the mission if needed and count the turn (one
        refusing statement). Returns whether it was counted, and the mission as counted."""
        spec = automation.spec
        mission = self.missions.open(automation.automation_id, spec.goal_id, spec.agent_id, unit=unit)
        envelope = pre.envelope
        if envelope is None:  # observe with a malformed block: unbounded, reported loudly
            problem = f"observe: envelope unreadable, ran unbounded: {pre.problem}"
            self.missions.report_problem(mission.mission_id, problem, unit=unit)
            return self.missions.count(mission.mission_id, "turns", 0, enforce=False, unit=unit)
        enforce = self.mode == "enforce"
        return self.missions.count(mission.mission_id, "turns", envelope.max_turns, enforce=enforce, unit=unit)

    def gate_turn(
        self, automation: Automation, pre: TurnGate, mission: Mission, counted: bool, *, unit: UnitOfWork | None = None
    ) -> TurnGate:
        """Once the turn's begin committed: the refusal when counting it would pass max_turns
        (settled or asked per on_exhausted, in ``unit`` if given), else the turn's deadline cap."""
        envelope = pre.envelope
        if envelope is None:
            return TurnGate(mission, None)
        if not counted:
            return self._exhausted(automation, mission, envelope, "max_turns", envelope.max_turns + mission.extra_turns, unit)
        if self.mode == "observe" and envelope.max_turns and mission.turns > envelope.max_turns + mission.extra_turns:
            self._observed(mission, f"max_turns={envelope.max_turns} exceeded (turn {mission.turns})")
        return TurnGate(mission, envelope, None, self.deadline_cap(mission, envelope))

    def _allowlist_problem(self, automation: Automation, envelope: Envelope) -> str | None:
        spec = automation.spec
        if envelope.model_allowlist is not None and spec.model not in envelope.model_allowlist:
            return f"model {spec.model or '(none configured)'} is not in model_allowlist"
        if envelope.backend_allowlist is not None and spec.backend not in envelope.backend_allowlist:
            return f"backend {spec.backend or '(none configured)'} is not in backend_allowlist"
        return None

    def _precheck(self, automation: Automation, mission: Mission, envelope: Envelope) -> TurnGate | None:
        checks: list[tuple[str, str | None]] = []
        if mission.latch is not None:
            checks.append(("latch", f"accounting latch: {mission.latch}; resolve with 'floorgate reconcile {mission.mission_id}'"))
        elif any(d.state == "dispatched" for d in self.accounting.open_dispatches(mission.mission_id)):
            checks.append(
                (
                    "latch",
                    f"accounting latch: a dispatched call was never reconciled; resolve with 'floorgate reconcile {mission.mission_id}'",
                )
            )
        if mission.status == "awaiting_owner":
            pending = [a for a in self.approvals.pending(mission.mission_id) if a.expires_at > read_clock(self.clock)]
            if not pending and self.mode == "enforce":
                expired = "the owner ask expired without a decision"
                return TurnGate(self.missions.settle(mission.mission_id, MissionStatus.STUCK, expired), envelope, _stuck(expired))
            ask = pending[0].approval_id if pending else "?"
            checks.append(("owner", f"awaiting owner: floorgate approve {ask} or floorgate deny {ask}"))
        allow = self._allowlist_problem(automation, envelope)
        if allow is not None:
            checks.append(("model", allow))
        if envelope.max_turns and mission.turns >= envelope.max_turns + mission.extra_turns:
            checks.append(("max_turns", None))
        if envelope.max_tokens and mission.usage_known and mission.tokens >= envelope.max_tokens + mission.extra_tokens:
            checks.append(("max_tokens", None))
        # A turn needs time to do anything: with less than MIN_WALL_LEFT of max_wall_seconds left it
        # would only be killed at once (seed 001: check every budget before asking for another round).
        if (
            envelope.max_wall_seconds
            and mission.wall_seconds + MIN_WALL_LEFT.total_seconds() > envelope.max_wall_seconds + mission.extra_wall_seconds
        ):
            checks.append(("max_wall_seconds", None))
        for kind, reason in checks:
            if self.mode == "observe":
                self._observed(mission, reason or f"{kind} would be exhausted")
                continue
            if kind in ("latch", "owner"):
                return TurnGate(mission, envelope, _stuck(reason or kind))
            if kind in ("model", "backend"):
                return TurnGate(self.missions.settle(mission.mission_id, MissionStatus.STUCK, reason), envelope, _stuck(reason or kind))
            value = {
                "max_turns": envelope.max_turns + mission.extra_turns,
                "max_tokens": envelope.max_tokens + mission.extra_tokens,
                "max_wall_seconds": envelope.max_wall_seconds + mission.extra_wall_seconds,
            }[kind]
            return self._exhausted(automation, mission, envelope, kind, value)
        return None

    def deadline_cap(self, mission: Mission, envelope: Envelope) -> timedelta | None:
        if not envelope.max_wall_seconds or self.mode != "enforce":
            return None
        left = envelope.max_wall_seconds + mission.extra_wall_seconds - mission.wall_seconds
        return timedelta(seconds=max(left, 0))

    # -- exhaustion ----------------------------------------------------------------------------
    def _exhausted(
        self,
        automation: Automation,
        mission: Mission,
        envelope: Envelope,
        bound: str,
        value: int,
        unit: UnitOfWork | None = None,
        step: int | None = None,
    ) -> TurnGate:
        """Settle or ask. ``step``: the extension to propose (None: the bound's own size again,
        enough for a turn to run as the owner sized it; a sliver such as +1 s only files the
        next ask at once)."""
        reason = f"compute bound exhausted: {bound}={value}"
        if self.mode == "observe":
            self._observed(mission, reason, unit)
            return TurnGate(mission, envelope)
        if envelope.on_exhausted == "pause_ask":
            proposal = step if step is not None else getattr(envelope, bound) or value
            ask = self.approvals.ask(mission.mission_id, _lane(automation), bound, max(1, proposal), unit=unit)
            text = f"{reason}; owner ask {ask.approval_id}"
            return TurnGate(self.missions.get(mission.mission_id, unit=unit), envelope, _stuck(text, bound))
        settled = self.missions.settle(mission.mission_id, MissionStatus.STUCK, reason, unit=unit)
        return TurnGate(settled, envelope, _stuck(reason, bound))

    def exhaust(
        self, automation: Automation, mission: Mission, bound: str, value: int, *, unit: UnitOfWork | None = None, step: int | None = None
    ) -> Verdict:
        """Exhaustion found after a turn (wall clock, tokens): settle or ask, per on_exhausted."""
        envelope, _ = self.envelope(automation.spec.goal_id, automation.spec.agent_id, automation.automation_id)
        gate = self._exhausted(automation, mission, envelope, bound, value, unit, step)
        return gate.refusal or _stuck(f"compute bound exhausted: {bound}={value}", bound)

    def _observed(self, mission: Mission, what: str, unit: UnitOfWork | None = None) -> None:
        log.warning("OBSERVE: mission %s: %s (not enforced)", mission.mission_id, what)
        self.missions.report_problem(mission.mission_id, f"observe: {what}", unit=unit)

    # -- between turns -------------------------------------------------------------------------
    def account(self, mission: Mission, turn_id: str, usage: Usage | None) -> None:
        """Reconcile the turn's reported requests, each in its own commits (idempotent by request id)."""
        if self.mode == "disabled" or usage is None:
            return
        for request in usage.requests.values():
            rid = f"{turn_id}:{request.request_id}"[:128]
            self.accounting.reserve(mission.mission_id, rid, estimate_tokens=0, model=request.model)
            self.accounting.dispatched(rid)
            self.accounting.reconcile(rid, request.tokens, request.model)

    def after_turn(
        self,
        automation: Automation,
        mission: Mission,
        turn_id: str,
        verdict: Verdict,
        usage: Usage | None,
        *,
        ran: timedelta = timedelta(0),
        unit: UnitOfWork | None = None,
    ) -> Verdict:
        """Count the turn's run time (``ran``) on the mission's wall clock, account its reported
        usage, check reported models, settle the mission.

        ``unit``: settle in the caller's unit of work (with the turn's own settlement); the caller
        has called ``account`` before opening it, so no other connection writes while it is open.
        Without one, the usage is accounted first (its own commits), then the rest in one unit.
        """
        if self.mode == "disabled":
            return verdict
        if unit is None:
            self.account(mission, turn_id, usage)
            with self.store.unit() as own:
                return self.after_turn(automation, mission, turn_id, verdict, usage, ran=ran, unit=own)
        self.missions.add_wall(mission.mission_id, ran, unit=unit)
        envelope, _ = self.envelope(automation.spec.goal_id, automation.spec.agent_id, automation.automation_id)
        if usage is not None:
            if usage.unparseable:
                latch = f"{usage.unparseable} usage record(s) in turn {turn_id} could not be parsed"
                self.missions.set_latch(mission.mission_id, latch, unit=unit)
            bad = [m for m in usage.models if envelope.model_allowlist is not None and m not in envelope.model_allowlist]
            bad += [b for b in usage.backends if envelope.backend_allowlist is not None and b not in envelope.backend_allowlist]
            if bad:
                reason = f"host reported {', '.join(sorted(bad))}, outside the envelope's allowlist"
                if self.mode == "enforce":
                    # The mission stops here, and so does this turn: stuck, so its automation is
                    # held now rather than at the next turn's start.
                    self.missions.settle(mission.mission_id, MissionStatus.STUCK, reason, unit=unit)
                    allowlist = "model_allowlist" if any(m in bad for m in usage.models) else "backend_allowlist"
                    return _stuck(reason, allowlist)
                self._observed(mission, reason, unit)
        mission = self.missions.get(mission.mission_id, unit=unit)
        if verdict.bound == "max_wall_seconds":  # the executor killed the host at the mission's deadline
            left = envelope.max_wall_seconds + mission.extra_wall_seconds
            return self.exhaust(automation, mission, "max_wall_seconds", left, unit=unit, step=_wall_step(automation, envelope, ran))
        if verdict.status in ("succeeded", "failed") and mission.status in ("stuck", "awaiting_owner"):
            # A hook stopped the mission while the host ran (the PreToolUse hook refused the call
            # past max_tool_calls); the host then ends normally, but the turn is what stopped it.
            return self._stuck_during_turn(mission)
        if verdict.status == "succeeded" and mission.status == "open":
            self._overshot(mission, envelope, turn_id, unit)
            self.missions.settle(mission.mission_id, MissionStatus.SUCCEEDED, "completed", unit=unit)
        return verdict

    def _overshot(self, mission: Mission, envelope: Envelope, turn_id: str, unit: UnitOfWork | None) -> None:
        """A turn that succeeded past a bound stays a success (seed 001: never turn a finished
        result into a budget error), but the overshoot is recorded on the mission and emitted as a
        ``bound_overshot`` event, never silent: tokens are counted only once the host reports them."""
        limit = envelope.max_tokens + mission.extra_tokens
        if not envelope.max_tokens or not mission.usage_known or mission.tokens <= limit:
            return
        over = mission.tokens - limit
        text = f"overshot max_tokens={limit}: the host reported {mission.tokens} tokens ({over} over) in a turn that succeeded"
        log.warning("mission %s turn %s: %s", mission.mission_id, turn_id, text)
        data: dict[str, object] = {"turn_id": turn_id, "bound": "max_tokens", "limit": limit, "used": mission.tokens, "over": over}
        self.missions.report_overshoot(mission.mission_id, text, data, unit=unit)

    def _stuck_during_turn(self, mission: Mission) -> Verdict:
        reason = mission.stop_reason or f"mission {mission.mission_id} is {mission.status}"
        if mission.status == "awaiting_owner":
            ask = next(iter(self.approvals.pending(mission.mission_id)), None)
            reason = f"awaiting owner: floorgate approve {ask.approval_id} or floorgate deny {ask.approval_id}" if ask else reason
            bound = ask.bound if ask else None
        else:
            found = _BOUND_IN_REASON.search(reason)
            bound = found.group(1) if found else None
        return _stuck(reason, bound)

    # -- tool dispatch -------------------------------------------------------------------------
    def count_tool_call(self, automation: Automation, mission: Mission) -> str | None:
        """Count one tool call; returns the refusal text when the call must not run."""
        if self.mode == "disabled":
            return None
        envelope, problem = self.envelope(automation.spec.goal_id, automation.spec.agent_id, automation.automation_id)
        if problem is not None:
            if self.mode == "enforce":
                self.missions.settle(mission.mission_id, MissionStatus.STUCK, f"envelope unreadable, failed closed: {problem}")
                return f"envelope unreadable, failed closed: {problem}"
            self._observed(mission, problem)
            return None
        if mission.latch is not None and self.mode == "enforce":
            return f"accounting latch: {mission.latch}"
        if mission.status != "open" and self.mode == "enforce":
            return f"mission {mission.mission_id} is {mission.status} ({mission.stop_reason or 'no reason recorded'})"
        counted, mission = self.missions.count(mission.mission_id, "tool_calls", envelope.max_tool_calls, enforce=self.mode == "enforce")
        if counted:
            if (
                self.mode == "observe"
                and envelope.max_tool_calls
                and mission.tool_calls > envelope.max_tool_calls + mission.extra_tool_calls
            ):
                self._observed(mission, f"max_tool_calls={envelope.max_tool_calls} exceeded")
            return None
        gate = self._exhausted(automation, mission, envelope, "max_tool_calls", envelope.max_tool_calls + mission.extra_tool_calls)
        return (gate.refusal.stop_reason if gate.refusal else "compute bound exhausted: max_tool_calls") + "; this call is refused"


def _wall_step(automation: Automation, envelope: Envelope, ran: timedelta) -> int:
    """What to propose after max_wall_seconds cut a turn off after ``ran``: twice that (at least
    the bound's size), so the next turn may run longer than the one that was cut off (the same
    length would be cut off the same way), and never more than one turn may run (its timeout)."""
    host = automation.spec.host
    longest = math.ceil(host.timeout_seconds) if host is not None else CAPS["max_wall_seconds"]
    return max(envelope.max_wall_seconds, min(2 * round(ran.total_seconds()), longest, CAPS["max_wall_seconds"]))


def _lane(automation: Automation) -> str:
    return f"{automation.spec.goal_id}/{automation.spec.agent_id}/{automation.automation_id}"


def merged(rules: list[Rule]) -> tuple[Envelope, str | None]:
    """The envelope the compute blocks of a lane's rules give, and what is malformed in them."""
    order = {"goal": 0, "agent": 1, "automation": 2}
    rules = sorted(rules, key=lambda r: order[r.scope.kind.value])
    problems = [f"compute block at {r.scope} is malformed: {r.compute_problem}" for r in rules if r.compute_problem]
    blocks = [(str(r.scope), r.compute) for r in rules if r.compute is not None]
    return merge(blocks), ("; ".join(problems) if problems else None)
