"""``floorgate admit|confirm|report|starts``: the two phases, the usage a turn reports, and their readback."""

from __future__ import annotations

import argparse
import uuid
from dataclasses import replace

from floorgate.admission import NotFound, Reason
from floorgate.admission.clock import SystemClock, parse_instant, read_clock
from floorgate.admission.prices import check_model
from floorgate.admission.windows import parse_tokens, parse_usd, usd_to_micros

from ...app.owner_gate import Access
from ...views.present import confirmation_doc, decision_doc, second, start_doc, table
from ..context import EXIT_DENIED, EXIT_OK, Context, add_lane, listed, reads, writes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("admit", help="reserve a start (phase one); exit 0 admitted, 3 denied")
    add_lane(p)
    p.add_argument("--turn", help="turn id (idempotency key); default: a new random id")
    p.add_argument("--trigger-time", help="nominal tick time, ISO 8601 with offset (default: now)")
    p.add_argument("--manual-reason", help="explicit manual run: bypasses only the interval, recorded with the start")
    writes(p, _admit, Access.OPERATE)

    p = sub.add_parser("confirm", help="confirm a reservation once the host attempt is durable (phase two)")
    p.add_argument("turn", help="turn id returned by admit")
    writes(p, _confirm, Access.OPERATE)

    p = sub.add_parser(
        "report",
        help="a turn's usage once it ended, for a host that launches its own (admit, confirm, run, report): "
        "reconciles the estimate its admission held, once",
    )
    p.add_argument("turn", help="turn id returned by admit")
    p.add_argument("--tokens", required=True, help="tokens the turn used (input + output; 500k and 2M forms too)")
    p.add_argument("--usd", help="what the turn cost, when the host knows it (e.g. 0.42); else its tokens count at the model's price")
    p.add_argument("--model", help="the model it ran, for its price (policy price MODEL)")
    writes(p, _report, Access.OPERATE)

    p = sub.add_parser("starts", help="start records, newest first")
    p.add_argument("--goal")
    p.add_argument("--agent")
    p.add_argument("--automation")
    p.add_argument("--limit", type=listed, default=50)
    reads(p, _starts)


def _admit(ctx: Context) -> int:
    args = ctx.args
    turn = args.turn if args.turn is not None else f"turn-{uuid.uuid4().hex[:16]}"
    trigger = parse_instant(args.trigger_time, "--trigger-time") if args.trigger_time else read_clock(SystemClock())
    decision = ctx.app.admission.reserve(
        goal=args.goal,
        agent=args.agent,
        automation=args.automation,
        turn_id=turn,
        trigger_time=trigger,
        manual_reason=args.manual_reason,
    )
    lane = "/".join(p for p in (decision.goal_id, decision.agent_id, decision.automation_id) if p)
    if decision.admitted and decision.reason is not Reason.NO_RULE:
        # An admission reports the next start its floor allows; a count or budget this start used up
        # waits longer. The readback judges the floor and every limit, the start just reserved counted.
        after = ctx.app.admission.eligibility(args.goal, args.agent, args.automation)
        if after.status != "unavailable" and after.next_eligible_at is not None:
            decision = replace(decision, next_eligible_at=after.next_eligible_at)
    if decision.admitted:
        nxt = f"; next automatic start from {second(decision.next_eligible_at)}" if decision.next_eligible_at else ""
        then = (
            "no floor applies: nothing to confirm"
            if decision.reason is Reason.NO_RULE
            else f"confirm with: floorgate confirm {decision.turn_id}"
        )
        text = f"admitted {lane} turn {decision.turn_id} ({decision.reason.value}){nxt}\n{then}"
    else:
        when = f"; eligible at {second(decision.next_eligible_at)}" if decision.next_eligible_at else ""
        text = f"denied {lane} turn {decision.turn_id}: {decision.reason.value}{when}\n{decision.detail}"
    ctx.emit(decision_doc(decision), text)
    return EXIT_OK if decision.admitted else EXIT_DENIED


def _confirm(ctx: Context) -> int:
    confirmation = ctx.app.admission.confirm(ctx.args.turn)
    if confirmation.status == "no_reservation":
        # An unknown id and a turn admitted where no floor applies look the same here: neither
        # has a start to confirm, and saying "confirmed" of either would be untrue.
        raise NotFound(
            f"turn {confirmation.turn_id!r} has no reservation to confirm (a wrong id, or a turn admitted where no floor "
            "applies, which needs no confirm); see 'floorgate starts'"
        )
    text = {
        "confirmed": f"confirmed turn {confirmation.turn_id}",
        "already_confirmed": f"turn {confirmation.turn_id} was already confirmed",
    }[confirmation.status]
    ctx.emit(confirmation_doc(confirmation), text)
    return EXIT_OK


def _starts(ctx: Context) -> int:
    args = ctx.args
    records = ctx.app.admission.starts(args.goal, args.agent, args.automation, limit=args.limit)
    ctx.emit(
        {"starts": [start_doc(r) for r in records]},
        lambda: (
            table(
                ["TURN", "LANE", "ANCHOR_AT", "TRIGGER", "PHASE", "KIND", "MANUAL_REASON"],
                [
                    (
                        r.turn_id,
                        "/".join(p for p in (r.goal_id, r.agent_id, r.automation_id) if p),
                        # Rounded up, as status shows the last start: anchor + floor never seems to open early.
                        second(r.anchor_at),
                        second(r.trigger_time),
                        r.phase.value,
                        r.kind.value,
                        r.manual_reason,
                    )
                    for r in records
                ],
            )
            if records
            else "no starts"
        ),
    )
    return EXIT_OK


def _report(ctx: Context) -> int:
    args = ctx.args
    tokens = parse_tokens(args.tokens, "--tokens", allow_zero=True)
    usd = usd_to_micros(parse_usd(args.usd, "--usd", allow_zero=True)) if args.usd is not None else None
    model = check_model(args.model) if args.model is not None else None
    entry, changed = ctx.app.usage_ledger.report(args.turn, tokens=tokens, usd_micros=usd, model=model)
    if entry is None:
        text = f"turn {args.turn} held no estimate (no token or USD budget bound its lane when it was admitted): nothing to reconcile"
    elif changed:
        text = f"turn {args.turn}: {tokens} tokens recorded; the estimate its admission held ({entry.estimate_tokens}) no longer counts"
    else:
        text = f"turn {args.turn}: the same usage was already recorded; nothing changed"
    ctx.emit({"turn_id": args.turn, "recorded": entry is not None, "changed": changed, "tokens": tokens, "usd_micros": usd}, text)
    return EXIT_OK
