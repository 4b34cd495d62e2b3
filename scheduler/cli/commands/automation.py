"""``floorgate automation add|list|show|edit|pause|resume|remove|preview|backfill|trigger`` (``poke``: trigger)."""

from __future__ import annotations

import argparse
import os
import sys

from pydantic import ValidationError

from floorgate.admission import AutomationSpec, CatchUp, CommandHost, InvalidInput, MeterKind, Overlap, TimerKind, WhenDenied
from floorgate.admission.automations import DEFAULT_HOLD_AFTER, MAX_CATCH_UP_WINDOW, MAX_HOLD_AFTER
from floorgate.admission.clock import parse_instant, read_clock
from floorgate.admission.intervals import parse_duration, parse_interval
from floorgate.hosts.registry import capabilities

from ...app.automation_spec import check_program, parse_debounce
from ...app.automations import Changed, parse_schedule, vet
from ...app.owner_gate import Access
from ...views.present import (
    automation_doc,
    command_text,
    readback_doc,
    table,
)
from ...views.present_automation import (
    backfill_doc,
    backfill_text,
    detail_doc,
    detail_text,
    preview_doc,
    preview_text,
    running_text,
    switched_doc,
    switched_text,
    trigger_doc,
    trigger_text,
)
from ..context import EXIT_OK, Context, actions, reads, writes
from .timers import add_crontab_user, add_timer_arg, register_actions

DEFAULT_TIMER = TimerKind.APSCHEDULER.value


