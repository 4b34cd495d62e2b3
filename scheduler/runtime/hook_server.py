"""``floorgate hook serve``: a resident per-user server answering the pre-model hooks.

A hook process only forwards its command line, payload and floorgate's environment variables
here (``cli.entry``); the server runs the same decision code the in-process hook runs
(``commands.hook.answer``) over a store it keeps open, so the admission is the same atomic
reserve/confirm. It answers only its own user (SO_PEERCRED) on a socket in a private directory,
and only a hook whose code identity equals the code it loaded: after an upgrade it refuses and
exits (its service manager starts the new code), and the hook answers in-process meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import io
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Protocol, TextIO

from . import hook_wire

_BACKLOG = 64


class HookDecider(Protocol):
    """What the server answers with: the CLI's own parsing and decision code for a hook (the
    server is given it, so the runtime never imports the CLI).

    ``parse(argv)``: the hook's arguments as the in-process hook parses them; None for anything
    but a served hook's command line. ``answer(args, env, stdin, err, open_app)``: the hook's exit
    code, its stderr written to ``err``, its store opened through ``open_app(args, env)``."""

    def parse(self, argv: list[str]) -> argparse.Namespace | None: ...

    def answer(
        self,
        args: argparse.Namespace,
        env: Mapping[str, str],
        stdin: TextIO,
        err: TextIO,
        open_app: Callable[[argparse.Namespace, Mapping[str, str]], object],
    ) -> int: ...


class ServerRefused(OSError):
    """The server cannot start here (the directory is not private, another server holds it)."""


def _absolute_db(raw: str, cwd: str) -> str | None:
    """The store the calling hook names, in a form that means the same in this process; None
    when it cannot (the hook then answers in-process)."""
    if "://" not in raw:
        return raw if os.path.isabs(raw) else (os.path.join(cwd, raw) if os.path.isabs(cwd) else None)
    if raw.startswith("sqlite:"):
        return raw if raw.startswith("sqlite:////") else None
    return raw


class _Apps:
    """One open store per URL and settings, shared by the server's threads. A SQLite file that was
    replaced or removed since it was opened is opened again (a removed one then blocks)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._apps: dict[tuple[str, ...], tuple[object, object]] = {}

    def open(self, url: str, env: Mapping[str, str]):  # type: ignore[no-untyped-def]
        from ..app.root import Floorgate, Settings

        settings = Settings.resolve(env, db=url)
        key = (url, *(str(v) for v in settings.model_dump().values()))
        seen = _file_id(url)
        with self._lock:
            cached = self._apps.get(key)
            if cached is not None and cached[1] == seen:
                return cached[0]
            app = Floorgate.open(settings, create=False)  # a hook never creates a store: it blocks
            if cached is not None:
                cached[0].close()  # type: ignore[attr-defined]
            self._apps[key] = (app, seen)
            return app

    def close(self) -> None:
        with self._lock:
            for app, _ in self._apps.values():
                app.close()  # type: ignore[attr-defined]
            self._apps.clear()


def _file_id(url: str) -> object:
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:") else (url if "://" not in url else None)
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return (st.st_dev, st.st_ino)


