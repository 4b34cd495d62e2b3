"""What admission answers: decisions, start records, confirmations and eligibility readback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Any, Literal, NamedTuple

from ._types import Frozen
from .decide.floors import EffectiveFloor


class Reason(str, Enum):
    """The closed set of reasons a reservation is admitted or denied."""

    ELIGIBLE = "eligible"  # admitted: the floor has elapsed
    NO_RULE = "no_rule"  # admitted: no floor applies; no cadence state written
    MANUAL = "manual"  # admitted: an explicit manual reason bypassed the interval
    RESUMED = "resumed"  # admitted: the same turn's earlier reservation, anchor unmoved
    INTERVAL_WAIT = "interval_wait"
    COUNT_EXHAUSTED = "count_exhausted"  # denied: a max-starts-per-window limit is reached
    BUDGET_EXHAUSTED = "budget_exhausted"  # denied: a token or USD budget would be crossed
    DUPLICATE_TRIGGER = "duplicate_trigger"
    TURN_ALREADY_STARTED = "turn_already_started"
    STALE_TRIGGER = "stale_trigger"
    CLOCK_ROLLBACK = "clock_rollback"
    STATE_UNAVAILABLE = "state_unavailable"


# Where a lane stands in readback (``Eligibility.status``, each check's ``Readback.status``): the one
# list of them; limit_wait: a count or budget.
EligibilityStatus = Literal["eligible", "interval_wait", "limit_wait", "unavailable"]


class StartKind(str, Enum):
    AUTOMATIC = "automatic"
    MANUAL = "manual"


class Phase(str, Enum):
    RESERVED = "reserved"
    CONFIRMED = "confirmed"


class StartRecord(Frozen):
    """One admitted start. ``anchor_at`` is when admission reserved it; floors count from there."""

    turn_id: str
    goal_id: str
    agent_id: str
    automation_id: str | None
    trigger_time: datetime
    anchor_at: datetime
    phase: Phase
    phase_recorded: bool  # False when the stored phase was missing and read as confirmed
    kind: StartKind
    manual_reason: str | None
    confirmed_at: datetime | None


@dataclass(frozen=True)
class Decision:
    """The answer to ``Admission.reserve`` (a plain frozen value: it is built on every decision).

    ``next_eligible_at`` is the exact instant the floor next allows an automatic start of this
    lane (None when no floor applies or the state could not be read). ``detail`` is rendered
    when read; two decisions are equal when every field and their details are.
    """

    admitted: bool
    reason: Reason
    turn_id: str
    goal_id: str
    agent_id: str
    automation_id: str | None
    kind: StartKind
    trigger_time: datetime
    decided_at: datetime
    anchor_at: datetime | None
    next_eligible_at: datetime | None
    floor: EffectiveFloor | None
    # The detail unrendered: a template and its arguments (``Explained``), or the text itself.
    explained: Explained | str = field(repr=False)

    @property
    def detail(self) -> str:
        return self.explained if isinstance(self.explained, str) else self.explained.text()

    def opens_within(self, limit: timedelta) -> timedelta | None:
        """How long after the decision the floor opens, if this is an interval denial that a wait
        of at most ``limit`` would turn into an admission; None otherwise (nothing to wait for)."""
        if self.admitted or self.reason is not Reason.INTERVAL_WAIT or self.next_eligible_at is None:
            return None
        gap = self.next_eligible_at - self.decided_at
        return gap if timedelta(0) < gap <= limit else None


class Explained(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    """A detail line not yet rendered: ``render(*args)`` (equal when template and arguments are)."""

    render: Callable[..., str]
    args: tuple[Any, ...]

    def text(self) -> str:
        return self.render(*self.args)


class Confirmation(Frozen):
    """The answer to ``Admission.confirm``."""

    turn_id: str
    status: Literal["confirmed", "already_confirmed", "no_reservation"]
    start: StartRecord | None


class Eligibility(Frozen):
    """Readback for an agent or automation. ``eligible`` means only that the interval has elapsed."""

    status: EligibilityStatus
    reason: Reason
    goal_id: str
    agent_id: str
    automation_id: str | None
    floor: EffectiveFloor | None
    last_start: StartRecord | None
    next_eligible_at: datetime | None
    evaluated_at: datetime
    detail: str
