"""The admission rule, pure: a lane's facts and a request in, a verdict and its explanation out.

``_evaluate`` is the one decision (reserve on both backends, with the PostgreSQL statement's own
insert rule held to it by tests/test_admission_parity.py); ``_judged`` is the same rule as a
readback (eligibility). Nothing here reads the store or the clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import NamedTuple

from ._facts import Facts
from ._types import MAX_US, shared_fields
from .clock import aware_utc, from_us, iso, to_us
from .decisions import Decision, Eligibility, Explained, Phase, Reason, StartKind, StartRecord
from .errors import InvalidInput
from .intervals import format_interval
from .policies import EffectiveFloor
from .scope import check_id, check_text

_ADMITTING = (Reason.ELIGIBLE, Reason.MANUAL)
_ADMITTED = (*_ADMITTING, Reason.RESUMED, Reason.NO_RULE)
# Readback has no turn or trigger: "/" is never a turn id and no trigger is negative.
_NO_TURN = "/"
_NO_TRIGGER = -1
_MAX_REASON = 500
_US = timedelta(microseconds=1)
_AUTOMATIC, _MANUAL = StartKind.AUTOMATIC, StartKind.MANUAL
_new_decision = object.__new__


class _Request(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    goal: str
    agent: str
    automation: str | None
    turn_id: str
    trigger_time: datetime  # aware UTC
    trigger_us: int
    manual_reason: str | None

    @property
    def lane(self) -> str:
        return self.automation or ""


class _Verdict(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    reason: Reason
    floor: EffectiveFloor | None
    next_us: int | None
    anchor_us: int | None = None
    detail: Explained | str = ""


# The details of decisions, rendered only when a caller reads ``Decision.detail``.
_RESUMING = "resuming this turn's unconfirmed reservation; the anchor is unchanged"
_NO_FLOOR = "no floor applies; admitted without cadence state"
_ROLLED_BACK = "the clock reads earlier than the last start; denied until it passes it"
_BYPASSED = "manual run bypassed the interval"


def _already_started(turn_id: str, phase: Phase, where: str) -> str:
    return f"turn {turn_id} already has a {phase.value} start{where}; it is never admitted again"


def _duplicate(trigger_us: int, turn: str) -> str:
    return f"this lane's trigger at {iso(from_us(trigger_us))} already started as turn {turn}"


def _stale(lane_trigger_us: int) -> str:
    return f"trigger is older than this lane's last admitted trigger ({iso(from_us(lane_trigger_us))})"


@lru_cache(maxsize=256)  # one text per floor: ten thousand lanes under one floor share it
def _waiting(floor: timedelta) -> str:
    return f"floor {format_interval(floor)} not yet elapsed since the last start"


@lru_cache(maxsize=256)
def _elapsed(floor: timedelta) -> str:
    return f"floor {format_interval(floor)} has elapsed"


def _request(goal: str, agent: str, automation: str | None, turn_id: str, trigger_time: datetime, manual_reason: str | None) -> _Request:
    trigger = aware_utc(trigger_time, "trigger_time")
    return _Request(
        check_id(goal, "goal"),
        check_id(agent, "agent"),
        check_id(automation, "automation") if automation is not None else None,
        check_id(turn_id, "turn_id"),
        trigger,
        _stored_us(trigger, "trigger_time"),
        _check_manual_reason(manual_reason) if manual_reason is not None else None,
    )


def _stored_us(value: datetime, field: str) -> int:
    """``value`` (aware UTC) in stored microseconds; a time the columns would refuse to read back is refused here."""
    us = to_us(value)
    if not 0 <= us < MAX_US:
        raise InvalidInput(field, f"{iso(value)} is outside the times floorgate stores (1970 to 9000)")
    return us


def _check_manual_reason(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("manual_reason", "a manual run needs a non-empty reason; omit it for automatic runs")
    if len(value) > _MAX_REASON:
        raise InvalidInput("manual_reason", f"keep the reason under {_MAX_REASON} characters")
    return check_text(value.strip(), "manual_reason", max_len=_MAX_REASON)


def _next_eligible_us(agent_floor_us: int, lane_floor_us: int, agent_anchor: int | None, lane_anchor: int | None) -> int | None:
    """When the floors (in microseconds) next allow an automatic start: the later of each
    anchor plus its floor; None when no floor counts from an anchor."""
    agent_at = agent_anchor + agent_floor_us if agent_anchor is not None and agent_floor_us else None
    if lane_anchor is None or not lane_floor_us:
        return agent_at
    lane_at = lane_anchor + lane_floor_us
    return lane_at if agent_at is None or lane_at > agent_at else agent_at


def _evaluate(f: Facts, req: _Request, now_us: int) -> _Verdict:
    if f.turn_phase is not None:
        same_lane = f.turn_lane == f"{req.goal}/{req.agent}/{req.lane}"
        if f.turn_phase is Phase.RESERVED and same_lane:
            return _Verdict(Reason.RESUMED, f.floor, None, f.turn_anchor_us, _RESUMING)
        where = "" if same_lane else f" in lane {f.turn_lane}"
        return _Verdict(Reason.TURN_ALREADY_STARTED, f.floor, None, None, Explained(_already_started, (req.turn_id, f.turn_phase, where)))
    floor = f.floor
    if not floor.rules:
        return _Verdict(Reason.NO_RULE, floor, None, None, _NO_FLOOR)
    next_us = _next_eligible_us(f.agent_floor_us, f.lane_floor_us, f.agent_anchor_us, f.lane_anchor_us if req.automation else None)
    if f.agent_anchor_us is not None and now_us < f.agent_anchor_us:
        return _Verdict(Reason.CLOCK_ROLLBACK, floor, next_us, None, _ROLLED_BACK)
    if f.duplicate_turn is not None:
        return _Verdict(Reason.DUPLICATE_TRIGGER, floor, next_us, None, Explained(_duplicate, (req.trigger_us, f.duplicate_turn)))
    if f.lane_trigger_us is not None and req.trigger_us < f.lane_trigger_us:
        return _Verdict(Reason.STALE_TRIGGER, floor, next_us, None, Explained(_stale, (f.lane_trigger_us,)))
    if next_us is not None and now_us < next_us:
        if req.manual_reason is None:
            return _Verdict(Reason.INTERVAL_WAIT, floor, next_us, None, Explained(_waiting, (floor.floor,)))
        return _Verdict(Reason.MANUAL, floor, next_us, now_us, _BYPASSED)
    reason = Reason.MANUAL if req.manual_reason is not None else Reason.ELIGIBLE
    return _Verdict(reason, floor, next_us, now_us, Explained(_elapsed, (floor.floor,)))


def _decision(req: _Request, now: datetime, verdict: _Verdict) -> Decision:
    admitted = verdict.reason in _ADMITTED
    next_us = verdict.next_us
    anchor_us = verdict.anchor_us
    if admitted and verdict.floor is not None and anchor_us is not None:
        # After an admission the next automatic start is one floor after this anchor.
        step = verdict.floor.agent_floor // _US
        lane_step = verdict.floor.lane_floor // _US if req.automation else 0
        next_us = anchor_us + max(step, lane_step)
    decision = _new_decision(Decision)
    # Decision is a frozen dataclass with no __post_init__ (tests/test_admission.py holds both):
    # its fields are set here at once, not one object.__setattr__ each as its __init__ does.
    decision.__dict__.update(
        admitted=admitted,
        reason=verdict.reason,
        turn_id=req.turn_id,
        goal_id=req.goal,
        agent_id=req.agent,
        automation_id=req.automation,
        kind=_AUTOMATIC if req.manual_reason is None else _MANUAL,
        trigger_time=req.trigger_time,
        decided_at=now,
        anchor_at=from_us(anchor_us) if anchor_us is not None else None,
        next_eligible_at=from_us(next_us) if next_us is not None else None,
        floor=verdict.floor,
        explained=verdict.detail,
    )
    return decision


def _unavailable(goal: str, agent: str, automation: str | None, now: datetime, exc: Exception) -> Eligibility:
    return shared_fields(
        Eligibility(
            status="unavailable",
            reason=Reason.STATE_UNAVAILABLE,
            floor=None,
            last_start=None,
            next_eligible_at=None,
            detail=f"{exc}; not eligible (fail closed)",
            goal_id=goal,
            agent_id=agent,
            automation_id=automation,
            evaluated_at=now,
        )
    )


def _judged(goal: str, agent: str, automation: str | None, now: datetime, facts: Facts, last_start: StartRecord | None) -> Eligibility:
    """Whether the floor has elapsed for the lane, from its facts: the one decision readback makes."""
    now_us = to_us(now)
    floor = facts.floor
    next_us = None
    if not floor.rules:
        reason, status, detail = Reason.NO_RULE, "eligible", "no floor applies"
    else:
        next_us = _next_eligible_us(
            facts.agent_floor_us, facts.lane_floor_us, facts.agent_anchor_us, facts.lane_anchor_us if automation else None
        )
        if facts.agent_anchor_us is not None and now_us < facts.agent_anchor_us:
            reason, status = Reason.CLOCK_ROLLBACK, "interval_wait"
            detail = "the clock reads earlier than the last start; waiting until it passes it"
        elif next_us is not None and now_us < next_us:
            reason, status, detail = Reason.INTERVAL_WAIT, "interval_wait", _waiting(floor.floor)
        else:
            reason, status, detail = Reason.ELIGIBLE, "eligible", _elapsed(floor.floor)
    eligibility = Eligibility(
        status=status,
        reason=reason,
        goal_id=goal,
        agent_id=agent,
        automation_id=automation,
        floor=floor,
        last_start=last_start,
        next_eligible_at=from_us(next_us) if next_us is not None else None,
        evaluated_at=now,
        detail=detail,
    )
    return shared_fields(eligibility)
