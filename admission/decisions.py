"""What admission answers: decisions, start records, confirmations and eligibility readback."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from typing import Literal

from ._types import Frozen
from .decide.checks import EligibilityStatus as EligibilityStatus
from .decide.checks import Explained as Explained
from .decide.checks import Reason as Reason
from .decide.facts import Phase as Phase
from .decide.floors import EffectiveFloor


class StartKind(str, Enum):
    AUTOMATIC = "automatic"
    MANUAL = "manual"


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