def _host_args(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--schedule", required=required, help="RRULE fragment or friendly form ('daily at 09:00 Europe/Berlin')")
    p.add_argument(
        "--timeout",
        help="how long a turn may run before its process group is killed, e.g. 10m (add: default 10m; edit: kept unless given)",
    )
    p.add_argument("--cwd", help="working directory of the command")
    p.add_argument("--env", action="append", metavar="NAME", help="environment variable to pass through (repeatable)")
    p.add_argument("--model", help="model the host is configured to use (checked against the envelope's model_allowlist)")
    p.add_argument("--backend", help="model backend/provider the host uses (checked against backend_allowlist)")
    p.add_argument("--meter", choices=[m.value for m in MeterKind], help="how to read the usage the host prints (default none)")
    p.add_argument("--overlap", choices=[o.value for o in Overlap], help="while a turn runs, skip further ticks (default) or allow them")
    p.add_argument("--hold-after", metavar="N", help=f"hold after N consecutive failed turns (default {DEFAULT_HOLD_AFTER}; 0: never)")
    p.add_argument(
        "--catch-up",
        choices=[c.value for c in CatchUp],
        help="after downtime: skip missed fires, or run the latest (default: the deployment's)",
    )
    p.add_argument(
        "--catch-up-window", metavar="DURATION", help="how old a missed fire may be to catch up, 0..7d (default: the deployment's)"
    )
    p.add_argument(
        "--when-denied",
        choices=[w.value for w in WhenDenied],
        help="a scheduled fire inside a floor: wait for the floor's end (default), or skip to the next fire the floors admit",
    )
    p.add_argument(
        "--debounce",
        metavar="QUIET[,MAX_WAIT]",
        help="a burst of triggers wakes it once, QUIET after the last, at most MAX_WAIT after the first, e.g. 30s,5m (none: at once)",
    )
    add_timer_arg(p)
    add_crontab_user(p)
    p.set_defaults(command_argv=None)  # filled from "-- PROGRAM ARGS..." by the CLI


def register(sub: argparse._SubParsersAction) -> None:
    asub = actions(sub, "automation", "scheduled automations (command host)")

    p = asub.add_parser(
        "add",
        help="add a command-host automation: add X --goal G --agent A --schedule S -- PROGRAM ARGS...",
        usage="floorgate automation add AUTOMATION --goal G --agent A --schedule S [options] -- PROGRAM [ARGS...]",
    )
    p.add_argument("automation")
    p.add_argument("--goal", required=True)
    p.add_argument("--agent", required=True)
    _host_args(p, required=True)
    writes(p, _add, Access.OWNER)

    p = asub.add_parser("edit", help="change an automation's schedule, command or settings")
    p.add_argument("automation")
    _host_args(p, required=False)
    writes(p, _edit, Access.OWNER, existing=True)

    p = asub.add_parser("list", help="every automation")
    p.add_argument("--goal")
    reads(p, _list)

    p = asub.add_parser("show", help="one automation: spec, state, next fires, recent ticks and turns")
    p.add_argument("automation")
    p.add_argument("--next", type=int, default=5, dest="count")
    p.add_argument("--ticks", type=int, default=10)
    reads(p, _show)

    for name, helptext in (
        ("pause", "stop ticking (owner)"),
        ("resume", "tick again"),
        ("remove", "delete the automation (its starts are kept)"),
    ):
        p = asub.add_parser(name, help=helptext)
        p.add_argument("automation")
        add_crontab_user(p)
        if name == "pause":
            p.add_argument("--note", help="why (shown in status)")
        writes(p, {"pause": _pause, "resume": _resume, "remove": _remove}[name], Access.OWNER, existing=True)

    p = asub.add_parser("preview", help="next fire times and whether today's floors admit each (writes nothing)")
    p.add_argument("automation", help="a saved automation, or the id to preview with --goal/--agent/--schedule")
    p.add_argument("--next", type=int, default=10, dest="count")
    p.add_argument("--goal")
    p.add_argument("--agent")
    p.add_argument("--schedule")
    p.add_argument("--when-denied", choices=[w.value for w in WhenDenied], help="preview an unsaved schedule under this phase policy")
    add_timer_arg(p)
    reads(p, _preview)

    register_actions(asub)

    p = asub.add_parser(
        "backfill",
        help="run the fires of a past range one after another, each passing admission (--dry-run: say which, write nothing)",
        usage="floorgate automation backfill AUTOMATION --from T1 --to T2 [--dry-run]",
    )
    p.add_argument("automation")
    p.add_argument("--from", dest="start", required=True, metavar="T1", help="ISO 8601 time with an offset, e.g. 2026-12-01T00:00:00Z")
    p.add_argument("--to", dest="end", required=True, metavar="T2", help="ISO 8601 time with an offset, not in the future")
    p.add_argument("--dry-run", action="store_true", help="print which fires the limits would admit; write nothing")
    writes(p, _backfill, Access.OPERATE, existing=True)  # every fire passes admission: it cannot loosen a limit

    p = asub.add_parser(
        "trigger",
        aliases=["poke"],
        help="new work arrived: wake it once after its debounce (floors and budgets still decide; poke is an alias)",
        usage="floorgate automation trigger AUTOMATION [--key K] [--id ID]",
    )
    p.add_argument("automation")
    p.add_argument("--key", help="what the work is about (shown in the event), one line")
    p.add_argument("--id", dest="trigger_id", help="your id for this trigger: the same id twice is one trigger")
    writes(p, _trigger, Access.OPERATE, existing=True)  # an automatic start: never before the floor


def _argv(args: argparse.Namespace) -> list[str]:
    return list(args.command_argv or [])


def _host(args: argparse.Namespace, base: CommandHost | None, timer: str) -> CommandHost | None:
    argv = _argv(args)
    if base is None and not argv:
        if not capabilities(timer).launches_turns:
            return None  # the app launches it: floorgate has no command to run
        raise InvalidInput("argv", "give the command after --, e.g. -- ./triage.sh --inbox")
    # A new command runs where it was added unless told otherwise: timers (cron, floorgate run)
    # start elsewhere, and a relative ./script.sh must still be found.
    values = base.model_dump() if base is not None else {"timeout_seconds": 600.0, "cwd": os.getcwd()}
    if argv:
        values["argv"] = tuple(argv)
    if args.timeout is not None:
        values["timeout_seconds"] = parse_duration(args.timeout, "--timeout").total_seconds()
    if args.cwd is not None:
        values["cwd"] = os.path.abspath(args.cwd)
    if args.env is not None:
        values["env_allow"] = tuple(args.env)
    try:
        host = CommandHost.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = {"timeout_seconds": "--timeout", "argv": "argv", "cwd": "--cwd", "env_allow": "--env"}.get(
            str(first["loc"][0]) if first["loc"] else "", "host"
        )
        raise InvalidInput(field, first["msg"]) from None
    if argv or args.cwd is not None:
        check_program(host)
    return host


def _add(ctx: Context) -> int:
    a = ctx.args
    schedule = parse_schedule(a.schedule, ctx.clock)  # before the store is opened: bad input creates none
    timer = a.timer or DEFAULT_TIMER
    spec = AutomationSpec(
        goal_id=a.goal,
        agent_id=a.agent,
        schedule=schedule,
        host=_host(a, None, timer),
        model=a.model,
        overlap=a.overlap or "skip",
        timer=timer,
        backend=a.backend,
        meter=a.meter or "none",
        **_policy_fields(a, None),
        when_denied=a.when_denied or WhenDenied.WAIT,
    )
    vet(spec, read_clock(ctx.clock))  # refused here, before the store opens: a refused spec creates no store
    done = ctx.app.automations.add(a.automation, spec)
    held = f"\nHELD: {done.binding.hold_reason}" if done.binding is not None and done.binding.hold_reason else ""
    _warn(done.warnings)
    ctx.emit(
        {**automation_doc(done.automation), "readback": readback_doc(done.readback), "warnings": list(done.warnings)},
        f"added {done.automation.automation_id} ({spec.goal_id}/{spec.agent_id}, {timer} timer)\n{spec.schedule}{held}{_not_armed(done)}",
    )
    return EXIT_OK


def _policy_fields(a: argparse.Namespace, current: AutomationSpec | None) -> dict:  # type: ignore[type-arg]
    """``--hold-after``, ``--catch-up`` and ``--catch-up-window``, each checked on its own (one
    line naming the flag); an omitted one keeps the current value (on add: the default)."""
    hold_after = current.hold_after if current is not None else None
    if a.hold_after is not None:
        text = a.hold_after.strip()
        if not text.isascii() or not text.isdigit() or int(text) > MAX_HOLD_AFTER:
            raise InvalidInput("--hold-after", f"{a.hold_after!r} is not a whole number 0..{MAX_HOLD_AFTER} (0: never hold)")
        hold_after = int(text)
    window = current.catch_up_window if current is not None else None
    if a.catch_up_window is not None:
        window = parse_interval(a.catch_up_window, "--catch-up-window")
        if window > MAX_CATCH_UP_WINDOW:
            raise InvalidInput("--catch-up-window", f"{a.catch_up_window!r} is longer than 7d; give 0..7d")
    catch_up = CatchUp(a.catch_up) if a.catch_up is not None else (current.catch_up if current is not None else None)
    if catch_up is CatchUp.LATEST and window is not None and not window:
        raise InvalidInput("--catch-up-window", "catch-up latest needs a window above 0 (or --catch-up skip)")
    debounce = current.debounce if current is not None else None
    if a.debounce is not None:
        debounce = parse_debounce(a.debounce, "--debounce")
    return {"hold_after": hold_after, "catch_up": catch_up, "catch_up_window": window, "debounce": debounce}


def _not_armed(done: Changed) -> str:
    """The line that says an add or edit left the timer unarmed because the apply failed."""
    binding = done.binding
    if binding is None or not binding.apply_error:
        return ""
    name = done.automation.automation_id
    return f"\nNOT ARMED: {binding.apply_error}; fix that, then 'floorgate automation apply {name}'"


def _warn(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        sys.stderr.write(f"floorgate: warning: {warning}\n")


def _edit(ctx: Context) -> int:
    a = ctx.args
    service = ctx.app.automations
    current = service.repo.get(a.automation)
    timer = a.timer or current.spec.timer
    spec = AutomationSpec(
        goal_id=current.spec.goal_id,
        agent_id=current.spec.agent_id,
        schedule=service.parse_schedule(a.schedule) if a.schedule else current.spec.schedule,
        host=_host(a, current.spec.host, timer),
        model=a.model if a.model is not None else current.spec.model,
        overlap=a.overlap or current.spec.overlap,
        timer=timer,
        backend=a.backend if a.backend is not None else current.spec.backend,
        meter=a.meter or current.spec.meter,
        **_policy_fields(a, current.spec),
        external_id=current.spec.external_id,
        labels=current.spec.labels,
        when_denied=a.when_denied or current.spec.when_denied,
    )
    done = service.edit(a.automation, spec)
    _warn(done.warnings)
    name, revision = done.automation.automation_id, done.automation.revision
    text = (
        f"edited {name} (revision {revision}){_not_armed(done)}"
        if done.changed
        else f"{name} has these settings already (revision {revision}); nothing changed"
    )
    doc = {**automation_doc(done.automation), "readback": readback_doc(done.readback), "warnings": list(done.warnings)}
    ctx.emit({**doc, "changed": done.changed}, text)
    return EXIT_OK


def _list(ctx: Context) -> int:
    items, broken = ctx.app.automations.list(ctx.args.goal)
    rows: list[tuple[str, str | None, str, str | None, str]] = [
        (x.automation_id, f"{x.spec.goal_id}/{x.spec.agent_id}", x.state.value, x.spec.schedule.replace("\n", " "), command_text(x.spec))
        for x in items
    ]
    rows += [(aid, None, "unreadable", None, why) for aid, why in sorted(broken.items())]
    ctx.emit(
        {
            "automations": [automation_doc(x) for x in items],
            "unreadable": [{"automation": aid, "reason": why} for aid, why in sorted(broken.items())],
        },
        lambda: table(["AUTOMATION", "LANE", "STATE", "SCHEDULE", "COMMAND"], rows) if rows else "no automations",
    )
    return EXIT_OK


def _show(ctx: Context) -> int:
    detail = ctx.app.automations.show(ctx.args.automation, fires=ctx.args.count, ticks=ctx.args.ticks)
    ctx.emit(detail_doc(detail), lambda: detail_text(detail))
    return EXIT_OK


def _pause(ctx: Context) -> int:
    switched = ctx.app.automations.pause(ctx.args.automation, ctx.args.note)
    ctx.emit(switched_doc(switched), switched_text(switched, pause=True))
    return EXIT_OK


def _resume(ctx: Context) -> int:
    switched = ctx.app.automations.resume(ctx.args.automation)
    ctx.emit(switched_doc(switched), switched_text(switched, pause=False))
    return EXIT_OK


def _remove(ctx: Context) -> int:
    removed = ctx.app.automations.remove(ctx.args.automation)
    by_hand = f"\nORPHANED TIMER: {removed.delete_by_hand}" if removed.delete_by_hand is not None else ""
    ctx.emit(
        {"removed": ctx.args.automation, "delete_by_hand": removed.delete_by_hand, "running": list(removed.running)},
        f"removed {ctx.args.automation} (its start records are kept){by_hand}{running_text(removed.running)}",
    )
    return EXIT_OK


def _preview(ctx: Context) -> int:
    a = ctx.args
    service = ctx.app.automations
    if a.schedule is not None:
        if a.goal is None or a.agent is None:
            raise InvalidInput("--goal", "previewing an unsaved schedule needs --goal and --agent")
        result = service.preview_new(
            a.automation,
            goal=a.goal,
            agent=a.agent,
            schedule=a.schedule,
            timer=a.timer or DEFAULT_TIMER,
            count=a.count,
            when_denied=WhenDenied(a.when_denied or WhenDenied.WAIT),
        )
    else:
        if a.goal is not None or a.agent is not None or a.timer is not None or a.when_denied is not None:
            raise InvalidInput(
                "--schedule",
                "--goal, --agent, --timer and --when-denied preview an unsaved schedule; give --schedule too, or only the saved automation's id",
            )
        result = service.preview(a.automation, count=a.count)
    ctx.emit(preview_doc(result), lambda: preview_text(result))
    return EXIT_OK


def _trigger(ctx: Context) -> int:
    a = ctx.args
    answer = ctx.app.automations.trigger(a.automation, key=a.key, trigger_id=a.trigger_id)
    ctx.emit(trigger_doc(answer), trigger_text(answer))
    return EXIT_OK


def _backfill(ctx: Context) -> int:
    a = ctx.args
    start, end = parse_instant(a.start, "--from"), parse_instant(a.end, "--to")
    report = ctx.app.backfill.run(a.automation, start, end, dry_run=a.dry_run)
    ctx.emit(backfill_doc(report), lambda: backfill_text(report))
    return EXIT_OK
