"""``floorgate automation add|list|show|edit|pause|resume|remove|preview|poke``."""

from __future__ import annotations

import argparse
import os
from datetime import timedelta

from pydantic import ValidationError

from admission import Admission, AutomationSpec, Automations, CommandHost, InvalidInput, Journal, TickLog
from admission.clock import SystemClock, iso, read_clock
from admission.intervals import format_interval
from hosts import Schedule

from ..automation_status import automation_status
from ..cli import EXIT_OK, Context, add_common
from ..present import automation_doc, command_text, status_doc, table, tick_doc, turn_doc
from ..preview import preview
from ..wake import BackoffPolicy
from .timers import add_crontab_user, register_actions, service


def _host_args(p: argparse.ArgumentParser, *, required: bool) -> None:
    p.add_argument("--schedule", required=required, help="RRULE fragment or friendly form ('daily at 09:00 Europe/Berlin')")
    p.add_argument("--timeout", type=float, help="seconds before the turn's process group is killed (default 600)")
    p.add_argument("--cwd", help="working directory of the command")
    p.add_argument("--env", action="append", metavar="NAME", help="environment variable to pass through (repeatable)")
    p.add_argument("--model", help="model the host is configured to use (checked against the envelope's model_allowlist)")
    p.add_argument("--backend", help="model backend/provider the host uses (checked against backend_allowlist)")
    p.add_argument("--meter", choices=["none", "claude-stream-json", "codex-json", "jsonl"], help="how to read the usage the host prints (default none)")
    p.add_argument("--overlap", choices=["skip", "allow"], help="while a turn runs, skip further ticks (default) or allow them")
    p.add_argument(
        "--timer",
        choices=["apscheduler", "crontab", "external"],
        help="who keeps the timer: 'floorgate run' (default), your crontab, or an external app (guard it with the hook)",
    )
    add_crontab_user(p)
    p.set_defaults(command_argv=None)  # filled from "-- PROGRAM ARGS..." by the CLI