class HookServer:
    """Accepts hook requests on ``directory``/hooks.sock until ``stop``; one thread per request."""

    def __init__(self, directory: Path, decide: HookDecider, *, identity: Callable[[], str] = hook_wire.code_identity) -> None:
        self.directory = directory
        self._decide = decide
        self._identity = identity
        self.code = identity()
        self._apps = _Apps()
        self._stopping = threading.Event()
        self._sock: socket.socket | None = None
        self._lock_fd: int | None = None
        self._count = threading.Lock()
        self.answered = 0  # hook answers sent (the served decisions, not probes or refusals)

    def bind(self) -> None:
        """Make the private directory, take its lock (one server per user) and listen."""
        try:
            os.mkdir(self.directory, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ServerRefused(f"{self.directory}: {exc.strerror}") from None
        problem = hook_wire.private_dir_problem(self.directory)
        if problem is not None:
            raise ServerRefused(f"{problem}: the hook server's directory must be yours alone (set ${hook_wire.RUNTIME_DIR_ENV})")
        fd = os.open(self.directory / hook_wire.LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ServerRefused(f"another hook server already serves {self.directory}") from None
        self._lock_fd = fd
        path = self.directory / hook_wire.SOCKET_NAME
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a dead server's socket: the lock says none is alive
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        sock.listen(_BACKLOG)
        self._sock = sock

    def serve(self) -> None:
        """Answer requests until ``stop`` (or a request from other code on disk than was loaded)."""
        sock = self._sock
        if sock is None:
            raise RuntimeError("bind the hook server before serving")
        sock.settimeout(0.5)
        try:
            while not self._stopping.is_set():
                try:
                    conn, _ = sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self._stopping.is_set():
                        break
                    raise
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()
        finally:
            self.close()

    def stop(self) -> None:
        self._stopping.set()

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.directory / hook_wire.SOCKET_NAME).unlink()
        if self._sock is not None:
            self._sock.close()
        self._apps.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _handle(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(60)
                if hook_wire.peer_uid(conn) != os.getuid():
                    return  # another user's process: no answer at all
                request = hook_wire.read_message(conn, hook_wire.MAX_REQUEST)
                answer = self._answer(request)
                conn.sendall(hook_wire.encode(answer, hook_wire.MAX_ANSWER))
                if "exit" in answer:
                    with self._count:
                        self.answered += 1
            except (OSError, ValueError):
                return  # the hook gets no answer and answers in-process

    def _answer(self, request: Mapping[str, object]) -> dict[str, object]:
        if request.get("v") != hook_wire.VERSION:
            return {"v": hook_wire.VERSION, "unserved": "another wire version"}
        if request.get("code") != self.code:
            if self._identity() != self.code:  # the code on disk changed since this server loaded it
                self.stop()
            return {"v": hook_wire.VERSION, "unserved": "another code version"}
        if request.get("probe") is True:
            return {"v": hook_wire.VERSION, "serving": True, "pid": os.getpid()}
        argv, stdin, env, cwd = request.get("argv"), request.get("stdin"), request.get("env"), request.get("cwd")
        if not (
            isinstance(argv, list)
            and all(isinstance(a, str) for a in argv)
            and isinstance(stdin, str)
            and isinstance(env, dict)
            and all(isinstance(k, str) and isinstance(v, str) and k.startswith(hook_wire.ENV_PREFIX) for k, v in env.items())
            and isinstance(cwd, str)
        ):
            return {"v": hook_wire.VERSION, "unserved": "a malformed request"}
        if any(k in env for k in ("FLOORGATE_TURN_SOCKET", "FLOORGATE_TURN_TOKEN")):
            return {"v": hook_wire.VERSION, "unserved": "a managed turn's hooks ask its broker themselves"}
        args = self._decide.parse(argv)
        if args is None:
            return {"v": hook_wire.VERSION, "unserved": "not a served hook's command line"}
        from floorgate.admission.store import ENV_URL

        url = _absolute_db(args.db or env.get(ENV_URL) or "floorgate.db", cwd)
        if url is None:
            return {"v": hook_wire.VERSION, "unserved": "a store named relative to the hook's directory"}
        args.db = url
        err = io.StringIO()
        code = self._decide.answer(args, env, io.StringIO(stdin), err, lambda a, e: self._apps.open(a.db, e))
        return {"v": hook_wire.VERSION, "exit": code, "stderr": err.getvalue()[: hook_wire.MAX_ANSWER // 2]}


@contextlib.contextmanager
def stopping_on_signals(server: HookServer) -> Iterator[None]:
    """SIGTERM and SIGINT end the server cleanly (its socket removed)."""
    saved = {s: signal.signal(s, lambda *_: server.stop()) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, handler in saved.items():
            signal.signal(s, handler)
