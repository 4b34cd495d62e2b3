"""``floorgate approve|deny|reconcile|mission``: owner decisions and accounting for envelopes."""

from __future__ import annotations

import argparse
import json

from floorgate.admission import ApprovalRejected
from floorgate.admission.clock import iso
from floorgate.admission.policies import Provenance

from ...app.owner_gate import Access
from ...views.present import mission_doc
from ..context import EXIT_DENIED, EXIT_OK, Context, actions, add_common, reads, writes


def register(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (
        ("approve", "approve an owner ask: extend the mission by its stored proposal"),
        ("deny", "deny an owner ask: the mission stops"),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("approval_id", help="auth-<id> exactly as floorgate printed it")
        add_common(p)
        p.set_defaults(handler=_decide, approve=name == "approve", access=Access.OWNER)

    p = sub.add_parser("reconcile", help="resolve a mission's accounting: reconcile or release requests, clear the latch")
    p.add_argument("mission")
    p.add_argument("--request", help="request id to reconcile (with --tokens) or release (with --release)")
    p.add_argument("--tokens", type=int, help="actual tokens of --request")
    p.add_argument("--release", action="store_true", help="the request never dispatched: give back its reservation")
    p.add_argument("--clear-latch", action="store_true", help="clear the latch once no request is left unreconciled")
    writes(p, _reconcile, Access.OWNER)

    msub = actions(sub, "mission", "missions: counters and what is left of the envelope")
    p = msub.add_parser("list", help="recent missions")
    p.add_argument("--automation")
    reads(p, _list)
    p = msub.add_parser("show", help="one mission, its envelope and pending asks")
    p.add_argument("mission")
    reads(p, _show)


def _decide(ctx: Context) -> int:
    approval_id = ctx.args.approval_id
    try:
        if ctx.principal is not None:  # a CLI owner token vouches for who decided, as a console session does
            done = ctx.app.envelopes.decide(
                approval_id, ctx.args.approve, decided_by=ctx.principal.name, provenance=Provenance.AUTHENTICATED
            )
        else:
            done = ctx.app.envelopes.decide(approval_id, ctx.args.approve)
    except ApprovalRejected as exc:
        ctx.emit({"approval_id": approval_id, "accepted": False, "reason": str(exc)}, f"rejected: {exc}")
        return EXIT_DENIED
    decided, mission = done.approval, done.mission
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
    result = ctx.app.envelopes.reconcile(a.mission, request=a.request, tokens=a.tokens, release=a.release, clear_latch=a.clear_latch)
    mission = result.mission
    ctx.emit(
        {"mission": mission_doc(mission), "done": result.done},
        "; ".join(result.done) or f"mission {mission.mission_id}: latch {mission.latch or 'clear'}",
    )
    return EXIT_OK


def _list(ctx: Context) -> int:
    items = ctx.app.envelopes.list(ctx.args.automation)
    ctx.emit_table(
        "missions",
        items,
        mission_doc,
        ["MISSION", "AUTOMATION", "STATUS", "TURNS", "TOOL_CALLS", "TOKENS", "WALL_S", "LATCH", "STOP_REASON"],
        lambda m: (
            m.mission_id,
            m.automation_id,
            m.status,
            m.turns,
            m.tool_calls,
            m.tokens if m.usage_known else "not reported",
            f"{m.wall_seconds:g}",
            m.latch or "-",
            m.stop_reason,
        ),
        "no missions",
    )
    return EXIT_OK


def _show(ctx: Context) -> int:
    detail = ctx.app.envelopes.show(ctx.args.mission)
    mission = detail.mission
    doc = mission_doc(mission, detail.envelope)
    doc["pending_asks"] = [
        {"approval_id": x.approval_id, "bound": x.bound, "proposal": x.proposal, "expires_at": iso(x.expires_at)} for x in detail.asks
    ]

    def text() -> str:
        lines = [
            f"mission {mission.mission_id} of {mission.automation_id}: {mission.status}"
            + (f" ({mission.stop_reason})" if mission.stop_reason else "")
        ]
        tokens = mission.tokens if mission.usage_known else "not reported"
        if not mission.usage_known and detail.envelope is not None and detail.envelope.max_tokens:
            tokens = "not reported (max_tokens inert)"
        lines.append(f"  turns {mission.turns}, tool calls {mission.tool_calls}, tokens {tokens}, wall {mission.wall_seconds:g}s")
        if "left" in doc:
            lines.append(
                "  left: " + ", ".join(f"{k} {'unbounded' if v is None else v}" for k, v in doc["left"].items() if k != "tokens_note")
            )
        if mission.latch:
            lines.append(f"  ACCOUNTING LATCH: {mission.latch}")
        for ask in doc["pending_asks"]:
            lines.append(
                f"  awaiting owner: floorgate approve {ask['approval_id']}  (proposal {json.dumps(ask['proposal'])}, expires {ask['expires_at']})"
            )
        return "\n".join(lines)

    ctx.emit(doc, text)
    return EXIT_OK
