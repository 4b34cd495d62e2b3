"""Run now: a manual managed turn started from the console, as ``floorgate turn run AUTOMATION
--manual-reason REASON`` runs one: the same executor, so the reason bypasses the floor's interval,
never a pause or a hold (refused in one line saying how to clear it), the compute envelope, the
accounting latch or an unreadable state; it is recorded with the start, naming the authenticated
principal.

Turns run on the console's own small pool of runner threads (not the request workers): a turn may
run for minutes, and a fixed pool bounds the store connections those threads hold. The request
waits up to ``wait`` for the verdict; a turn still running then is answered 202 with its id, and
``GET /api/turns/{turn_id}`` reads its journal record as ``floorgate turn show`` does. Stopping
``serve`` waits for running manual turns to settle (as stopping ``floorgate run`` does); a serve
killed outright leaves them to recovery, like any runner that dies.
"""

from __future__ import annotations

from concurrent.futures import TimeoutError as StillRunning
from dataclasses import dataclass
from typing import Any

from floorgate.admission import InvalidInput, Principal

from ..app.root import Floorgate
from ..runtime.executor import TurnOutcome, new_turn_id
from ..runtime.recovery import recover
from ..views.present import decision_doc, turn_doc, verdict_doc
from .workers import Workers

RUNNERS = 2


@dataclass(frozen=True)
class Started:
    """A run-now request as accepted: the turn it runs (an orphaned, never-launched turn of the
    automation is resumed under its own id, as ``turn run`` does) and what recovery settled first."""

    turn_id: str
    automation_id: str
    recovered: list[dict[str, Any]]


def prepare(fg: Floorgate, automation_id: str, reason: str | None) -> tuple[Any, str, Started]:
    """Check a run-now request and settle the automation's orphaned turns; nothing is admitted yet."""
    if reason is None or not reason.strip():
        raise InvalidInput("reason", "a manual run needs a non-empty reason (it is recorded with the start)")
    automation = fg.automations.get(automation_id)
    if automation.spec.host is None:
        raise InvalidInput("automation", f"{automation_id} has an external timer: its app launches it (guard it with the hook)")
    recovered = recover(fg.store, fg.clock, automation_ids={automation.automation_id})
    turn_id = recovered.resumable[0].turn_id if recovered.resumable else new_turn_id(automation.automation_id)
    return automation, reason.strip(), Started(turn_id, automation.automation_id, [turn_doc(r) for r in recovered.settled])


def run(fg: Floorgate, automation: Any, reason: str, principal: Principal, turn_id: str) -> TurnOutcome:
    """The manual turn itself (on a runner thread), recorded as asked by ``principal``."""
    executor = fg.executor()
    try:
        return executor.run(automation, turn_id=turn_id, manual_reason=f"{reason} (by {principal.name}, authenticated)")
    finally:
        executor.close()  # its turn broker: the turn has ended


def run_now(
    fg: Floorgate, runners: Workers, principal: Principal, automation_id: str, reason: str | None, wait: float
) -> tuple[bool, dict[str, Any]]:
    """Start a manual turn on ``runners`` and wait up to ``wait`` seconds for its verdict: (settled, doc)."""
    automation, reason, started = prepare(fg, automation_id, reason)
    future = runners.submit(run, fg, automation, reason, principal, started.turn_id)
    try:
        return True, {**outcome_doc(future.result(timeout=wait)), "recovered": started.recovered}
    except StillRunning:
        return False, {
            "turn_id": started.turn_id,
            "state": "running",
            "turn": f"/api/turns/{started.turn_id}",
            "recovered": started.recovered,
        }


def outcome_doc(outcome: TurnOutcome) -> dict[str, Any]:
    """A finished run-now, as ``floorgate turn run --json`` prints it."""
    return {
        "turn_id": outcome.turn_id,
        "state": "settled",
        "replayed": outcome.replayed,
        "owner": outcome.owner,
        "verdict": verdict_doc(outcome.verdict),
        "decision": decision_doc(outcome.decision) if outcome.decision is not None else None,
        "turn": turn_doc(outcome.record) if outcome.record is not None else None,
        "detail": outcome.detail or None,
    }
