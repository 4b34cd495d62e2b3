"""``floorgate approve|deny|reconcile|mission``: owner decisions and accounting for envelopes."""

from __future__ import annotations

import argparse
import json

from admission import Accounting, ApprovalRejected, Approvals, Automations, InvalidInput, Missions, NotFound
from admission.clock import iso

from ..cli import EXIT_DENIED, EXIT_OK, Context, add_common
from ..envelope_gate import EnvelopeGate
from ..executor import hold_for_stuck_mission
from ..present import mission_doc, table


def register(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (("approve", "approve an owner ask: extend the mission by its stored proposal"), ("deny", "deny an owner ask: the mission stops")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("approval_id", help="auth-<id> exactly as floorgate printed it")
        add_common(p)
        p.set_defaults(handler=_decide, approve=name == "approve")

    p = sub.add_parser("reconcile", help="resolve a mission's accounting: reconcile or release requests, clear the latch")
    p.add_argument("mission")
    p.add_argument("--request", help="request id to reconcile (with --tokens) or release (with --release)")
    p.add_argument("--tokens", type=int, help="actual tokens of --request")
    p.add_argument("--release", action="store_true", help="the request never dispatched: give back its reservation")
    p.add_argument("--clear-latch", action="store_true", help="clear the latch once no request is left unreconciled")
    add_common(p)
    p.set_defaults(handler=_reconcile)

    top = sub.add_parser("mission", help="missions: counters and what is left of the envelope")
    msub = top.add_subparsers(dest="mission_command", metavar="ACTION", parser_class=type(top))
    msub.required = True
    p = msub.add_parser("list", help="recent missions")
    p.add_argument("--automation")
    add_common(p)
    p.set_defaults(handler=_list)
    p = msub.add_parser("show", help="one mission, its envelope and pending asks")
    p.add_argument("mission")
    add_common(p)
    p.set_defaults(handler=_show)


def _decide(ctx: Context) -> int:
    approvals = Approvals(ctx.store)
    approval_id = ctx.args.approval_id
    try:
        pending = approvals.get(approval_id)
        mission = Missions(ctx.store).get(pending.mission_id)
        try:
            automation = Automations(ctx.store).get(mission.automation_id)
            scope_now = f"{automation.spec.goal_id}/{automation.spec.agent_id}/{automation.automation_id}"
        except NotFound:
            scope_now = "(automation removed)"
        decided = approvals.decide(approval_id, ctx.args.approve, scope_now=scope_now)
    except ApprovalRejected as exc:
        ctx.emit({"approval_id": approval_id, "accepted": False, "reason": str(exc)}, f"rejected: {exc}")
        return EXIT_DENIED
    if not ctx.args.approve:
        try:
            hold_for_stuck_mission(ctx.store, Automations(ctx.store).get(mission.automation_id))
        except NotFound:
            pass  # the automation was removed; nothing to hold
    verb = "approved" if ctx.args.approve else "denied"
    extension = ", ".join(f"{k} +{v}" for k, v in decided.proposal.items())  # e.g. max_turns +20
    ctx.emit(
        {"approval_id": approval_id, "accepted": True, "state": decided.state, "mission": decided.mission_id, "proposal": decided.proposal},
        f"{verb} {approval_id}: mission {decided.mission_id} "
        + (f"extended ({extension}) and resumes" if ctx.args.approve else f"stops; {mission.automation_id} is held until you resume it"),
    )
    return EXIT_OK


def _reconcile(ctx: Context) -> int:
    a = ctx.args
    missions, accounting = Missions(ctx.store), Accounting(ctx.store)
    mission = missions.get(a.mission)
    done = []
    if a.request is not None:
        if a.release:
            accounting.release(a.request)
            done.append(f"released {a.request}")
        elif a.tokens is not None:
            dispatch, changed = accounting.reconcile(a.request, a.tokens)
            done.append(f"reconciled {a.request}: {dispatch.actual_tokens} tokens" + ("" if changed else " (already reconciled; unchanged)"))
        else:
            raise InvalidInput("--tokens", "give --tokens N to reconcile, or --release")
    if a.clear_latch:
        open_requests = accounting.open_dispatches(mission.mission_id)
        if open_requests:
            raise InvalidInput("--clear-latch", f"{len(open_requests)} request(s) still unreconciled: {', '.join(d.request_id for d in open_requests[:5])}")
        if mission.latch is None:
            done.append("no latch to clear")
        else:
            missions.set_latch(mission.mission_id, None)
            done.append("latch cleared")
    mission = missions.get(a.mission)
    ctx.emit({"mission": mission_doc(mission), "done": done}, "; ".join(done) or f"mission {mission.mission_id}: latch {mission.latch or 'clear'}")
    return EXIT_OK


def _envelope_for(ctx: Context, mission):  # type: ignore[no-untyped-def]
    try:
        automation = Automations(ctx.store).get(mission.automation_id)
    except NotFound:
        return None
    envelope, _ = EnvelopeGate(ctx.store, mode="observe").envelope(automation.spec.goal_id, automation.spec.agent_id, automation.automation_id)
    return envelope


def _list(ctx: Context) -> int:
    items = Missions(ctx.store).recent(ctx.args.automation, limit=50)
    ctx.emit(
        {"missions": [mission_doc(m) for m in items]},
        lambda: table(
            ["MISSION", "AUTOMATION", "STATUS", "TURNS", "TOOL_CALLS", "TOKENS", "LATCH", "STOP_REASON"],
            [(m.mission_id, m.automation_id, m.status, m.turns, m.tool_calls, m.tokens if m.usage_known else "not reported", m.latch or "-", m.stop_reason) for m in items],
        ) if items else "no missions",
    )
    return EXIT_OK


def _show(ctx: Context) -> int:
    mission = Missions(ctx.store).get(ctx.args.mission)
    envelope = _envelope_for(ctx, mission)
    doc = mission_doc(mission, envelope)
    asks = Approvals(ctx.store).pending(mission.mission_id)
    doc["pending_asks"] = [{"approval_id": x.approval_id, "bound": x.bound, "proposal": x.proposal, "expires_at": iso(x.expires_at)} for x in asks]

    def text() -> str:
        lines = [f"mission {mission.mission_id} of {mission.automation_id}: {mission.status}" + (f" ({mission.stop_reason})" if mission.stop_reason else "")]
        lines.append(f"  turns {mission.turns}, tool calls {mission.tool_calls}, tokens {mission.tokens if mission.usage_known else 'not reported (max_tokens inert)'}")
        if "left" in doc:
            lines.append("  left: " + ", ".join(f"{k} {'unbounded' if v is None else v}" for k, v in doc["left"].items() if k != "tokens_note"))
        if mission.latch:
            lines.append(f"  ACCOUNTING LATCH: {mission.latch}")
        for ask in doc["pending_asks"]:
            lines.append(f"  awaiting owner: floorgate approve {ask['approval_id']}  (proposal {json.dumps(ask['proposal'])}, expires {ask['expires_at']})")
        return "\n".join(lines)

    ctx.emit(doc, text)
    return EXIT_OK
