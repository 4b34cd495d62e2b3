"""Spawning a host command in its own process group, capping its log, killing the group."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO

_PR_SET_PDEATHSIG = 1
_libc = None
if sys.platform.startswith("linux"):
    try:
        _libc = ctypes.CDLL(None, use_errno=True)
        _prctl = _libc.prctl
    except (OSError, AttributeError):  # pragma: no cover - non-glibc systems
        _libc = None


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the host dies (even by SIGKILL), so does the turn.
    if _libc is not None:
        _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def spawn(argv: list[str], *, cwd: str | None, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start ``argv`` as the leader of a new session (its own process group); output goes to a pipe."""
    return _popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL)


def _popen(argv: list[str], *, cwd: str | None, env: dict[str, str], stdin: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent if _libc is not None else None,
        close_fds=True,
    )


# The held child waits for one line on its stdin (a pipe from the runner), then execs the program
# (same pid, same session) with stdin from /dev/null, as ``spawn`` gives it. End of file (the
# runner died, or abandoned it) or any other line: it exits, its program unrun.
_HOLD = 'IFS= read -r go && [ "$go" = go ] || exit 125; exec </dev/null; exec "$@"'
HELD_EXIT = 125  # what a held child that was never released exits with


class Held:
    """A host process spawned but stopped before its program runs (see ``spawn_held``)."""

    def __init__(self, proc: subprocess.Popen[bytes], go: int) -> None:
        self.proc = proc
        self._go: int | None = go

    def release(self) -> None:
        """Let the program run (once). A child already gone is left to ``wait`` to report."""
        if self._go is None:
            return
        with contextlib.suppress(OSError):
            os.write(self._go, b"go\n")
        self.abandon()

    def abandon(self) -> None:
        """Close the pipe without releasing: the child exits with ``HELD_EXIT``, its program unrun."""
        if self._go is not None:
            with contextlib.suppress(OSError):
                os.close(self._go)
            self._go = None


def spawn_held(argv: list[str], *, cwd: str | None, env: dict[str, str]) -> Held:
    """Spawn ``argv`` like ``spawn``, but held: its pid exists (so the runner can record it with
    the turn's confirmation in one commit) and its program runs only after ``Held.release``.

    The program is looked up first (``OSError`` as ``subprocess.Popen`` raises it: missing, not
    executable), so a turn that cannot start is known before anything is spawned."""
    _check_program(argv[0], cwd=cwd, env=env)
    read_end, go = os.pipe()  # both close-on-exec: only the child's stdin (a copy of read_end) survives exec
    try:
        proc = _popen(["/bin/sh", "-c", _HOLD, "floorgate-held", *argv], cwd=cwd, env=env, stdin=read_end)
    except BaseException:
        os.close(go)
        raise
    finally:
        os.close(read_end)
    return Held(proc, go)


def _check_program(program: str, *, cwd: str | None, env: dict[str, str]) -> None:
    """Raise ``FileNotFoundError`` / ``PermissionError`` where exec would (PATH from ``env``)."""
    base = cwd if cwd is not None else os.getcwd()
    if "/" in program:
        candidates = [os.path.join(base, program)]
    else:
        candidates = [os.path.join(base, d, program) for d in os.get_exec_path(env)]
    denied = False
    for path in candidates:
        if os.path.isfile(path):
            if os.access(path, os.X_OK):
                return
            denied = True
        elif "/" in program and os.path.isdir(path):
            denied = True
    if denied:
        raise PermissionError(13, "Permission denied", program)
    raise FileNotFoundError(2, "No such file or directory", program)


_USAGE_MARKERS = (b'"usage"', b"floorgate_usage", b'"tool_use"', b"item.started", b'"result"', b'"init"', b"turn.")
_MAX_TAPPED = 200_000


def open_log(path: Path) -> int:
    """Open (creating owner-only, 0600) a turn log for appending, never through a symbolic link:
    a link planted in a shared state directory must not redirect a turn's output elsewhere."""
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)


class Pump(threading.Thread):
    """The thread copying a host's output into its log; ``problem`` says why the log is incomplete
    (it could not be written, e.g. a full disk: the output is still drained, the turn unaffected)."""

    problem: str | None = None


def pump(stream: IO[bytes], log_path: Path, cap: int, tapped: list[str] | None = None) -> Pump:
    """Copy ``stream`` into ``log_path``, at most ``cap`` bytes, draining the rest so the child
    never blocks on a full pipe. Lines that may carry usage go to ``tapped`` (in memory only, for
    the usage meter), whether or not the log was capped or could be written."""

    def run() -> None:
        written = 0
        truncated = False
        pending = b""
        try:
            opened: IO[bytes] | None = os.fdopen(open_log(log_path), "ab", buffering=0)
        except OSError as exc:
            opened = None
            thread.problem = f"the turn log {log_path} could not be opened: {exc.strerror or exc}"
        out = opened
        try:
            while True:
                chunk = stream.read(65536)
                if not chunk:
                    if tapped is not None and pending and any(m in pending for m in _USAGE_MARKERS):
                        tapped.append(pending.decode("utf-8", "replace"))
                    break
                if tapped is not None:
                    *lines, pending = (pending + chunk).split(b"\n")
                    for line in lines:
                        if len(tapped) < _MAX_TAPPED and any(m in line for m in _USAGE_MARKERS):
                            tapped.append(line.decode("utf-8", "replace"))
                room = cap - written
                if room > 0 and out is not None:
                    try:
                        out.write(chunk[:room])
                    except OSError as exc:  # keep draining: the host must never block on its pipe
                        thread.problem = f"the turn log {log_path} is incomplete: {exc.strerror or exc}"
                        out = None
                    written += min(room, len(chunk))
                if len(chunk) > room and not truncated:
                    truncated = True
            if truncated and out is not None:
                with contextlib.suppress(OSError):
                    out.write(f"\n[floorgate: output truncated at {cap} bytes]\n".encode())
        finally:
            if opened is not None:
                with contextlib.suppress(OSError):
                    opened.close()
            stream.close()

    thread = Pump(target=run, name="floorgate-log", daemon=True)
    thread.start()
    return thread


def kill_group(pgid: int, grace: float = 2.0, wait=None) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if wait is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            wait(timeout=grace)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_only_dirs(path: Path) -> None:
    """Make ``path`` and its missing parents owner-only (0700): turn logs hold agent output."""
    missing = []
    for parent in (path, *path.parents):
        if parent.exists():
            break
        missing.append(parent)
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)
    if not path.is_dir():
        raise NotADirectoryError(f"{path} is not a directory")
