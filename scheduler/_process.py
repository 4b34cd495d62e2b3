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
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent if _libc is not None else None,
        close_fds=True,
    )


_USAGE_MARKERS = (b'"usage"', b"floorgate_usage", b'"tool_use"', b"item.started", b'"result"', b'"init"', b"turn.")
_MAX_TAPPED = 200_000


def pump(stream: IO[bytes], log_path: Path, cap: int, tapped: list[str] | None = None) -> threading.Thread:
    """Copy ``stream`` into ``log_path``, at most ``cap`` bytes, draining the rest so the child
    never blocks on a full pipe. Lines that may carry usage go to ``tapped`` (in memory only, for
    the usage meter), whether or not the log was capped."""

    def run() -> None:
        written = 0
        truncated = False
        pending = b""
        with open(log_path, "ab") as out:
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
                if room > 0:
                    out.write(chunk[:room])
                    written += min(room, len(chunk))
                if len(chunk) > room and not truncated:
                    truncated = True
            if truncated:
                out.write(f"\n[floorgate: output truncated at {cap} bytes]\n".encode())
        stream.close()

    thread = threading.Thread(target=run, name="floorgate-log", daemon=True)
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
