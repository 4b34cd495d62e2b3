"""``floorgate policy set|show|history``: owner floors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from floorgate.admission import InvalidInput, Scope, parse_compute
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval, parse_interval
from floorgate.admission.limits import LimitsChange, parse_alerts
from floorgate.admission.usage import Price
from floorgate.admission.windows import check_max_starts, format_usd, micros_to_usd, parse_tokens, parse_usd, parse_window

from ...app.owner_gate import Access
from ...app.rule_writer import Writer
from ...views.present import change_doc, eligibility_state_doc, floor_doc, floor_text, past_second, rule_doc, table
from ...views.present_limits import alert_texts, limit_text, limits_brief, limits_doc, next_eligible_text, unadmittable_warnings
from ..context import EXIT_OK, Context, actions, listed, reads, revision, writes


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
    psub = actions(sub, "policy", "set, show and audit owner floors, limits and prices")

    p = psub.add_parser("set", help="set the floor, compute block and limits at a scope (exact-revision compare-and-set)")
    _scope_args(p)
    p.add_argument("--min-interval", help="90s, 45m, 24h, 1d, 1d12h, PT24H; 0 disables")
    p.add_argument(
        "--compute", help='compute envelope block as JSON, e.g. \'{"max_turns": 40, "on_exhausted": "finish_stuck"}\'; {} removes it'
    )
    p.add_argument("--compute-file", help="read the compute block from this JSON file")
    p.add_argument("--revision", required=True, type=revision, help="the revision you read (0 when no rule exists)")
    p.add_argument("--owner-ref", help="short non-sensitive id of who asked (e.g. alice); with an owner token, its principal")
    p.add_argument(
        "--allow-reduction", action="store_true", help="authorize a loosening: a lower or disabled floor, a looser compute bound or limit"
    )
    p.add_argument("--note", help="why, kept with the write in policy history (one line)")
    _limit_args(p)
    writes(p, _set, Access.OWNER)

    p = psub.add_parser("price", help="set the price per million tokens of a model (for usage whose cost is not reported)")
    p.add_argument("model")
    p.add_argument("--usd-per-mtok", required=True, help="US dollars per million tokens (at most 6 decimals); 0 removes the price")
    p.add_argument("--revision", required=True, type=revision, help="the revision you read in 'policy prices' (0 when none is set)")
    p.add_argument("--owner-ref", help="short non-sensitive id of who asked; with an owner token, its principal")
    p.add_argument("--allow-reduction", action="store_true", help="authorize lowering or removing a price")
    writes(p, _price, Access.OWNER)

    p = psub.add_parser("prices", help="the owner-set prices per million tokens, by model")
    reads(p, _prices)

    p = psub.add_parser("show", help="rules as stored, the effective floor and the limits binding the lane")
    _scope_args(p)
    reads(p, _show)

    p = psub.add_parser("history", help="provenance of every policy write, newest first")
    _scope_args(p)
    p.add_argument("--limit", type=listed, default=100)
    reads(p, _history)


def _limit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-starts", metavar="N", help="at most N starts per --per window (automatic and manual); 0 removes it")
    p.add_argument(
        "--per",
        metavar="WINDOW",
        action="append",
        help="the window of --max-starts/--budget-*: 1d, 12h, day@Europe/Berlin, week@Zone, month@Zone",
    )
    p.add_argument("--budget-tokens", metavar="N", help="tokens per --per window (2M, 500k, 120000); 0 removes it")
    p.add_argument("--budget-usd", metavar="X", help="US dollars per --per window (at most 6 decimals); 0 removes it")
    p.add_argument("--estimate-tokens", metavar="N", help="tokens a turn holds at admission when nothing better is known; 0 removes it")
    p.add_argument(
        "--across", choices=["agents", "none"], help="goal rules: 'agents' makes the goal's limits one series for all its agents"
    )
    p.add_argument(
        "--alert-at",
        metavar="P,P",
        help="percentages of each count and budget that raise budget_threshold once per window (default 50,80,100)",
    )


def limits_change(args: argparse.Namespace) -> LimitsChange | None:
    """The limit flags as one change (None: none given); bad input raises ``InvalidInput``."""
    if args.per is not None and len(args.per) > 1:
        raise InvalidInput("--per", "give one --per a write; a count and a budget with different windows are two writes")
    count: int | None = None
    if args.max_starts is not None:
        count = check_max_starts(args.max_starts, allow_zero=True)
    change = LimitsChange(
        max_starts=count,
        budget_tokens=parse_tokens(args.budget_tokens, "--budget-tokens", allow_zero=True) if args.budget_tokens is not None else None,
        budget_usd=parse_usd(args.budget_usd, "--budget-usd", allow_zero=True) if args.budget_usd is not None else None,
        estimate_tokens=parse_tokens(args.estimate_tokens, "--estimate-tokens", allow_zero=True)
        if args.estimate_tokens is not None
        else None,
        per=parse_window(args.per[0], "--per") if args.per else None,
        across_agents=None if args.across is None else args.across == "agents",
        alert_at=parse_alerts(args.alert_at) if args.alert_at is not None else None,
    )
    return None if change.is_empty() else change


def _set(ctx: Context) -> int:
    args = ctx.args
    scope = require_scope(args)
    limits = limits_change(args)
    if limits is not None:
        limits.check(scope)
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
    if interval is None and compute is None and limits is None:
        raise InvalidInput(
            "--min-interval", "give --min-interval, --compute (or --compute-file) and/or a limit (--max-starts, --budget-tokens, ...)"
        )
    writer = Writer(*ctx.owner(), args.allow_reduction)
    stored = ctx.app.policies.get(scope) if limits is not None and (limits.budget_tokens or limits.budget_usd) else None
    carried = limits.carried(stored.limits) if limits is not None and stored is not None else None
    rule = writer.configure(ctx.app.policies, scope, args.revision, min_interval=interval, compute=compute, note=args.note, limits=limits)
    if interval is not None:  # a new floor may move a lane's time of day: say so, as 'automation add' does
        for warning in ctx.app.automations.phase_warnings(scope):
            sys.stderr.write(f"floorgate: warning: {warning}\n")
    if carried is not None:
        sys.stderr.write(f"floorgate: warning: {scope}: {carried}\n")
    if limits is not None and limits.alert_at is not None and not rule.limits.counts():
        sys.stderr.write(f"floorgate: warning: {scope}: alerts are raised by this rule's counts and budgets, and it has none yet\n")
    if limits is not None:  # a limit no start can pass until the owner acts: said now, not found later
        for line in unadmittable_warnings(ctx.app.floors.unadmittable(scope)):
            sys.stderr.write(line + "\n")
    state = f"floor {format_interval(rule.min_interval)}" if rule.active else "no floor"
    envelope = f", compute {json.dumps(rule.compute.doc())}" if rule.compute is not None else ""
    bounds = f", limits {rule.limits.summary()}" if not rule.limits.is_empty() else ""
    ctx.emit(rule_doc(rule), f"{scope}: {state}{envelope}{bounds}, revision {rule.revision} (by {rule.owner_ref})")
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
    effective = eligibility = lane = None
    if scope is not None and scope.agent_id is not None:
        inherited = ctx.app.floors.read(scope).below[0]  # the settings view's readback: floor, eligibility, limits
        effective, eligibility, lane = inherited.floor, inherited.eligibility, inherited.limits
    states = lane.states if lane is not None else []
    doc = {
        "rules": [rule_doc(r) for r in rules],
        "effective": floor_doc(effective),
        "eligibility": eligibility_state_doc(eligibility),
        "limits": limits_doc(lane),
        "estimate_tokens": lane.estimate_tokens if lane is not None else None,
    }

    def text() -> str:
        out = (
            table(
                ["SCOPE", "MIN_INTERVAL", "COMPUTE", "LIMITS", "REVISION", "OWNER", "UPDATED"],
                [
                    (
                        str(r.scope),
                        format_interval(r.min_interval) if r.active else "0 (none)",
                        json.dumps(r.compute.doc())
                        if r.compute is not None
                        else ("MALFORMED: " + r.compute_problem if r.compute_problem else None),
                        r.limits.summary() if not r.limits.is_empty() else None,
                        r.revision,
                        r.owner_ref,
                        past_second(r.updated_at),
                    )
                    for r in rules
                ],
            )
            if rules
            else "no rules"
        )
        for x in states:
            out += f"\nlimit {x.limit.describe()}: {limit_text(x)}"
        for alert in alert_texts(lane):
            out += f"\nalert {alert}"
        if effective is not None:
            made_by = ", ".join(
                f"{r.scope} {format_interval(r.min_interval)}{' across agents' if r.across_agents else ''} r{r.revision}"
                for r in effective.rules
            )
            if made_by:
                out += f"\neffective floor for {scope}: {floor_text(effective)} (from {made_by})"
            elif states:  # a rule with limits alone: no floor, and the limits above apply
                out += f"\neffective floor for {scope}: none (no rule sets a floor); its limits apply"
            else:
                out += f"\neffective floor for {scope}: {format_interval(effective.floor)} (no rule applies)"
        if eligibility is not None:
            shown = next_eligible_text(eligibility)
            at = f"at {shown}" if eligibility.next_eligible_at is not None else shown  # never "at now", "at not by waiting"
            out += f"\nstate: {eligibility.status}, next eligible {at} ({eligibility.detail})"
        elif scope is not None and any(r.limits.counts() for r in rules):
            # A count or budget is used by lanes: its use (a goal-wide one's shared use too) is read at one.
            out += f"\nused, held and left are read per lane: policy show {scope}/AGENT (a limit across agents shows its shared use there)"
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
                [
                    "ID",
                    "SCOPE",
                    "BEFORE",
                    "AFTER",
                    "COMPUTE_BEFORE",
                    "COMPUTE_AFTER",
                    "LIMITS_BEFORE",
                    "LIMITS_AFTER",
                    "REVISION",
                    "OWNER",
                    "CHANGED_AT",
                    "REDUCTION_AUTH",
                    "NOTE",
                ],
                [
                    (
                        c.id,
                        str(c.scope),
                        format_interval(c.before) if c.before is not None else None,
                        format_interval(c.after),
                        json.dumps(c.compute_before) if c.compute_before is not None else None,
                        json.dumps(c.compute_after) if c.compute_after is not None else None,
                        limits_brief(c.limits_before),
                        limits_brief(c.limits_after),
                        c.revision,
                        c.owner_ref,
                        past_second(c.changed_at),
                        "yes" if c.reduction_authorized else "no",
                        c.note,
                    )
                    for c in changes
                ],
            )
            if changes
            else "no policy writes"
        ),
    )
    return EXIT_OK


def _price(ctx: Context) -> int:
    args = ctx.args
    amount = parse_usd(args.usd_per_mtok, "--usd-per-mtok", allow_zero=True)
    owner_ref, _ = ctx.owner()
    price = ctx.app.prices.set(
        args.model, amount or None, expected_revision=args.revision, owner_ref=owner_ref, allow_reduction=args.allow_reduction
    )
    shown = (
        f"{format_usd(micros_to_usd(price.usd_per_mtok_micros))} per million tokens"
        if price.usd_per_mtok_micros is not None
        else "no price"
    )
    ctx.emit(price_doc(price), f"{price.model}: {shown}, revision {price.revision} (by {price.owner_ref})")
    return EXIT_OK


def price_doc(price: Price) -> dict[str, Any]:
    micros = price.usd_per_mtok_micros
    return {
        "model": price.model,
        "usd_per_mtok": format(micros_to_usd(micros), "f") if micros is not None else None,
        "revision": price.revision,
        "owner_ref": price.owner_ref,
        "updated_at": iso(price.updated_at),
    }


def _prices(ctx: Context) -> int:
    prices = ctx.app.prices.list()
    ctx.emit(
        {"prices": [price_doc(p) for p in prices]},
        lambda: (
            table(
                ["MODEL", "USD_PER_MTOK", "REVISION", "OWNER", "UPDATED"],
                [
                    (
                        p.model,
                        format_usd(micros_to_usd(p.usd_per_mtok_micros)) if p.usd_per_mtok_micros is not None else "none",
                        p.revision,
                        p.owner_ref,
                        past_second(p.updated_at),
                    )
                    for p in prices
                ],
            )
            if prices
            else "no prices set (usage whose cost is not reported cannot count against a USD budget)"
        ),
    )
    return EXIT_OK
