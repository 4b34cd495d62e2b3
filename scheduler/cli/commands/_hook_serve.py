"""``floorgate hook serve``: the resident hook server's command (see ``runtime.hook_server``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ...app.owner_gate import Access
from ..context import EXIT_OK, EXIT_UNAVAILABLE

if TYPE_CHECKING:
    from ...runtime.hook_server import HookDecider


def register(hsub: argparse._SubParsersAction, decide: HookDecider) -> None:
    """``hook serve``, answering with ``decide`` (the hook command's own decision code)."""
    p = hsub.add_parser(
        "serve",
        help="answer this user's prompt and tool hooks from a resident process (a socket in a private directory); "
        "hooks answer in-process whenever it is not running",
    )
    p.add_argument(
        "--runtime-dir",
        metavar="DIR",
        help="where the socket goes (default $FLOORGATE_RUNTIME_DIR, else $XDG_RUNTIME_DIR/floorgate, else /tmp/floorgate-UID)",
    )
    p.set_defaults(handler=_serve, raw_handler=True, access=Access.OPERATE, decide=decide)


def _serve(args: argparse.Namespace) -> int:
    from ...runtime import hook_wire
    from ...runtime.hook_server import HookServer, ServerRefused, stopping_on_signals

    directory = Path(args.runtime_dir).absolute() if args.runtime_dir else hook_wire.runtime_dir()
    server = HookServer(directory, args.decide)
    try:
        server.bind()
    except ServerRefused as exc:
        sys.stderr.write(f"floorgate: hook server not started: {exc}\n")
        return EXIT_UNAVAILABLE
    sys.stderr.write(f"floorgate: serving hooks at {directory / hook_wire.SOCKET_NAME}\n")
    sys.stderr.flush()
    with stopping_on_signals(server):
        server.serve()
    return EXIT_OK


def why_not_served() -> str | None:
    """Why this user's prompt and tool hooks are answered in-process now (None: they are served)."""
    from ...runtime import hook_wire

    return hook_wire.probe()
