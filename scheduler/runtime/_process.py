"""Spawning a host command in its own process group, capping its log, killing the group."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
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
    return _popen(argv, cwd=cwd, env=env, preexec=_die_with_parent if _libc is not None else None)


def _popen(argv: list[str], *, cwd: str | None, env: dict[str, str], preexec: Callable[[], None] | None) -> subprocess.Popen[bytes]:
    # No input, output and errors in one pipe (the capped log), a session of its own (its whole
    # group is killed at once), none of the runner's other descriptors.
    return subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=preexec,
        close_fds=True,
    )


HELD_EXIT = 125  # what a held child that was never released exits with (its program never ran)


def spawn_held(argv: list[str], *, cwd: str | None, env: dict[str, str], confirm: Callable[[int], object]) -> subprocess.Popen[bytes]:
    """``spawn``, held between fork and exec until ``confirm(pid)`` has returned: the runner
    records the pid with the turn's confirmation in one commit before the program can run. No
    shell in between: the environment, argv and exec errors are ``spawn``'s.

    ``confirm`` runs on a thread of its own while this one forks (the forking thread stays the
    child's parent, so PDEATHSIG keeps meaning "the runner died"). If it raises, the child exits
    with ``HELD_EXIT`` without exec'ing and the error is raised here. The program is looked up
    first (``OSError`` as ``subprocess.Popen`` raises it); an exec error after confirmation is
    raised as ``Popen`` raises it. A child whose runner dies before confirming never execs."""
    _check_program(argv[0], cwd=cwd, env=env)
    pid_read, pid_write = os.pipe()
    go_read, go_write = os.pipe()

    def hold() -> None:  # in the child, between fork and exec (fds not yet closed)
        _die_with_parent()
        os.close(go_write)  # else its own copy would keep the pipe open: no end of file when refused
        os.write(pid_write, b"%d\n" % os.getpid())
        if os.read(go_read, 3) != b"go\n":
            os._exit(HELD_EXIT)

    refused: list[BaseException] = []

    def confirmer() -> None:
        try:
            pid = _read_pid(pid_read)
            if pid is not None:  # else the fork failed: Popen raises it
                confirm(pid)
                os.write(go_write, b"go\n")
        except BaseException as exc:
            refused.append(exc)
        finally:
            os.close(go_write)

    thread = threading.Thread(target=confirmer, name="floorgate-confirm", daemon=True)
    thread.start()
    try:
        proc = _popen(argv, cwd=cwd, env=env, preexec=hold)
    finally:
        os.close(pid_write)  # the confirmer reads end of file if no child was forked
        thread.join()
        os.close(pid_read)
        os.close(go_read)
    if refused:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        raise refused[0]
    return proc


def _read_pid(fd: int) -> int | None:
    """The held child's pid, or None at end of file (no child was forked)."""
    got = b""
    while not got.endswith(b"\n"):
        chunk = os.read(fd, 32)
        if not chunk:
            return None
        got += chunk
    return int(got)


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


# Linux's hard limit on pids (PID_MAX_LIMIT, 2**22): a recorded pid outside 2..this is damage, and
# is never handed to kill(2) (0 and -1 there mean "my own group" and "every process I may signal").
PID_LIMIT = 4_194_304
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def valid_pid(pid: int) -> bool:
    """Whether ``pid`` can name a process other than init (never 0, negative, 1 or out of range)."""
    return type(pid) is int and 1 < pid <= PID_LIMIT


def boot_id() -> str | None:
    """This boot's id (changes at every reboot), or None where /proc cannot tell."""
    try:
        text = _BOOT_ID.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (/proc/<pid>/stat field 22); None
    when it is not there, /proc cannot be read, or ``pid`` is not a valid pid."""
    if not valid_pid(pid):
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 2 (the command name) is in parentheses and may itself hold spaces and ')'.
    fields = stat.rpartition(b")")[2].split()
    try:
        return int(fields[19])  # fields[0] is field 3 (state): field 22 is fields[19]
    except (IndexError, ValueError):
        return None


_PR_SET_DUMPABLE = 4


def seal_from_children() -> bool:
    """Make this process non-dumpable (Linux): its /proc entries (``environ``, ``mem``) become
    root's and ptrace is refused, so a turn's host of the same OS user cannot read the runner's
    environment (an owner's token, the store's URL and password) through ``/proc/$PPID``. A
    child's exec restores its own dumpability. False where it cannot be done (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def group_starts(pgid: int) -> tuple[int, ...] | None:
    """The start times (clock ticks since boot) of the live members of process group ``pgid``,
    read from /proc; None when /proc cannot be listed or ``pgid`` is not a valid pid."""
    if not valid_pid(pgid):
        return None
    try:
        entries = os.listdir("/proc")
    except OSError:
        return None
    starts = []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
            if int(fields[2]) == pgid:  # fields[2] is field 5 (pgrp)
                starts.append(int(fields[19]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile, or not ours to read: it is not counted
    return tuple(starts)


def kill_group(pgid: int, grace: float = 2.0, wait=None) -> None:  # type: ignore[no-untyped-def]
    """SIGTERM the process group, then SIGKILL what is left after ``grace`` seconds."""
    if not valid_pid(pgid):  # kill(2) would read 0 as our own group and -1 as every process
        raise ValueError(f"refusing to signal process group {pgid!r}: not a valid process id")
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
    """Whether process group ``pgid`` has a member (False for an invalid pid: never probed)."""
    if not valid_pid(pgid):
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
