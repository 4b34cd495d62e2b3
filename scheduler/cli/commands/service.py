"""``floorgate service install|uninstall [--user] [--serve] [--hooks]``: systemd units for ``floorgate run`` (and ``serve``, ``hook serve``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from floorgate.admission.store import ENV_URL, redact_url

from ...app.owner_gate import Access
from ...app.service_unit import Role, UnitPlan, enable_steps, install, uninstall, unit_dir
from ..context import EXIT_OK, Context, actions, add_common


def register(sub: argparse._SubParsersAction) -> None:
    ssub = actions(sub, "service", "keep 'floorgate run' (and 'serve') running across reboots: systemd units")
    for name, helptext in (
        ("install", "write a systemd unit for 'floorgate run' (restart on failure, the store named) and say how to enable it"),
        ("uninstall", "remove the units 'service install' wrote (never one it did not write)"),
    ):
        p = ssub.add_parser(name, help=helptext)
        p.add_argument("--user", action="store_true", help="a user unit (~/.config/systemd/user) instead of a system one")
        p.add_argument("--serve", action="store_true", help="also a unit for 'floorgate serve' (the owner console)")
        p.add_argument("--hooks", action="store_true", help="also a unit for 'floorgate hook serve' (the hooks' resident answerer)")
        p.add_argument("--unit-dir", metavar="DIR", help="write the units here instead of systemd's directory")
        if name == "install":
            p.add_argument("--state-dir", help="where per-turn logs go (default $FLOORGATE_STATE_DIR or ./floorgate-state), made absolute")
        add_common(p)
        # An owner write (never from inside a managed turn), for a store that exists (a unit for none is a typo).
        p.set_defaults(handler=_install if name == "install" else _uninstall, access=Access.OWNER, reads_only=True)


def _db(args: argparse.Namespace) -> str:
    db = getattr(args, "db", None) or os.environ.get(ENV_URL) or "floorgate.db"
    return db if "://" in db else str(Path(db).absolute())


def _directory(args: argparse.Namespace) -> Path:
    return Path(args.unit_dir).absolute() if args.unit_dir else unit_dir(args.user, os.environ)


def _roles(args: argparse.Namespace) -> tuple[Role, ...]:
    return (Role.RUN, *((Role.SERVE,) if args.serve else ()), *((Role.HOOKS,) if args.hooks else ()))


def _install(ctx: Context) -> int:
    a = ctx.args
    state = a.state_dir or os.environ.get("FLOORGATE_STATE_DIR") or "floorgate-state"
    plan = UnitPlan(
        directory=_directory(a),
        user_mode=a.user,
        python=sys.executable,
        db=_db(a),
        state_dir=Path(state).absolute(),
        working_dir=Path.cwd(),
        roles=_roles(a),
    )
    done = install(plan)
    names = [o.path.name for o in done]
    steps = enable_steps(plan.directory, a.user, names)
    lines = [f"{'wrote' if o.changed else 'unchanged'} {o.path}" for o in done]
    lines += [f"store: {redact_url(plan.db)}", "enable and start:", *(f"  {s}" for s in steps)]
    ctx.emit(
        {"units": [{"path": str(o.path), "changed": o.changed} for o in done], "enable": steps},
        "\n".join(lines),
    )
    return EXIT_OK


def _uninstall(ctx: Context) -> int:
    a = ctx.args
    done = uninstall(_directory(a), _roles(a))
    ctl = "systemctl --user" if a.user else "sudo systemctl"
    removed = [o for o in done if o.changed]
    lines = [f"removed {o.path}" for o in removed] or ["no floorgate unit to remove"]
    if removed:
        lines.insert(0, f"first stop them: {ctl} disable --now {' '.join(o.path.name for o in removed)}")
        lines.append(f"then: {ctl} daemon-reload")
    ctx.emit({"removed": [str(o.path) for o in removed]}, "\n".join(lines))
    return EXIT_OK
