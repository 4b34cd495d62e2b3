"""A ``floorgate serve`` for the console benchmarks: started on a free loopback port, asked over one
kept-alive connection (as a dashboard or a script would), stopped when the block ends."""

from __future__ import annotations

import http.client
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Served:
    """The running server's process id and a ``get`` over its connection."""

    pid: int
    conn: http.client.HTTPConnection
    headers: dict[str, str]

    def get(self, path: str) -> bytes:
        """The body of ``GET path`` (a status other than 200 is a bench bug)."""
        self.conn.request("GET", path, headers=self.headers)
        answer = self.conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise SystemExit(f"bench bug: {path} answered {answer.status}: {body[:200]!r}")
        return body


@contextmanager
def serving(url: str, token: str, *, timeout: float, start_within: float, poll: float) -> Iterator[Served]:
    """``floorgate serve`` on ``url``, once it answers ``/api/whoami`` with ``token`` (given
    ``start_within`` seconds, asked every ``poll``); ``timeout``: the connection's, per request."""
    port = free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "floorgate", "--db", url, "serve", "--port", str(port), "--deliver-every", "0"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        served = Served(serve.pid, conn, {"Authorization": f"Bearer {token}"})
        deadline = time.monotonic() + start_within
        while True:
            try:
                served.get("/api/whoami")
                break
            except (ConnectionError, OSError):
                if time.monotonic() > deadline:
                    raise SystemExit("floorgate serve did not start") from None
                conn.close()
                time.sleep(poll)
        yield served
        conn.close()
    finally:
        serve.terminate()
        serve.wait(timeout=30)
