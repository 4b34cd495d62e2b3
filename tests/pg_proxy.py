"""A TCP proxy in front of PostgreSQL that a test can cut: every open connection is dropped (as a
network failure or a server restart drops it) and, while down, new connections are refused."""

from __future__ import annotations

import contextlib
import socket
import threading


class Proxy:
    """Forward 127.0.0.1:<port> to ``target``; ``cut()`` drops every connection, ``down`` refuses new ones."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.down = False
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self.down:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every open connection at once."""
        with self._lock:
            sockets, self._open = self._open, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self.cut()
        self._server.close()


class CountingProxy(Proxy):
    """A ``Proxy`` that counts round trips: every ReadyForQuery the server sends ends one (a simple
    query, or an extended-protocol Sync). Connect with ``sslmode=disable&gssencmode=disable`` so the
    server's stream is typed messages from its first byte."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.round_trips = 0
        self._count_lock = threading.Lock()
        super().__init__(target)

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:  # type: ignore[override]
        if src.getpeername()[1] != self.target[1]:
            Proxy._pump(src, dst)  # the client's side is only forwarded
            return
        pending = b""
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                pending += data
                while len(pending) >= 5:
                    length = int.from_bytes(pending[1:5], "big")
                    if len(pending) < 1 + length:
                        break
                    if pending[:1] == b"Z":
                        with self._count_lock:
                            self.round_trips += 1
                    pending = pending[1 + length :]
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