def register(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("automation", help="scheduled automations (command host)")
    asub = top.add_subparsers(dest="automation_command", metavar="ACTION", parser_class=type(top))
    asub.required = True

    p = asub.add_parser(
        "add",
        help="add a command-host automation: add X --goal G --agent A --schedule S -- PROGRAM ARGS...",
        usage="floorgate automation add AUTOMATION --goal G --agent A --schedule S [options] -- PROGRAM [ARGS...]",
    )
    p.add_argument("automation")
    p.add_argument("--goal", required=True)
    p.add_argument("--agent", required=True)
    _host_args(p, required=True)
    add_common(p)
    p.set_defaults(handler=_add)

    p = asub.add_parser("edit", help="change an automation's schedule, command or settings")
    p.add_argument("automation")
    _host_args(p, required=False)
    add_common(p)
    p.set_defaults(handler=_edit)

    p = asub.add_parser("list", help="every automation")
    p.add_argument("--goal")
    add_common(p)
    p.set_defaults(handler=_list)

    p = asub.add_parser("show", help="one automation: spec, state, next fires, recent ticks and turns")
    p.add_argument("automation")
    p.add_argument("--next", type=int, default=5, dest="count")
    p.add_argument("--ticks", type=int, default=10)
    add_common(p)
    p.set_defaults(handler=_show)

    for name, helptext in (("pause", "stop ticking (owner)"), ("resume", "tick again"), ("remove", "delete the automation (its starts are kept)")):
        p = asub.add_parser(name, help=helptext)
        p.add_argument("automation")
        add_crontab_user(p)
        if name == "pause":
            p.add_argument("--note", help="why (shown in status)")
        add_common(p)
        p.set_defaults(handler={"pause": _pause, "resume": _resume, "remove": _remove}[name])

    p = asub.add_parser("preview", help="next fire times and whether today's floors admit each (writes nothing)")
    p.add_argument("automation", help="a saved automation, or the id to preview with --goal/--agent/--schedule")
    p.add_argument("--next", type=int, default=10, dest="count")
    p.add_argument("--goal")
    p.add_argument("--agent")
    p.add_argument("--schedule")
    add_common(p)
    p.set_defaults(handler=_preview)

    register_actions(asub)

    p = asub.add_parser("poke", help="new work arrived: reset the wake cadence to the short backoff (never before the floor)")
    p.add_argument("automation")
    add_common(p)
    p.set_defaults(handler=_poke)


def _argv(args: argparse.Namespace) -> list[str]:
    return list(args.command_argv or [])


def _schedule_text(text: str) -> str:
    return Schedule.parse(text, now=read_clock(SystemClock())).canonical()


def _host(args: argparse.Namespace, base: CommandHost | None, timer: str) -> CommandHost | None:
    argv = _argv(args)
    if base is None and not argv:
        if timer == "external":
            return None
        raise InvalidInput("argv", "give the command after --, e.g. -- ./triage.sh --inbox")
    # A new command runs where it was added unless told otherwise: timers (cron, floorgate run)
    # start elsewhere, and a relative ./script.sh must still be found.
    values = base.model_dump() if base is not None else {"timeout_seconds": 600.0, "cwd": os.getcwd()}
    if argv:
        values["argv"] = tuple(argv)
    if args.timeout is not None:
        values["timeout_seconds"] = args.timeout
    if args.cwd is not None:
        values["cwd"] = os.path.abspath(args.cwd)
    if args.env is not None:
        values["env_allow"] = tuple(args.env)
    try:
        return CommandHost.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = {"timeout_seconds": "--timeout", "argv": "argv", "cwd": "--cwd", "env_allow": "--env"}.get(
            str(first["loc"][0]) if first["loc"] else "", "host"
        )
        raise InvalidInput(field, first["msg"]) from None


def _add(ctx: Context) -> int:
    a = ctx.args
    timer = a.timer or "apscheduler"
    spec = AutomationSpec(
        goal_id=a.goal,
        agent_id=a.agent,
        schedule=_schedule_text(a.schedule),
        host=_host(a, None, timer),
        model=a.model,
        overlap=a.overlap or "skip",
        timer=timer,
        backend=a.backend,
        meter=a.meter or "none",
    )
    automation = Automations(ctx.store).add(a.automation, spec)
    binding = service(ctx).apply(automation)
    automation = Automations(ctx.store).get(a.automation)
    held = f"\nHELD: {binding.hold_reason}" if binding.hold_reason else ""
    ctx.emit(
        automation_doc(automation),
        f"added {automation.automation_id} ({spec.goal_id}/{spec.agent_id}, {timer} timer)\n{spec.schedule}{held}",
    )
    return EXIT_OK


def _edit(ctx: Context) -> int:
    a = ctx.args
    repo = Automations(ctx.store)
    current = repo.get(a.automation)
    timer = a.timer or current.spec.timer
    spec = AutomationSpec(
        goal_id=current.spec.goal_id,
        agent_id=current.spec.agent_id,
        schedule=_schedule_text(a.schedule) if a.schedule else current.spec.schedule,
        host=_host(a, current.spec.host, timer),
        model=a.model if a.model is not None else current.spec.model,
        overlap=a.overlap or current.spec.overlap,
        timer=timer,
        backend=a.backend if a.backend is not None else current.spec.backend,
        meter=a.meter or current.spec.meter,
    )
    automation = repo.edit(a.automation, spec)
    if current.spec.timer == "crontab" and timer != "crontab":
        service(ctx).crontab(a.automation).remove(a.automation)
    service(ctx).apply(automation)
    automation = repo.get(a.automation)
    ctx.emit(automation_doc(automation), f"edited {automation.automation_id} (revision {automation.revision})")
    return EXIT_OK


def _list(ctx: Context) -> int:
    items = Automations(ctx.store).list(ctx.args.goal)
    ctx.emit(
        {"automations": [automation_doc(x) for x in items]},
        lambda: table(
            ["AUTOMATION", "LANE", "STATE", "SCHEDULE", "COMMAND"],
            [
                (x.automation_id, f"{x.spec.goal_id}/{x.spec.agent_id}", x.state, x.spec.schedule.replace("\n", " "), command_text(x.spec))
                for x in items
            ],
        ) if items else "no automations",
    )
    return EXIT_OK


def _show(ctx: Context) -> int:
    a = ctx.args
    store = ctx.store
    repo = Automations(store)
    automation = repo.get(a.automation)
    now = read_clock(SystemClock())
    ticklog = TickLog(store)
    journal = Journal(store)
    status = automation_status(automation, admission=Admission(store), automations=repo, journal=journal, ticklog=ticklog, now=now)
    schedule = Schedule.parse(automation.spec.schedule)
    if automation.spec.timer != "apscheduler" and status.binding is not None and status.binding.desired is not None:
        schedule = Schedule.parse(status.binding.desired)  # what that host actually fires (floored)
    fires = schedule.occurrences(a.count, after=now)
    ticks = ticklog.recent(automation.automation_id, a.ticks)
    turns = journal.recent(automation.automation_id, 5)
    counters = ticklog.counters(automation.automation_id)
    doc = {
        **status_doc(status),
        "next_fire_times": [{"local": f.isoformat(), "utc": iso(f)} for f in fires],
        "recent_ticks": [tick_doc(t) for t in ticks],
        "recent_turns": [turn_doc(t) for t in turns],
        "counters": counters,
    }

    def text() -> str:
        spec = automation.spec
        lines = [
            f"automation {automation.automation_id}  ({spec.goal_id}/{spec.agent_id}, revision {automation.revision})",
            f"  state:          {status.state} ({status.detail})",
            f"  schedule:       {spec.schedule.replace(chr(10), ' ')}",
            f"  command:        {command_text(spec)}"
            + (f"  (timeout {spec.host.timeout_seconds:g}s, overlap {spec.overlap})" if spec.host else ""),
            f"  timer:          {spec.timer}",
            f"  floor:          {format_interval(status.eligibility.floor.floor) if status.eligibility.floor else '-'}",
            f"  next eligible:  {iso(status.eligibility.next_eligible_at) or '-'}",
            f"  next timer:     {iso(status.next_fire_at) or '-'}",
            "  next fire times (schedule):",
            *[f"    {f.isoformat()}   {iso(f)}" for f in fires],
            "  recent ticks (nominal -> actual: decision reason):",
            *[f"    {iso(t.nominal_at)} -> {iso(t.actual_at)}: {t.decision} {t.reason} {t.turn_id or ''}" for t in ticks],
            "  recent turns:",
            *[f"    {t.turn_id} attempt {t.attempt} {t.kind} {iso(t.started_at)} {t.verdict.status + ' ' + t.verdict.stop_reason if t.verdict else t.phase}" for t in turns],
            "  counters: " + (", ".join(f"{d}/{r}={n}" for d, rs in sorted(counters.items()) for r, n in sorted(rs.items())) or "none"),
        ]
        return "\n".join(lines)

    ctx.emit(doc, text)
    return EXIT_OK


def _pause(ctx: Context) -> int:
    automation = Automations(ctx.store).set_state(ctx.args.automation, "paused", ctx.args.note)
    ctx.emit(automation_doc(automation), f"paused {automation.automation_id}")
    return EXIT_OK


def _resume(ctx: Context) -> int:
    automation = Automations(ctx.store).set_state(ctx.args.automation, "active", None)
    ctx.emit(automation_doc(automation), f"resumed {automation.automation_id}")
    return EXIT_OK


def _remove(ctx: Context) -> int:
    repo = Automations(ctx.store)
    automation = repo.get(ctx.args.automation)
    if automation.spec.timer == "crontab":
        service(ctx).crontab(automation.automation_id).remove(automation.automation_id)
    repo.remove(ctx.args.automation)
    from admission import TimerBindings

    TimerBindings(ctx.store).remove(ctx.args.automation)
    ctx.emit({"removed": ctx.args.automation}, f"removed {ctx.args.automation} (its start records are kept)")
    return EXIT_OK


def _preview(ctx: Context) -> int:
    a = ctx.args
    if a.count < 1 or a.count > 1000:
        raise InvalidInput("--next", "ask for 1..1000 fire times")
    now = read_clock(SystemClock())
    if a.schedule is not None:
        if a.goal is None or a.agent is None:
            raise InvalidInput("--goal", "previewing an unsaved schedule needs --goal and --agent")
        goal, agent, schedule = a.goal, a.agent, Schedule.parse(a.schedule, now=now)
    else:
        automation = Automations(ctx.store).get(a.automation)
        goal, agent, schedule = automation.spec.goal_id, automation.spec.agent_id, Schedule.parse(automation.spec.schedule)
    result = preview(Admission(ctx.store), schedule, goal=goal, agent=agent, automation=a.automation, count=a.count, now=now)
    doc = {
        "automation": a.automation,
        "schedule": schedule.canonical(),
        "floor_seconds": result.floor_seconds,
        "lane_status": result.status,
        "fires": [
            {"local": r.fire_at.isoformat(), "utc": iso(r.fire_at), "admitted": r.admitted, "eligible_at": iso(r.eligible_at)}
            for r in result.rows
        ],
    }
    runs = sum(r.admitted for r in result.rows)
    floor = format_interval(timedelta(seconds=result.floor_seconds))
    ctx.emit(
        doc,
        lambda: f"{schedule.canonical().replace(chr(10), ' ')}   floor {floor}: {runs} of {len(result.rows)} fires would run\n"
        + table(
            ["LOCAL", "UTC", "WOULD_RUN", "ELIGIBLE_AT"],
            [(r.fire_at.isoformat(), iso(r.fire_at), "yes" if r.admitted else "no (floor)", iso(r.eligible_at)) for r in result.rows],
        ),
    )
    return EXIT_OK


def _poke(ctx: Context) -> int:
    repo = Automations(ctx.store)
    automation = repo.get(ctx.args.automation)
    now = read_clock(SystemClock())
    state = BackoffPolicy().reset(automation.automation_id, now)
    repo.save_wake_state(state)
    ctx.emit(
        {"automation": automation.automation_id, "backoff_wake_at": iso(state.backoff_wake_at)},
        f"poked {automation.automation_id}: next wake no earlier than {iso(state.backoff_wake_at)} (and never before the floor)",
    )
    return EXIT_OK
