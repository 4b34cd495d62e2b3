"""``floorgate demo``: a two-minute tour on a fresh SQLite file, through the real CLI."""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import sys
from pathlib import Path

from floorgate.admission import FloorgateError, InvalidInput, Scope

from ...app.owner_gate import Access
from ..context import EXIT_OK, Context, writes

DEMO_DB = "floorgate-demo.db"
_DEMO_SCOPE = Scope.parse("inbox/triage")
_DEMO_LANE = ("inbox", "triage", "morning")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help=f"set a daily floor, admit, get denied with the exact next time (uses ./{DEMO_DB})")
    p.add_argument(
        "--demo-db",
        default=DEMO_DB,
        help=f"SQLite file to recreate for the demo (default ./{DEMO_DB}); a file that is not an earlier demo's is refused",
    )
    writes(p, _demo, Access.OPERATE)  # its own store; its steps are gated as typed


def _demo(ctx: Context) -> int:
    if getattr(ctx.args, "db", None) is not None:
        raise InvalidInput(
            "--db", f"the demo never uses your store; it recreates its own SQLite file: pass --demo-db PATH (default ./{DEMO_DB})"
        )
    db = Path(ctx.args.demo_db)
    refused = not_a_demo_store(db)
    if refused is not None:
        raise InvalidInput("--demo-db", f"{db} {refused}; it is kept: pass another --demo-db PATH (or delete it yourself)")
    recreated = db.exists()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    steps = [
        (
            "An owner allows the inbox-triage agent one automatic run per day:",
            ["policy", "set", "inbox/triage", "--min-interval", "24h", "--revision", "0", "--owner-ref", "alice"],
        ),
        (
            "The morning timer fires; admission reserves the start (phase one):",
            ["admit", "--goal", "inbox", "--agent", "triage", "--automation", "morning", "--turn", "demo-1"],
        ),
        ("The host journaled its attempt, so the start is confirmed (phase two):", ["confirm", "demo-1"]),
        (
            "A backoff reset wakes it again a moment later; the floor holds (exit 3):",
            ["admit", "--goal", "inbox", "--agent", "triage", "--automation", "morning", "--turn", "demo-2"],
        ),
        ("Readback shows why, and the exact time it may run:", ["status"]),
        (
            "Before saving a 15-minute schedule for the same agent, preview what the daily floor lets through:",
            ["automation", "preview", "ci-check", "--goal", "inbox", "--agent", "triage", "--schedule", "every 15m", "--next", "6"],
        ),
    ]
    if ctx.json:  # each step's own JSON document, with what it shows and its exit code
        done = []
        for say, argv in steps:
            argv = [*argv, "--db", str(db), "--json"]
            buffer, errors = io.StringIO(), io.StringIO()
            code = ctx.run(argv, out=buffer, err=errors)
            done.append({"say": say, "argv": ["floorgate", *argv], "exit": code, "output": json.loads(buffer.getvalue())})
        ctx.emit({"db": os.path.abspath(db), "recreated": recreated, "steps": done}, "")
        return EXIT_OK
    out = sys.stdout
    if recreated:
        out.write(f"(recreating the earlier demo's store {os.path.abspath(db)})\n")
    for say, argv in steps:
        argv = [*argv, "--db", str(db)]
        out.write(f"\n# {say}\n$ floorgate {shlex.join(argv)}\n")
        out.flush()
        code = ctx.run(argv)
        out.write(f"(exit {code})\n")
    out.write(f"\nThe demo database is {os.path.abspath(db)}; try `floorgate --db {db} policy history`.\n")
    return EXIT_OK


def not_a_demo_store(path: Path) -> str | None:
    """Why the demo must not delete ``path`` (None: nothing there, or only what an earlier demo
    wrote: the inbox/triage floor, the morning starts, no automation or owner)."""
    from ...app.root import Floorgate, Settings

    if not path.exists():
        return None
    if path.is_dir():
        return "is a directory"
    try:
        app = Floorgate.open(Settings(db=str(path)), create=False)
    except FloorgateError:
        return "is not a floorgate store"
    try:
        if app.automations.list()[0]:
            return "is a floorgate store with automations, not the demo's"
        if app.principals.list():
            return "is a floorgate store with owners, not the demo's"
        if any(rule.scope != _DEMO_SCOPE for rule in app.policies.list()):
            return "is a floorgate store with floors the demo never sets"
        starts = app.admission.starts(limit=3)
        if len(starts) > 2 or any((r.goal_id, r.agent_id, r.automation_id) != _DEMO_LANE for r in starts):
            return "is a floorgate store with starts the demo never makes"
    except FloorgateError as exc:
        return f"is a floorgate store the demo cannot read ({exc})"
    finally:
        app.close()
    return None
