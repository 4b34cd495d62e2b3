"""``floorgate turn run|show``: managed turns."""

from __future__ import annotations

import argparse
import os

from floorgate.admission import InvalidInput, NotFound
from floorgate.admission.clock import iso
from floorgate.admission.intervals import parse_interval

from ...app.envelope_gate import EnvelopeMode
from ...app.owner_gate import Access
from ...runtime.recovery import recover
from ...views.present import decision_doc, second, turn_doc, verdict_doc
from ..context import EXIT_DENIED, EXIT_OK, Context, actions, reads, writes

EXIT_FAILED = 5


def register(sub: argparse._SubParsersAction) -> None:
    tsub = actions(sub, "turn", "managed turns: admission, journal, bounded run, settlement")
    p = tsub.add_parser(
        "run",
        help="run one managed turn now (first resuming or settling this automation's orphaned turns); exit 0 succeeded, 3 denied or owned by another runner, 5 failed/timed out/stuck",
    )
    p.add_argument("automation")
    p.add_argument("--manual-reason", help="a manual run (explicit intent): bypasses only the interval, recorded")
    p.add_argument("--turn", help="turn id; a settled id replays its settlement, a live runner's id is refused (exit 3)")
    p.add_argument("--state-dir", help="where per-turn logs go (default $FLOORGATE_STATE_DIR or ./floorgate-state)")
    p.add_argument(
        "--wait-eligible", default="0", help="if the floor opens within this long (e.g. 2m), wait for it instead of being denied"
    )
    p.add_argument("--envelope-mode", choices=[m.value for m in EnvelopeMode], help="default $FLOORGATE_ENVELOPE_MODE, else enforce")
    writes(p, _run, Access.OPERATE, existing=True)
    p = tsub.add_parser("show", help="one turn's journal record and verdict")
    p.add_argument("turn")
    reads(p, _show)


def _run(ctx: Context) -> int:
    a = ctx.args
    automation = ctx.app.automations.get(a.automation)
    if a.manual_reason is not None and not a.manual_reason.strip():
        raise InvalidInput("--manual-reason", "a manual run needs a non-empty reason")
    executor = ctx.app.executor()
    wait = parse_interval(a.wait_eligible, "--wait-eligible")
    # A crashed earlier run of this automation (cron, manual) is settled or resumed here, so
    # nothing waits for a host that may never start.
    recovered = recover(ctx.store, automation_ids={automation.automation_id})
    lines = [f"recovered turn {r.turn_id}: {r.verdict.status} ({r.verdict.stop_reason})" for r in recovered.settled if r.verdict]
    turn_id = a.turn
    if turn_id is None and recovered.resumable:
        turn_id = recovered.resumable[0].turn_id  # its reservation holds this window: run it
        lines.append(f"resuming turn {turn_id}: its runner is gone and it never launched")
    try:
        outcome = executor.run(automation, turn_id=turn_id, manual_reason=a.manual_reason, wait_eligible=wait)
    finally:
        executor.close()  # its turn broker: the turn has ended
    v = outcome.verdict
    doc = {
        "turn_id": outcome.turn_id,
        "replayed": outcome.replayed,
        "owner": outcome.owner,
        "verdict": verdict_doc(v),
        "decision": decision_doc(outcome.decision) if outcome.decision is not None else None,
        "turn": turn_doc(outcome.record) if outcome.record is not None else None,
        "recovered": [turn_doc(r) for r in recovered.settled],
    }
    if outcome.replayed:
        text = f"turn {outcome.turn_id} was already settled: {v.status} ({v.stop_reason}); nothing run"
    elif outcome.detail and outcome.record is None:
        text = f"not run: {outcome.detail}"
    elif outcome.decision is None and outcome.record is None:  # the envelope refused before admission
        text = f"not run: {automation.automation_id} {v.status} ({v.stop_reason}); nothing launched or journaled"
    elif outcome.decision is not None and not outcome.decision.admitted:
        d = outcome.decision
        when = f"; eligible at {second(d.next_eligible_at)}" if d.next_eligible_at else ""
        text = f"denied {automation.automation_id}: {d.reason.value}{when}; nothing launched\n{d.detail}"
    else:
        log = outcome.record.log_path if outcome.record else None
        text = f"turn {outcome.turn_id}: {v.status} ({v.stop_reason}, {v.failure_category}{', retryable' if v.retryable else ''})"
        if outcome.detail:
            text += f": {outcome.detail}"
        if log and os.path.isfile(log) and os.path.getsize(log) > 0:  # never a log nothing was written to
            text += f"\nlog: {log}"
    ctx.emit(doc, "\n".join([*lines, text]))
    if v.status == "succeeded":
        return EXIT_OK
    if v.status == "denied":
        return EXIT_DENIED  # admission, a paused/held automation, or a turn another runner owns: nothing ran
    return EXIT_FAILED


def _show(ctx: Context) -> int:
    record = ctx.app.turns.get(ctx.args.turn)
    if record is None:
        raise NotFound(f"turn {ctx.args.turn!r} has no journal record")
    v = record.verdict
    ctx.emit(
        turn_doc(record),
        f"turn {record.turn_id} of {record.automation_id}: attempt {record.attempt}, {record.phase}"
        + (f", {v.status} ({v.stop_reason})" if v else "")
        + f"\nstarted {iso(record.started_at)}, deadline {iso(record.deadline)}, log {record.log_path}"
        + (f"\nowned by {record.owner_id} (lease until {iso(record.lease_expires)})" if record.verdict is None else ""),
    )
    return EXIT_OK
