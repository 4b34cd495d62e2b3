"""``floorgate automation desired|observed|apply|ack|diff``: desired versus observed timers."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from floorgate.admission import Automation, TimerBinding
from floorgate.admission.clock import iso
from floorgate.admission.intervals import parse_interval
from floorgate.hosts import TimerKind

from ...app.owner_gate import Access
from ...app.timers import TimerService
from ...views.present import binding_doc
from ..context import EXIT_DENIED, EXIT_OK, EXIT_UNAVAILABLE, Context, add_common


def service(ctx: Context) -> TimerService:
    """The timer service of this command's application (flags over environment, in ``Settings``)."""
    svc: TimerService = ctx.app.timers
    return svc


def add_timer_arg(p: argparse.ArgumentParser) -> None:
    """``--timer``, its choices the registered ``TimerKind`` values (the default is chosen by the caller)."""
    p.add_argument(
        "--timer",
        choices=[kind.value for kind in TimerKind],
        help="who keeps the timer: 'floorgate run' (default), your crontab, or an external app (guard it with the hook)",
    )


def add_crontab_user(p: argparse.ArgumentParser) -> None:
    p.add_argument("--crontab-user", help="manage this user's crontab (default $FLOORGATE_CRONTAB_USER, else your own)")
    p.add_argument("--state-dir", help="state directory the crontab lines pass to 'turn run'")


def register_actions(asub: argparse._SubParsersAction) -> None:
    specs = [
        ("desired", "the floor-compatible schedule the host should arm (or why it is held), and the guarantee", _desired),
        ("apply", "arm the desired schedule on the host, read it back, ACK if it matches", _apply),
        ("observed", "read the host back now and record what it armed", _observed),
        ("ack", "acknowledge on a fresh readback from the host (exit 3 when rejected)", _ack),
        ("diff", "desired versus observed, compared by meaning", _diff),
    ]
    for name, helptext, handler in specs:
        p = asub.add_parser(name, help=helptext)
        p.add_argument("automation")
        add_crontab_user(p)
        if name in ("observed", "ack"):
            p.add_argument("--current-rrule", help="external timers: the app's current schedule, as read from the app now")
            p.add_argument("--unavailable", action="store_true", help="external timers: the app cannot be read (clears earlier facts)")
            p.add_argument(
                "--wait", default="10s", help="apscheduler timers: how long to wait for the running host's readback (default 10s)"
            )
        add_common(p)
        p.set_defaults(handler=handler, reads_only=name == "diff", access=Access.READ if name == "diff" else Access.OPERATE)


def _read_kwargs(ctx: Context) -> dict:  # type: ignore[type-arg]
    a = ctx.args
    return {"current_rrule": a.current_rrule, "unavailable": a.unavailable, "wait": parse_interval(a.wait, "--wait").total_seconds()}


def _text(binding_doc_: dict) -> str:  # type: ignore[type-arg]
    d = binding_doc_
    lines = [f"automation {d['automation']} ({d['timer']} timer, guarantee: {d['guarantee']})"]
    lines.append(
        f"  desired:   {d['desired'].replace(chr(10), ' ') if d['desired'] else 'HELD: ' + str(d['hold_reason'])}"
        + (" (raised to the floor)" if d["desired_raised"] else "")
    )
    lines.append(f"  applied:   {d['applied_at'] or '-'}" + (f"  apply failed: {d['apply_error']}" if d["apply_error"] else ""))
    lines.append(
        f"  observed:  {d['observed_state'] or 'never read'} {(d['observed'] or '').replace(chr(10), ' ')} (read {d['observed_at'] or '-'})"
    )
    if d["ack_state"] == "superseded":
        lines.append(
            f"  ack:       superseded: the ACK of {d['acked_at']} no longer holds (the host read back something else at {d['observed_at']})"
        )
    else:
        lines.append(f"  ack:       {d['ack_state']}" + (f" at {d['acked_at']}" if d["acked_at"] else ""))
    return "\n".join(lines)


