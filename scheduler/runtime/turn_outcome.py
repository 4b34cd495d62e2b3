"""What a managed turn is while it runs and what it came to: the values ``TurnExecutor`` hands out.

``new_turn_id`` mints a turn id; ``Admitted`` is a reservation ``begin`` journaled and ``finish``
launches; ``TurnOutcome`` is what ``run`` did; ``failure_verdict`` names a failure after the
reservation.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from floorgate.admission import Automation, Decision, InvalidInput, Mission, TurnRecord, Verdict

from ..app.envelope_gate import TurnGate


@dataclass(frozen=True)
class TurnOutcome:
    """What ``run`` did: the admission decision (None on replay) and the verdict.

    ``owner`` is set when another live runner owns the turn and nothing was run or written.
    """

    turn_id: str
    verdict: Verdict
    decision: Decision | None
    record: TurnRecord | None
    replayed: bool = False
    detail: str = ""
    owner: str | None = None

    @property
    def launched(self) -> bool:
        return self.record is not None and self.record.child_pid is not None and not self.replayed


# 48 random bits as before (uuid4's), without a getrandom call (a GIL release) on every tick; a
# forked child reseeds so that two processes never draw the same ids.
_IDS = random.Random()
os.register_at_fork(after_in_child=_IDS.seed)


def new_turn_id(automation_id: str) -> str:
    return f"{automation_id[:100]}-{_IDS.getrandbits(48):012x}"


class LogUnwritable(InvalidInput):
    """The state directory cannot hold this turn's log."""


@dataclass
class Attempt:
    """Per-run state (the executor is shared by a host's worker threads)."""

    turn_id: str
    owns_row: bool  # this runner holds the claim on a journal row that it must settle
    decision: Decision | None = None


@dataclass(frozen=True)
class Admitted:
    """A reservation ``TurnExecutor.begin`` admitted and journaled under this runner's claim; not
    launched yet. Hand it to ``finish`` (it stays resumable by its turn id if never finished)."""

    automation: Automation
    turn: Attempt
    decision: Decision
    pre: TurnGate
    begun: tuple[tuple[bool, Mission], ...]
    log_path: Path

    @property
    def turn_id(self) -> str:
        return self.turn.turn_id


def failure_verdict(exc: BaseException) -> Verdict:
    """The verdict for a turn that failed after its reservation, naming the cause."""
    if isinstance(exc, LogUnwritable):
        reason = "log_unwritable"
    elif not isinstance(exc, Exception):
        reason = "interrupted"
    else:
        reason = f"runner_error_{type(exc).__name__}"
    return Verdict.infra_failure(reason)
