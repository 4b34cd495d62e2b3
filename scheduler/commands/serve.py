"""``floorgate serve``: the owner console (HTTP API, pages, metrics) on loopback by default."""

from __future__ import annotations

import argparse
import sys

from admission import InvalidInput

from ..cli import EXIT_OK, Context, add_common

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the owner console: JSON API, settings, dashboard, asks inbox, /metrics")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=8650, help="port (default 8650)")
    p.add_argument("--secure-cookies", action="store_true", help="mark the session cookie Secure (serve behind TLS)")
    add_common(p)
    p.set_defaults(handler=_serve, reads_only=True)


def _serve(ctx: Context) -> int:
    import uvicorn

    from ..console import create_app

    a = ctx.args
    if not 0 < a.port < 65536:
        raise InvalidInput("--port", "give 1..65535")
    app = create_app(ctx.app, secure_cookies=a.secure_cookies)
    if a.host not in LOOPBACK:
        sys.stderr.write(f"floorgate: warning: serving on {a.host}, not loopback: put TLS in front and pass --secure-cookies\n")
    sys.stderr.write(
        f"floorgate: console on http://{a.host}:{a.port}/ (store {ctx.store.safe_url}); sign in with a token from 'floorgate owner add'\n"
    )
    uvicorn.run(app, host=a.host, port=a.port, log_level="warning")
    return EXIT_OK