def _emit_bound(ctx: Context, bind: Callable[[TimerService, Automation], TimerBinding]) -> TimerBinding:
    """``bind`` the named automation's timer (desire or apply) and emit its binding and guarantee."""
    svc = service(ctx)
    automation = ctx.app.automations.get(ctx.args.automation)
    binding = bind(svc, automation)
    doc = binding_doc(binding, svc.guarantee(automation, binding))
    ctx.emit(doc, lambda: _text(doc))
    return binding


def _desired(ctx: Context) -> int:
    _emit_bound(ctx, TimerService.desire)
    return EXIT_OK


def _apply(ctx: Context) -> int:
    binding = _emit_bound(ctx, TimerService.apply)
    return EXIT_OK if binding.desired is not None and binding.apply_error is None else EXIT_DENIED


def _observed(ctx: Context) -> int:
    svc = service(ctx)
    automation = ctx.app.automations.get(ctx.args.automation)
    observed = svc.observe(automation, **_read_kwargs(ctx))
    binding, obs = observed.binding, observed.observation
    fresh = None if obs is None else {"state": obs.state, "text": obs.text, "read_at": iso(obs.read_at), "detail": obs.detail}
    unanswered = obs is not None and obs.state == "unavailable"
    if binding is None:
        ctx.emit(
            {"automation": automation.automation_id, "binding": None, "observation": fresh},
            f"{automation.automation_id}: no timer binding yet (run 'floorgate automation apply')",
        )
        return EXIT_UNAVAILABLE if unanswered else EXIT_OK
    doc = {**binding_doc(binding, svc.guarantee(automation, binding)), "observation": fresh}
    now_line = f"  read now:  {obs.state}" + (f" ({obs.detail})" if obs.detail else "") if obs is not None else None
    ctx.emit(doc, lambda: "\n".join([_text(doc)] + ([now_line] if now_line else [])))
    return EXIT_UNAVAILABLE if unanswered else EXIT_OK


def _ack(ctx: Context) -> int:
    svc = service(ctx)
    automation = ctx.app.automations.get(ctx.args.automation)
    result = svc.ack(automation, **_read_kwargs(ctx))
    obs = result.observation
    doc = {
        "automation": automation.automation_id,
        "accepted": result.accepted,
        "read_requested": result.asked_host,
        "reason": result.reason,
        "observation": None if obs is None else {"state": obs.state, "text": obs.text, "read_at": iso(obs.read_at), "detail": obs.detail},
    }
    if result.accepted:
        verdict = "ACK accepted"
    elif result.asked_host:
        verdict = "ACK rejected (nothing acknowledged; only the read request to the running host was recorded)"
    else:
        verdict = "ACK rejected (nothing recorded)"
    ctx.emit(doc, f"{automation.automation_id}: {verdict}: {result.reason}")
    return EXIT_OK if result.accepted else EXIT_DENIED


def _diff(ctx: Context) -> int:
    svc = service(ctx)
    automation = ctx.app.automations.get(ctx.args.automation)
    doc = svc.diff(automation)

    def text() -> str:
        lines = [f"{doc['automation']}: {'desired and observed match' if doc['match'] else 'desired and observed DIFFER'}"]
        lines.append(f"  desired:  {(doc.get('desired') or 'none').replace(chr(10), ' ')}")
        where = " (read now from the host)" if doc.get("read_live") else ""
        detail = f": {doc['observed_detail']}" if doc.get("observed_detail") else ""
        lines.append(f"  observed: {(doc.get('observed') or doc.get('observed_state') or 'none').replace(chr(10), ' ')}{detail}{where}")
        for key in ("desired_next", "observed_next"):
            if doc.get(key):
                lines.append(f"  {key.replace('_', ' ')}: {', '.join(doc[key])}")
        return "\n".join(lines)

    ctx.emit(doc, text)
    return EXIT_OK if doc["match"] else EXIT_DENIED
