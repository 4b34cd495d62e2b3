"""``floorgate serve``: the owner console (HTTP API, pages, metrics) on loopback by default.

It also delivers the event outbox every ``--deliver-every`` (as a running ``floorgate run`` does):
with the console up, a host that dies is still reported (``host_lost``) and asks still reach their
owners. Several deliverers on one store are safe: each delivery is claimed before it is sent."""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import signal
import socket
import sys
import threading

from floorgate.admission import InvalidInput
from floorgate.admission.intervals import parse_interval

from ...app.owner_gate import Access
from ..context import EXIT_OK, Context, add_common

LOOPBACK = ("127.0.0.1", "::1", "localhost")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve the owner console: JSON API, settings, dashboard, owner asks, /metrics")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: loopback only)")
    p.add_argument("--port", type=int, default=8650, help="port (default 8650)")
    p.add_argument("--secure-cookies", action="store_true", help="mark the session cookie Secure (serve behind TLS)")
    p.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="believe X-Forwarded-For only from this proxy address (repeatable; default: from nobody)",
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also answer this Host name (NAME or NAME:PORT, repeatable), e.g. the name a proxy serves it under",
    )
    p.add_argument("--header-timeout", default="10s", help="close a connection whose request headers take longer (default 10s)")
    p.add_argument("--max-connections", type=int, default=256, help="open connections at once (default 256)")
    p.add_argument("--deliver-every", default="15s", help="deliver due events (webhooks) this often, e.g. 15s; 0 turns it off")
    add_common(p)
    p.set_defaults(handler=_serve, reads_only=True, access=Access.OPERATE)  # signs its own owners in


def _serve(ctx: Context) -> int:
    from ...console import create_app
    from ...console.guard import served_hosts
    from ...console.server import console_server

    a = ctx.args
    if not 0 < a.port < 65536:
        raise InvalidInput("--port", "give 1..65535")
    every = parse_interval(a.deliver_every, "--deliver-every").total_seconds()
    header_timeout = parse_interval(a.header_timeout, "--header-timeout").total_seconds()
    if header_timeout <= 0:
        raise InvalidInput("--header-timeout", "give a positive interval, e.g. 10s")
    if not 1 <= a.max_connections <= 100_000:
        raise InvalidInput("--max-connections", "give 1..100000")
    for proxy in a.trusted_proxy:
        try:
            ipaddress.ip_address(proxy)
        except ValueError:
            raise InvalidInput("--trusted-proxy", f"{proxy!r} is not an IP address; give the proxy's address") from None
    for name in a.allowed_host:
        if not name.strip() or any(c in name for c in "/ \t@"):
            raise InvalidInput("--allowed-host", f"{name!r} is not a host name; give NAME or NAME:PORT")
    ctx.app.notify  # noqa: B018 -- its address ranges parse now, or the console does not start
    sock = listen(a.host, a.port)  # before saying the console is up: a port in use is the caller's to fix
    try:
        app = create_app(ctx.app, secure_cookies=a.secure_cookies, allowed_hosts=served_hosts(a.host, a.port, a.allowed_host))
    except BaseException:
        sock.close()
        raise
    if a.host not in LOOPBACK:
        sys.stderr.write(f"floorgate: warning: serving on {a.host}, not loopback: put TLS in front and pass --secure-cookies\n")
    sys.stderr.write(
        f"floorgate: console on http://{a.host}:{a.port}/ (store {ctx.store.safe_url}); sign in with a token from 'floorgate owner add'\n"
    )
    stop = threading.Event()
    if every > 0:
        threading.Thread(target=_deliver_loop, args=(ctx, every, stop), name="floorgate-notify", daemon=True).start()
    # uvicorn stops gracefully on SIGINT/SIGTERM, then raises the signal again for the handler it
    # found: this one records it, so the console ends as 'floorgate run' does (a line, exit 0), not
    # killed by the signal's default action (exit 143, nothing said).
    stopped_by: list[int] = []
    saved = {sig: signal.signal(sig, lambda signum, _frame: stopped_by.append(signum)) for sig in _STOP_SIGNALS}
    try:
        console_server(
            app, host=a.host, port=a.port, trusted_proxies=a.trusted_proxy, header_timeout=header_timeout,
            max_connections=a.max_connections,
        ).run(sockets=[sock])  # fmt: skip
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        stop.set()
        sock.close()
    if stopped_by:
        sys.stderr.write(f"floorgate: console stopped ({signal.Signals(stopped_by[0]).name})\n")
    return EXIT_OK


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (as uvicorn binds one), or ``InvalidInput`` naming the
    flag to change when the port is taken or the address is not this machine's."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise InvalidInput("--port", f"{port} is in use on {host}; pick another") from None
        if exc.errno == errno.EACCES:
            raise InvalidInput("--port", f"{port} on {host} needs privileges this process lacks; pick one above 1023") from None
        raise InvalidInput("--host", f"cannot listen on {host}:{port} ({exc.strerror}); give an address of this machine") from None
    except BaseException:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _deliver_loop(ctx: Context, every: float, stop: threading.Event) -> None:
    # Its own thread and store connection: a slow receiver never delays a request.
    while not stop.wait(every):
        try:
            ctx.app.notify.deliver()
        except Exception as exc:  # logged; the next round tries again, nothing is lost
            logging.getLogger("floorgate.serve").warning("delivering events failed: %s: %s", type(exc).__name__, exc)
