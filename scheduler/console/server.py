"""The console's HTTP server: uvicorn (h11) with the limits a hostile local client needs.

- **Header deadline**: a connection has ``header_timeout`` seconds to send a request's headers
  (after connecting, and again after each response while it idles); then it is closed. uvicorn's
  own keep-alive timer stops at the first byte, so a slow sender would otherwise hold it forever.
- **Connection cap**: at most ``max_connections`` at once, well under the descriptor limit. A
  connection over the cap evicts the oldest one still waiting for its headers (a slow or idle
  sender), or is closed at once when every connection is busy with a request.
- **Forwarded headers** (``X-Forwarded-For``) are believed only from ``trusted_proxies``, none by
  default (uvicorn would trust 127.0.0.1, letting any local client pick its own address).
- **Accept errors** (EMFILE and the like) are logged at most once a second, one line each.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

HEADER_TIMEOUT = 10.0  # seconds for a request's headers to arrive
MAX_CONNECTIONS = 256  # open connections at once (the default descriptor limit is 1024)
BACKLOG = 128  # connections the kernel queues before the server accepts them
MAX_HEADER_BYTES = 16 * 1024  # a request line and headers larger than this are a 400

log = logging.getLogger("floorgate.serve")


def guarded_protocol(header_timeout: float, max_connections: int) -> type[H11Protocol]:
    """An h11 protocol class with the header deadline and connection cap above (one per server)."""
    waiting: OrderedDict[Guarded, None] = OrderedDict()  # connections without a request in, oldest first

    class Guarded(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                if not waiting:
                    self._drop()
                    return
                oldest, _ = waiting.popitem(last=False)
                oldest._drop()
            self._await_headers()

        def connection_lost(self, exc: Exception | None) -> None:
            self._headers_in()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            before = self.cycle
            super().handle_events()
            if self.cycle is not before:
                self._headers_in()

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self._await_headers()  # before the next pipelined request, which clears it
            super().on_response_complete()

        def _await_headers(self) -> None:
            self._headers_in()
            waiting[self] = None
            self._header_timer = self.loop.call_later(header_timeout, self._drop)

        def _headers_in(self) -> None:
            waiting.pop(self, None)
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _drop(self) -> None:
            self._headers_in()
            if not self.transport.is_closing():
                self.transport.close()

    return Guarded


class ThrottledLoopErrors:
    """An event loop exception handler logging each kind of message at most once a second (one line,
    no traceback), with how many were left out: a flood of accept errors stays a trickle."""

    def __init__(self, every: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.every, self.clock = every, clock
        self._last: dict[str, float] = {}
        self._dropped: dict[str, int] = {}

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message", "event loop error"))
        now = self.clock()
        if now - self._last.get(message, -self.every) < self.every:
            self._dropped[message] = self._dropped.get(message, 0) + 1
            return
        self._last[message] = now
        dropped = self._dropped.pop(message, 0)
        exc = context.get("exception")
        detail = f": {type(exc).__name__}: {exc}" if exc is not None else ""
        more = f" ({dropped} more like it not logged)" if dropped else ""
        log.error("%s%s%s", message, detail, more)


class GuardedServer(uvicorn.Server):
    """uvicorn's server with ``ThrottledLoopErrors`` as its loop's exception handler."""

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(ThrottledLoopErrors())
        await super().serve(sockets)


def console_server(
    app: Any,
    *,
    host: str,
    port: int,
    trusted_proxies: Sequence[str] = (),
    header_timeout: float = HEADER_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> GuardedServer:
    """A server for the console ``app`` with every limit above set explicitly."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        http=guarded_protocol(header_timeout, max_connections),
        proxy_headers=bool(trusted_proxies),
        forwarded_allow_ips=list(trusted_proxies),
        # The connection cap above is the real bound (uvicorn counts connections and tasks against
        # this); one more keeps uvicorn's 503 as a backstop that the cap never reaches by itself.
        limit_concurrency=max_connections + 1,
        backlog=BACKLOG,
        timeout_keep_alive=5,
        h11_max_incomplete_event_size=MAX_HEADER_BYTES,
    )
    return GuardedServer(config)
