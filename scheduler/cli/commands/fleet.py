"""``floorgate apply -f FILE [--dry-run] [--prune] [--allow-reduction]`` and ``floorgate export [-o FILE]``."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

from floorgate.admission import InvalidInput, Provenance, Scope

from ...agents import _safe_files
from ...app.fleet import Action, FleetService, Plan, Step
from ...app.owner_gate import Access
from ...app.rule_writer import Writer
from ...views.present_limits import unadmittable_warnings
from ..context import EXIT_INVALID, EXIT_OK, Context, reads, writes

_MARK = {Action.CREATE: "+", Action.CHANGE: "~", Action.UNCHANGED: "=", Action.REMOVE: "-"}
MAX_FILE = 4 * 1024 * 1024


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("apply", help="make the store match a fleet file (automations, floors, webhooks); --dry-run shows the diff")
    p.add_argument("-f", "--file", required=True, metavar="FILE", help="the fleet file (TOML; 'floorgate export' writes one)")
    p.add_argument("--dry-run", action="store_true", help="print what would change and write nothing")
    p.add_argument("--prune", action="store_true", help="also remove what the store holds and the file does not describe")
    p.add_argument("--allow-reduction", action="store_true", help="authorize the file's floor reductions (lower, disabled, looser)")
    p.add_argument("--owner-ref", help="short non-sensitive id of who asked (e.g. alice); with an owner token, its principal")
    writes(p, _apply, Access.OWNER)

    p = sub.add_parser("export", help="today's automations, floors and webhooks as a fleet file (what apply reads)")
    p.add_argument("-o", "--output", metavar="FILE", help="write it here (private, atomically) instead of printing it")
    reads(p, _export)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as exc:
        raise InvalidInput("--file", f"cannot read {path}: {exc.strerror}") from None
    if len(data) > MAX_FILE:
        raise InvalidInput("--file", f"{path} is larger than {MAX_FILE} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("--file", f"{path} is not UTF-8 text") from None


def _line(step: Step) -> str:
    head = f"  {_MARK[step.action]} {step.kind} {step.name} ({step.action.value})"
    return head + "".join(f"\n      {c}" for c in step.changes)


def _summary(plan: Plan) -> str:
    return (
        f"{plan.count(Action.CREATE)} to create, {plan.count(Action.CHANGE)} to change, "
        f"{plan.count(Action.UNCHANGED)} unchanged, {plan.count(Action.REMOVE)} to remove"
    )


def _apply(ctx: Context) -> int:
    a = ctx.args
    source = a.file
    text = _read(source)
    new = not ctx.has_store()
    with contextlib.ExitStack() as stack:
        # No store here yet: planned against an empty one, so a dry run or a refused file creates none.
        fleet = FleetService(stack.enter_context(ctx.scratch_app()) if new else ctx.app)
        plan = fleet.plan(text, base_dir=Path(source).parent, prune=a.prune, allow_reduction=a.allow_reduction)
        shown = None
        if plan.problems and a.dry_run and not a.allow_reduction:
            # A dry run whose only problems are reductions still shows its plan (the reductions named below it).
            relaxed = FleetService(fleet.fg).plan(text, base_dir=Path(source).parent, prune=a.prune, allow_reduction=True)
            shown = relaxed if not relaxed.problems else None
    if plan.problems:
        for problem in plan.problems:
            sys.stderr.write(f"floorgate: error: {problem.text(source)}\n")
        ctx.emit(
            {"error": {"kind": "invalid_input", "message": f"{len(plan.problems)} problem(s); nothing applied"},
             "problems": [{"line": p.line, "object": p.what, "message": p.message} for p in plan.problems],
             **({"steps": [st.doc() for st in shown.steps]} if shown is not None else {})},
            "\n".join(
                [*([f"{source}: {_summary(shown)}", *(_line(st) for st in shown.steps)] if shown is not None else []),
                 f"nothing applied: {len(plan.problems)} problem(s) in {source}"]
            ),
        )  # fmt: skip
        return EXIT_INVALID
    lines = [_line(s) for s in plan.steps]
    if a.dry_run:
        where = [f"no store at {ctx.missing} yet: applying creates it"] if new else []
        ctx.emit(
            {"dry_run": True, "new_store": new, "steps": [s.doc() for s in plan.steps]},
            "\n".join([f"{source}: {_summary(plan)}", *lines, *where, "dry run: nothing written"]),
        )
        return EXIT_OK
    if new:  # the store made now: planned again over it (what the apply compares and sets against)
        fleet = FleetService(ctx.app)
        plan = fleet.plan(text, base_dir=Path(source).parent, prune=a.prune, allow_reduction=a.allow_reduction)
    owner_ref, provenance = ("apply", Provenance.ASSERTED)
    if any(s.needs_owner for s in plan.writes):
        owner_ref, provenance = ctx.owner()
    done = fleet.apply(plan, Writer(owner_ref, provenance, a.allow_reduction))
    for step in done:  # a limit no start can pass until the owner acts, as policy set warns of it
        if step.kind == "floor" and step.action is not Action.REMOVE:
            for line in unadmittable_warnings(ctx.app.floors.unadmittable(Scope.parse(step.name))):
                sys.stderr.write(line + "\n")
    secrets = fleet.webhook_secrets()
    tail = [f"webhook {url}: signing secret {secret} (shown only now)" for url, secret in secrets.items()]
    ctx.emit(
        {"dry_run": False, "steps": [s.doc() for s in plan.steps], "applied": len(done), "webhook_secrets": secrets},
        "\n".join([f"{source}: {_summary(plan)}", *lines, f"applied {len(done)} change(s)", *tail]),
    )
    return EXIT_OK


def _export(ctx: Context) -> int:
    text = FleetService(ctx.app).export()
    out = ctx.args.output
    if out is None:
        ctx.emit({"fleet": text}, text.rstrip("\n"))
        return EXIT_OK
    path = Path(out).absolute()
    _safe_files.replace(path.parent, path, text.encode("utf-8"), "--output", make_dirs=False)
    ctx.emit({"written": str(path)}, f"wrote {path} (apply it with 'floorgate apply -f {out} --dry-run' first)")
    return EXIT_OK
