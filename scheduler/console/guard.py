"""The console's outer guard, an ASGI middleware in front of every route.

Before a request reaches a handler it checks, in order:

- **Host**: only the names and addresses the console is served on (``serve`` passes them, and
  ``--allowed-host`` adds more): a page fetched through another name (DNS rebinding) is refused.
- **Cross-site writes**: a POST whose ``Sec-Fetch-Site`` or ``Origin`` says another site (or another
  port on this one) sent it is refused before anything reads it, so a web page can neither sign a
  browser in nor spend anyone's failed sign-ins.
- **Body size**: ``Content-Length`` over the cap is refused unread, and a body streamed without
  one is counted as it arrives and refused when it passes the cap (413); the whole body is read,
  within a deadline (408), before the handler parses anything.

Every response carries the security headers: no framing (``frame-ancestors 'none'`` and
``X-Frame-Options``), no MIME sniffing, no referrer.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_BODY = 1024 * 1024  # bytes: the console's forms and JSON bodies are a few KiB
BODY_TIMEOUT = 30.0  # seconds to receive a whole body once its headers are in
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
CSP = (
    "default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]


def served_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` header values a console on ``host``:``port`` answers (lower case): the address
    itself, ``localhost`` for a loopback one, and each ``extra`` name (``NAME`` or ``NAME:PORT``)."""
    names = {host.lower()}
    if host in ("127.0.0.1", "::1", "localhost"):
        names |= {"127.0.0.1", "localhost", "::1"}
    hosts: set[str] = set()
    for name in names:
        bracketed = f"[{name}]" if ":" in name else name
        hosts |= {f"{bracketed}:{port}"} | ({bracketed} if port == 80 else set())
    for name in extra:
        name = name.strip().lower()
        hosts |= {name} if _has_port(name) else {f"{name}:{port}"} | ({name} if port == 80 else set())
    return frozenset(hosts)


def _has_port(name: str) -> bool:
    return name.rsplit("]", 1)[-1].count(":") == 1 if name.startswith("[") else name.count(":") == 1


def cross_site(headers: dict[str, str]) -> bool:
    """Whether a browser says another origin sent this request (``Sec-Fetch-Site``, else ``Origin``
    against ``Host``). A request without either (curl, scripts) is not a browser's cross-site one.
    ``Sec-Fetch-Site`` decides when present: under ``Referrer-Policy: no-referrer`` a browser sends
    ``Origin: null`` even for the console's own forms."""
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site not in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return False
    if origin == "null":
        return True
    return urlsplit(origin).netloc.lower() != headers.get("host", "").lower()


class ConsoleGuard:
    """The checks above around ``app`` (``allowed_hosts`` None: any Host, for an embedded console)."""

    def __init__(
        self, app: ASGIApp, *, allowed_hosts: frozenset[str] | None = None, max_body: int = MAX_BODY, body_timeout: float = BODY_TIMEOUT
    ) -> None:
        self.app, self.allowed_hosts, self.max_body, self.body_timeout = app, allowed_hosts, max_body, body_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                message = {**message, "headers": [*message.get("headers", []), *(h for h in SECURITY_HEADERS if h[0] not in present)]}
            await send(message)

        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        refused = self._oversized(headers)
        if refused is None:  # read (within the cap) even a body about to be refused: an unread one resets the answer
            body, refused = await self._read_body(receive)
        if refused is None:
            refused = self._refusal(scope, headers)
        if refused is not None:
            status, kind, text = refused
            await _answer(secured, status, kind, text)
            return
        await self.app(scope, _replay(body, receive), secured)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str, str] | None:
        if self.allowed_hosts is not None and headers.get("host", "").lower() not in self.allowed_hosts:
            return 400, "bad_host", "this console is not served under that Host name; use the address floorgate serve printed"
        if scope["method"] not in SAFE_METHODS and cross_site(headers):
            return 403, "cross_site", "a request from another site is refused; open the console's own page and submit it there"
        return None

    def _oversized(self, headers: dict[str, str]) -> tuple[int, str, str] | None:
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            return 413, "body_too_large", f"the request body is over {self.max_body} bytes"
        return None

    async def _read_body(self, receive: Receive) -> tuple[bytes, tuple[int, str, str] | None]:
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout(self.body_timeout):
                while True:
                    message = await receive()
                    if message["type"] != "http.request":
                        return b"", (400, "disconnected", "the client went away")
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    if size > self.max_body:
                        return b"", (413, "body_too_large", f"the request body is over {self.max_body} bytes")
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        return b"".join(chunks), None
        except TimeoutError:
            return b"", (408, "body_timeout", f"the request body did not arrive within {self.body_timeout:g}s")


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()  # after the body: only a disconnect is left to hear

    return replayed


async def _answer(send: Send, status: int, kind: str, message: str) -> None:
    body = json.dumps({"error": {"kind": kind, "message": message}}).encode()
    headers: list[Any] = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
