"""The admission rule's surface, pure: a lane's facts and a request in, a decision out.

The rule itself is the table ``decide.checks.CHECKS``: ``_evaluate`` (reserve, both backends) and
``_eligibility`` (readback) both loop over it. This module checks the request and builds the
``Decision`` / ``Eligibility`` values. Nothing here reads the store or the clock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from ._types import shared_fields
from .clock import aware_utc, from_us, iso, to_us
from .decide.checks import CHECKS, Outcome, judge
from .decide.checks import Request as _Request
from .decide.checks import Verdict as _Verdict
from .decide.facts import Facts
from .decide.floors import MAX_US, after_start_us
from .decisions import Decision, Eligibility, Reason, StartKind, StartRecord
from .errors import InvalidInput
from .scope import check_id, check_text

# The reasons that insert a start, and all that admit: read from the table's outcomes.
_ADMITTING = tuple(dict.fromkeys(c.reason for c in CHECKS if c.outcome is Outcome.INSERT))
_ADMITTED = (*_ADMITTING, *dict.fromkeys(c.reason for c in CHECKS if c.outcome is Outcome.ADMIT))
# Readback has no turn or trigger: "/" is never a turn id and no trigger is negative.
_NO_TURN = "/"
_NO_TRIGGER = -1
_MAX_REASON = 500
_US = timedelta(microseconds=1)
_AUTOMATIC, _MANUAL = StartKind.AUTOMATIC, StartKind.MANUAL
_new_decision = object.__new__


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


def _decision(req: _Request, now: datetime, verdict: _Verdict) -> Decision:
    admitted = verdict.reason in _ADMITTED
    next_us = verdict.next_us
    anchor_us = verdict.anchor_us
    if admitted and verdict.floor is not None and anchor_us is not None:
        # After an admission the next automatic start is one floor after this anchor.
        floor = verdict.floor
        next_us = after_start_us(anchor_us, floor.agent_floor // _US, floor.lane_floor // _US if req.automation else 0)
    decision = _new_decision(Decision)
    # Decision is a frozen dataclass with no __post_init__ (tests/test_admission.py holds both):
    # its fields are set here at once from one dict, not one object.__setattr__ each as its __init__ does.
    decision.__dict__.update(
        {
            "admitted": admitted,
            "reason": verdict.reason,
            "turn_id": req.turn_id,
            "goal_id": req.goal,
            "agent_id": req.agent,
            "automation_id": req.automation,
            "kind": _AUTOMATIC if req.manual_reason is None else _MANUAL,
            "trigger_time": req.trigger_time,
            "decided_at": now,
            "anchor_at": from_us(anchor_us) if anchor_us is not None else None,
            "next_eligible_at": from_us(next_us) if next_us is not None else None,
            "floor": verdict.floor,
            "explained": verdict.detail,
        }
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


def _eligibility(goal: str, agent: str, automation: str | None, now: datetime, facts: Facts, last_start: StartRecord | None) -> Eligibility:
    """Readback (eligibility) of the lane from its facts: the readback rows of ``CHECKS``."""
    req = _Request(goal, agent, automation, _NO_TURN, now, _NO_TRIGGER, None)
    reason, readback, next_us = judge(facts, req, to_us(now))
    eligibility = Eligibility(
        status=readback.status,
        reason=reason,
        floor=facts.floor,
        last_start=last_start,
        next_eligible_at=from_us(next_us) if next_us is not None else None,
        detail=readback.detail(facts),
        goal_id=goal,
        agent_id=agent,
        automation_id=automation,
        evaluated_at=now,
    )
    return shared_fields(eligibility)
