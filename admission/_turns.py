"""The turn journal's values: a turn's record, its verdict and phases, the errors of its claim.

Split from ``journal`` (which keeps the store side and re-exports these names).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Literal, NamedTuple

from pydantic import field_validator

from ._types import Frozen
from .clock import iso
from .errors import FloorgateError


class TurnStatus(StrEnum):
    """How a turn ended."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    DENIED = "denied"
    STUCK = "stuck"


class FailureCategory(StrEnum):
    """Whose failure it was: retryable infrastructure, the task itself, a policy, or none."""

    INFRA = "infra"
    TASK = "task"
    POLICY = "policy"
    NONE = "none"


TurnPhase = Literal["journaled", "confirmed", "launched", "settled"]
UNSETTLED: tuple[TurnPhase, ...] = ("journaled", "confirmed", "launched")


class TurnOwned(FloorgateError):
    """Another runner holds the claim on this turn; nothing was written."""

    def __init__(self, turn_id: str, owner_id: str | None, lease_expires: datetime | None, phase: str) -> None:
        self.turn_id = turn_id
        self.owner_id = owner_id
        self.lease_expires = lease_expires
        self.phase = phase
        super().__init__(f"turn {turn_id} is {phase} and owned by {owner_id or '(no owner)'} (lease until {iso(lease_expires) or '?'})")


class ClaimLost(FloorgateError, RuntimeError):
    """This runner no longer owns the turn (its lease expired and another runner took it over)."""

    def __init__(self, turn_id: str, me: str, owner_id: str | None, step: str) -> None:
        self.turn_id = turn_id
        self.owner_id = owner_id
        super().__init__(f"turn {turn_id}: {step} refused, the claim of {me} was lost; it is now owned by {owner_id or '(no owner)'}")


# A stop reason carries a suggested command (`floorgate approve auth-...`): kept whole, and a
# runaway one is shortened at a word boundary, never mid-word.
REASON_MAX = 1000


def clip_words(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters, else cut at the last space before it, with '…'."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    cut = head.rfind(" ")
    return (head[:cut] if cut > 0 else head).rstrip() + "…"


class Verdict(Frozen):
    """How a turn ended (seed 003): retryable infra failures are told apart from task failures."""

    status: TurnStatus
    stop_reason: str
    retryable: bool
    failure_category: FailureCategory
    exit_code: int | None = None
    bound: str | None = None  # the compute-envelope bound that stopped it (e.g. max_turns), if one did

    @field_validator("stop_reason")
    @classmethod
    def _whole_words(cls, value: str) -> str:
        return clip_words(value, REASON_MAX)

    # Named constructors: each kind of ending fixes its status, retryability and category once.
    @classmethod
    def succeeded(cls, exit_code: int = 0) -> Verdict:
        """The host ran and exited 0."""
        return cls(
            status=TurnStatus.SUCCEEDED,
            stop_reason="completed",
            retryable=False,
            failure_category=FailureCategory.NONE,
            exit_code=exit_code,
        )

    @classmethod
    def infra_failure(cls, reason: str, *, exit_code: int | None = None) -> Verdict:
        """A failure of the machinery around the task (spawn, signal, runner): retryable."""
        return cls(
            status=TurnStatus.FAILED, stop_reason=reason, retryable=True, failure_category=FailureCategory.INFRA, exit_code=exit_code
        )

    @classmethod
    def task_failure(cls, reason: str, *, exit_code: int | None = None) -> Verdict:
        """The task itself failed (a non-zero exit): not retried on its own."""
        return cls(
            status=TurnStatus.FAILED, stop_reason=reason, retryable=False, failure_category=FailureCategory.TASK, exit_code=exit_code
        )

    @classmethod
    def timed_out(cls, reason: str = "deadline_exceeded") -> Verdict:
        """The task ran past its deadline and was killed."""
        return cls(status=TurnStatus.TIMED_OUT, stop_reason=reason, retryable=False, failure_category=FailureCategory.TASK)

    @classmethod
    def denied(cls, reason: str, *, retryable: bool = False, category: FailureCategory = FailureCategory.POLICY) -> Verdict:
        """Nothing ran: a policy (or, with ``category`` INFRA, state that cannot be read) refused it."""
        return cls(status=TurnStatus.DENIED, stop_reason=reason, retryable=retryable, failure_category=category)

    @classmethod
    def stuck(cls, reason: str, bound: str | None = None) -> Verdict:
        """A compute envelope's bound (or an owner's deny) stopped the mission."""
        return cls(status=TurnStatus.STUCK, stop_reason=reason, retryable=False, failure_category=FailureCategory.POLICY, bound=bound)


class TurnRecord(Frozen):
    """One journaled attempt, as stored."""

    turn_id: str
    automation_id: str
    goal_id: str
    agent_id: str
    attempt: int
    kind: str
    manual_reason: str | None
    runner_host: str
    runner_pid: int
    child_pid: int | None
    started_at: datetime
    deadline: datetime
    phase: TurnPhase
    verdict: Verdict | None
    settled_at: datetime | None
    log_path: str | None
    mission_id: str | None = None
    owner_id: str | None = None
    lease_expires: datetime | None = None
    child_boot_id: str | None = None  # the boot child_pid was spawned in (None: not recorded)
    child_start_ticks: int | None = None  # its start time, clock ticks since that boot


class Settled(NamedTuple):
    """A settlement and whether this call wrote it (``won``) or found the turn already settled."""

    record: TurnRecord
    won: bool


@dataclass(frozen=True)
class JournalEntry:
    """The journal row a reservation writes in its own transaction (see ``Admission.reserve``).

    ``attempt`` None numbers the attempt after the automation's journaled ones.
    """

    turn_id: str
    automation_id: str
    goal_id: str
    agent_id: str
    kind: str
    manual_reason: str | None
    runner_host: str
    runner_pid: int
    owner_id: str
    lease_expires: datetime
    deadline: datetime
    log_path: str | None
    attempt: int | None = None
    mission_id: str | None = None
