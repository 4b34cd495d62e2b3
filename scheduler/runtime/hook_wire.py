"""What a served hook and the hook server share: where the server listens, who may talk to whom,
which code answers, and the one message each way (see ``hook_server`` and ``cli.entry``).

This module is on every hook's path: it imports only the standard library's light modules (no
store, no SQLAlchemy, no pydantic). Every check here fails closed: a hook that cannot trust the
server does not use it.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import struct
import sys
from collections.abc import Mapping
from pathlib import Path

RUNTIME_DIR_ENV = "FLOORGATE_RUNTIME_DIR"
SOCKET_NAME = "hooks.sock"
LOCK_NAME = "hooks.lock"
VERSION = 1
MAX_REQUEST = 1 << 20  # a prompt's payload rides in the request; a longer one is answered in-process
MAX_ANSWER = 64 * 1024
SERVED_EVENTS = ("user-prompt-submit", "pre-tool-use", "stop")
# The exits a served answer may carry: a blocking hook's allow (0) or block (2); the end-of-turn
# hook's recorded (0) or not (1, never 2: that would make the app go on).
SERVED_EXITS = {"user-prompt-submit": (0, 2), "pre-tool-use": (0, 2), "stop": (0, 1)}
# The calling hook's environment that its decision reads (the store, a managed turn's credential
# and ids, settings): only these travel, never the rest of the environment.
ENV_PREFIX = "FLOORGATE_"


class Unserved(ConnectionError):
    """No trustworthy answer from a hook server: the hook answers in-process instead."""


def runtime_dir(env: Mapping[str, str] | None = None) -> Path:
    """The per-user directory of the server's socket: ``$FLOORGATE_RUNTIME_DIR``, else
    ``$XDG_RUNTIME_DIR/floorgate``, else ``/tmp/floorgate-UID``."""
    env = os.environ if env is None else env
    if env.get(RUNTIME_DIR_ENV):
        return Path(env[RUNTIME_DIR_ENV])
    if env.get("XDG_RUNTIME_DIR"):
        return Path(env["XDG_RUNTIME_DIR"]) / "floorgate"
    return Path(f"/tmp/floorgate-{os.getuid()}")


def private_dir_problem(path: Path) -> str | None:
    """Why ``path`` is not this user's private directory (None when it is): a real directory,
    not a symlink, owned by this uid, mode 0700."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or type(exc).__name__}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a directory"
    if st.st_uid != os.getuid():
        return f"{path} belongs to uid {st.st_uid}, not {os.getuid()}"
    if stat.S_IMODE(st.st_mode) != 0o700:
        return f"{path} has mode {stat.S_IMODE(st.st_mode):o}, not 700"
    return None


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def _package_dirs() -> list[str]:
    from importlib.util import find_spec

    dirs: list[str] = []
    for name in ("floorgate", "floorgate.admission", "floorgate.hosts", "floorgate.scheduler"):
        spec = find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise Unserved(f"cannot locate {name}")
        dirs += [str(Path(d).resolve()) for d in spec.submodule_search_locations]
    return sorted(set(dirs))


def code_identity() -> str:
    """This installation's code as it is on disk now: every source file's path, size and mtime
    (not their text: cheap enough for every hook), and the interpreter. A server answers only a
    hook whose identity equals the one it loaded, so an upgrade never runs old rules."""
    h = hashlib.sha256(f"{VERSION}\0{sys.version}\0{sys.prefix}\0".encode())
    for top in _package_dirs():
        for base, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            for name in sorted(files):
                if name.endswith((".py", ".sql", ".toml", ".json")):
                    st = os.stat(os.path.join(base, name))
                    h.update(f"{base}/{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def request_env(env: Mapping[str, str]) -> dict[str, str]:
    """The calling hook's environment the server may read: floorgate's own variables only."""
    return {k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}


def encode(message: Mapping[str, object], limit: int) -> bytes:
    """One message: compact JSON and a newline; longer than ``limit`` is an error, never cut."""
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
    if len(data) > limit:
        raise Unserved(f"a message of {len(data)} bytes (at most {limit})")
    return data


def read_message(conn: socket.socket, limit: int) -> dict:  # type: ignore[type-arg]
    """One newline-terminated JSON object of at most ``limit`` bytes, the peer done after it."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit + 1:
            raise Unserved(f"a message over {limit} bytes")
        if chunk.endswith(b"\n"):
            break
    data = b"".join(chunks)
    if not data.endswith(b"\n") or data.count(b"\n") != 1:
        raise Unserved("not one whole message")
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        raise Unserved("a malformed message")
    return doc


def probe(env: Mapping[str, str] | None = None, timeout: float = 2.0) -> str | None:
    """Why hooks are not served now (None when a server of this user and this code answers)."""
    directory = runtime_dir(env)
    if not os.path.lexists(directory):
        return f"no hook server is running (start one with 'floorgate hook serve'; it would listen in {directory})"
    problem = private_dir_problem(directory)
    if problem is not None:
        return problem
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(str(directory / SOCKET_NAME))
            if peer_uid(conn) != os.getuid():
                return f"the server at {directory / SOCKET_NAME} runs as another user"
            conn.sendall(encode({"v": VERSION, "code": code_identity(), "probe": True}, MAX_REQUEST))
            conn.shutdown(socket.SHUT_WR)
            doc = read_message(conn, MAX_ANSWER)
    except (OSError, ValueError) as exc:
        return f"no hook server answers at {directory / SOCKET_NAME} ({getattr(exc, 'strerror', None) or exc})"
    if doc.get("serving") is not True:
        return f"the hook server at {directory / SOCKET_NAME} refused: {str(doc.get('unserved'))[:200]}"
    return None
