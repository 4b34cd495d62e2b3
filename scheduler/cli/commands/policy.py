"""``floorgate policy set|show|history``: owner floors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from floorgate.admission import InvalidInput, Scope, parse_compute
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval, parse_interval

from ...app.owner_gate import Access
from ...views.present import change_doc, eligibility_state_doc, floor_doc, rule_doc, table
from ..context import EXIT_OK, Context, add_common


def _scope_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("scope", nargs="?", help="GOAL, GOAL/AGENT or GOAL/AGENT/AUTOMATION (or use --goal/--agent/--automation)")
    p.add_argument("--goal")
    p.add_argument("--agent")
    p.add_argument("--automation")


def scope_from(args: argparse.Namespace, *, required: bool = True) -> Scope | None:
    """The scope named positionally or by flags (not both)."""
    flags = (args.goal, args.agent, args.automation)
    if args.scope is not None:
        if any(v is not None for v in flags):
            raise InvalidInput("scope", "give the scope either as GOAL/AGENT/AUTOMATION or with --goal/--agent/--automation, not both")
        return Scope.parse(args.scope)
    goal, agent, automation = flags
    if goal is None:
        if required or agent is not None or automation is not None:
            raise InvalidInput("scope", "name a scope: GOAL[/AGENT[/AUTOMATION]] or --goal G [--agent A [--automation X]]")
        return None
    if automation is not None:
        if agent is None:
            raise InvalidInput("--agent", "an automation scope needs --agent")
        return Scope.automation(goal, agent, automation)
    return Scope.agent(goal, agent) if agent is not None else Scope.goal(goal)


def require_scope(args: argparse.Namespace) -> Scope:
    scope = scope_from(args, required=True)
    if scope is None:  # pragma: no cover - scope_from raises first
        raise RuntimeError("scope_from returned no scope")
    return scope


def register(sub: argparse._SubParsersAction) -> None:
    policy = sub.add_parser("policy", help="set, show and audit owner floors")
    psub = policy.add_subparsers(dest="policy_command", metavar="ACTION", parser_class=type(policy))
    psub.required = True

    p = psub.add_parser("set", help="set the floor at a scope (exact-revision compare-and-set)")
    _scope_args(p)
    p.add_argument("--min-interval", help="90s, 45m, 24h, 1d, 1d12h, PT24H; 0 disables")
    p.add_argument(
        "--compute", help='compute envelope block as JSON, e.g. \'{"max_turns": 40, "on_exhausted": "finish_stuck"}\'; {} removes it'
    )
    p.add_argument("--compute-file", help="read the compute block from this JSON file")
    p.add_argument("--revision", required=True, type=int, help="the revision you read (0 when no rule exists)")
    p.add_argument("--owner-ref", help="short non-sensitive id of who asked (e.g. alice); with an owner token, its principal")
    p.add_argument("--allow-reduction", action="store_true", help="authorize lowering or disabling the floor")
    p.add_argument("--note", help="why, kept with the write in policy history (one line)")
    add_common(p)
    p.set_defaults(handler=_set, access=Access.OWNER)

    p = psub.add_parser("show", help="rules as stored and the effective floor")
    _scope_args(p)
    add_common(p)
    p.set_defaults(handler=_show, reads_only=True, access=Access.READ)

    p = psub.add_parser("history", help="provenance of every policy write, newest first")
    _scope_args(p)
    p.add_argument("--limit", type=int, default=100)
    add_common(p)
    p.set_defaults(handler=_history, reads_only=True, access=Access.READ)


def _set(ctx: Context) -> int:
    args = ctx.args
    scope = require_scope(args)
    interval = parse_interval(args.min_interval, "--min-interval") if args.min_interval is not None else None
    if args.compute is not None and args.compute_file is not None:
        raise InvalidInput("--compute", "give --compute or --compute-file, not both")
    compute = None
    if args.compute is not None:
        compute = parse_compute(args.compute, "--compute")
    elif args.compute_file is not None:
        try:
            text = Path(args.compute_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput("--compute-file", f"cannot read {args.compute_file}: {exc.strerror}") from None
        except (ValueError, UnicodeDecodeError) as exc:  # a NUL in the path; a file that is not UTF-8 text
            raise InvalidInput("--compute-file", f"cannot read {args.compute_file!r}: {exc}") from None
        compute = parse_compute(text, "--compute-file")
    if interval is None and compute is None:
        raise InvalidInput("--min-interval", "give --min-interval and/or --compute (or --compute-file)")
    owner_ref, provenance = ctx.owner()
    rule = ctx.app.policies.configure(
        scope,
        min_interval=interval,
        expected_revision=args.revision,
        owner_ref=owner_ref,
        provenance=provenance,
        allow_reduction=args.allow_reduction,
        compute=compute,
        note=args.note,
    )
    state = f"floor {format_interval(rule.min_interval)}" if rule.active else "no floor"
    envelope = f", compute {json.dumps(rule.compute.doc())}" if rule.compute is not None else ""
    ctx.emit(rule_doc(rule), f"{scope}: {state}{envelope}, revision {rule.revision} (by {rule.owner_ref})")
    return EXIT_OK


def _show(ctx: Context) -> int:
    args = ctx.args
    scope = scope_from(args, required=False)
    policies = ctx.app.policies
    rules = policies.list(scope.goal_id if scope else None)
    if scope is not None and scope.agent_id is not None:
        # The scope, what it inherits and what narrows it; not its siblings.
        rules = [
            r
            for r in rules
            if r.scope.agent_id in (None, scope.agent_id)
            and (scope.automation_id is None or r.scope.automation_id in (None, scope.automation_id))
        ]
    effective = eligibility = None
    if scope is not None and scope.agent_id is not None:
        inherited = ctx.app.floors.read(scope).below[0]  # the settings view's readback: floor and eligibility
        effective, eligibility = inherited.floor, inherited.eligibility
    doc = {"rules": [rule_doc(r) for r in rules], "effective": floor_doc(effective), "eligibility": eligibility_state_doc(eligibility)}

    def text() -> str:
        out = (
            table(
                ["SCOPE", "MIN_INTERVAL", "COMPUTE", "REVISION", "OWNER", "UPDATED"],
                [
                    (
                        str(r.scope),
                        format_interval(r.min_interval) if r.active else "0 (none)",
                        json.dumps(r.compute.doc())
                        if r.compute is not None
                        else ("MALFORMED: " + r.compute_problem if r.compute_problem else None),
                        r.revision,
                        r.owner_ref,
                        iso(r.updated_at),
                    )
                    for r in rules
                ],
            )
            if rules
            else "no rules"
        )
        if effective is not None:
            made_by = ", ".join(f"{r.scope} {format_interval(r.min_interval)} r{r.revision}" for r in effective.rules)
            out += f"\neffective floor for {scope}: {format_interval(effective.floor)}" + (
                f" (from {made_by})" if made_by else " (no rule applies)"
            )
        if eligibility is not None:
            out += f"\nstate: {eligibility.status}, next eligible at {iso(eligibility.next_eligible_at) or 'now'} ({eligibility.detail})"
        return out

    ctx.emit(doc, text)
    return EXIT_OK


def _history(ctx: Context) -> int:
    args = ctx.args
    scope = scope_from(args, required=False)
    changes = ctx.app.policies.history(scope, limit=args.limit)
    ctx.emit(
        {"history": [change_doc(c) for c in changes]},
        lambda: (
            table(
                ["ID", "SCOPE", "BEFORE", "AFTER", "COMPUTE_BEFORE", "COMPUTE_AFTER", "REVISION", "OWNER", "CHANGED_AT", "REDUCTION_AUTH"],
                [
                    (
                        c.id,
                        str(c.scope),
                        format_interval(c.before) if c.before is not None else None,
                        format_interval(c.after),
                        json.dumps(c.compute_before) if c.compute_before is not None else None,
                        json.dumps(c.compute_after) if c.compute_after is not None else None,
                        c.revision,
                        c.owner_ref,
                        iso(c.changed_at),
                        "yes" if c.reduction_authorized else "no",
                    )
                    for c in changes
                ],
            )
            if changes
            else "no policy writes"
        ),
    )
    return EXIT_OK
