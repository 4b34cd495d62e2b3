"""The turn broker: a managed turn's hooks reach the store only through their runner.

A runner (``floorgate turn run``, a host's executor) serves one broker on a Unix-domain socket
in a private directory (0700, made by ``mkdtemp``) for as long as it runs turns. Each launched
turn gets a random token, kept here only as its digest; the host's environment carries the
socket and the token (``turn_wire``), never the store's URL or its password. A request is one
JSON line naming an operation of a closed set (``Op``) and the token; the broker performs it
for the token's turn (its mission, its automation) and nothing else: a request never names a
turn, and a mission it names must be the turn's own. Every failure answers a denial, and a
hook that gets no answer blocks on its own. Connections are served on their own threads (never
under a lock of the scheduler's), at most ``MAX_CONNECTIONS`` at a time, each read bounded by
``READ_SECONDS``. The peer (SO_PEERCRED) must be of this OS user and, on Linux, a process of the
turn itself (its host or a descendant): a token read from another process's environment does
not work from outside that turn.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import secrets
import shutil
import socket
import struct
import tempfile
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path

from floorgate.admission import FloorgateError, Journal, Store, TurnRecord
from floorgate.admission.clock import Clock

from ..agents.hooks import HookService
from ._process import seal_from_children
from .turn_wire import MAX_FIELD, MAX_REASON, Answer, Op, TurnCredential, encode, read_line

__all__ = ["RunnerBroker", "TurnBroker"]

MAX_CONNECTIONS = 16
READ_SECONDS = 5.0
SOCKET_NAME = "turns.sock"
MAX_SOCKET_PATH = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
log = logging.getLogger("floorgate.turns")


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _private_dir() -> Path:
    """A new directory only this user can enter, with a path short enough for a socket in it."""
    for base in (None, "/tmp"):
        path = Path(tempfile.mkdtemp(prefix="fg-turns-", dir=base))  # 0700, a fresh random name
        if len(os.fsencode(path / SOCKET_NAME)) <= MAX_SOCKET_PATH:
            return path
        os.rmdir(path)
    raise OSError(f"no directory for the turn broker's socket with a path under {MAX_SOCKET_PATH} bytes (set TMPDIR shorter)")


class TurnBroker:
    """Serves the hook requests of this runner's live turns; ``close`` when the runner is done."""

    def __init__(self, store: Store, clock: Clock, envelope_mode: str) -> None:
        self.store = store
        self.clock = clock
        self.envelope_mode = envelope_mode
        self._turns: dict[bytes, str] = {}  # token digest -> turn id
        self._lock = threading.Lock()  # guards _turns only: no I/O under it
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self._dir = _private_dir()
        self.path = str(self._dir / SOCKET_NAME)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(self.path)
            os.chmod(self.path, 0o600)
            listener.listen(MAX_CONNECTIONS)
        except OSError:
            listener.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._listener = listener
        # The accept thread holds the broker only weakly: a runner dropped without close() still
        # lets it go (the finalizer shuts the socket, which ends the thread).
        self._finalizer = weakref.finalize(self, _shut, listener, self._dir)
        thread = threading.Thread(target=_accept_loop, args=(listener, weakref.ref(self)), name="floorgate-turn-broker", daemon=True)
        thread.start()

    @contextlib.contextmanager
    def turn(self, turn_id: str) -> Iterator[TurnCredential]:
        """A credential for ``turn_id``, valid until the block ends (the host has exited)."""
        token = secrets.token_urlsafe(32)
        key = _digest(token)
        with self._lock:
            self._turns[key] = turn_id
        try:
            yield TurnCredential(self.path, token)
        finally:
            with self._lock:
                self._turns.pop(key, None)

    def close(self) -> None:
        """Stop serving; every credential it gave stops working."""
        with self._lock:
            self._turns.clear()
        self._finalizer()

    # -- serving ---------------------------------------------------------------------------------
    def _serve(self, conn: socket.socket, peer: int | None) -> None:
        with conn:
            try:
                conn.settimeout(READ_SECONDS)
                answer = self._handle(read_line(conn), peer)
                conn.sendall(encode({"allow": answer.allow, "reason": answer.reason[:MAX_REASON]}))
            except (OSError, ValueError) as exc:
                log.warning("turn broker: a request failed: %s", exc)  # the hook gets no answer and blocks

    def _handle(self, line: bytes, peer: int | None) -> Answer:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            request = None
        if not isinstance(request, dict) or request.get("v") != 1:
            return Answer(False, "malformed request to the turn broker")
        token, op = request.get("token"), request.get("op")
        if not isinstance(token, str) or not isinstance(op, str):
            return Answer(False, "malformed request to the turn broker")
        with self._lock:
            turn_id = self._turns.get(_digest(token))
        if turn_id is None:
            return Answer(False, "this turn credential is not valid (wrong token, or the turn has ended)")
        try:
            kind = Op(op)
        except ValueError:
            return Answer(False, f"operation {op[:40]!r} is not one a turn's hooks may ask")
        fields = {k: request.get(k) for k in ("mission", "automation")}
        for name, value in fields.items():
            if value is not None and (not isinstance(value, str) or len(value) > MAX_FIELD):
                return Answer(False, f"field {name} must be an id of at most {MAX_FIELD} characters")
        try:
            return self._perform(kind, turn_id, fields, peer)
        except FloorgateError as exc:
            return Answer(False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except Exception as exc:  # fail closed: an internal failure is a denial, logged
            log.exception("turn broker: %s for turn %s failed", kind.value, turn_id)
            return Answer(False, f"internal error {type(exc).__name__}")

    def _perform(self, op: Op, turn_id: str, fields: dict[str, object], peer: int | None) -> Answer:
        record = Journal(self.store, self.clock).get(turn_id)
        if record is None or not _running(record):
            return Answer(False, f"turn {turn_id} is not running")
        if peer is not None and (record.child_pid is None or not _descends_from(peer, record.child_pid)):
            return Answer(False, f"process {peer} is not one of turn {turn_id}'s (its credential works only inside the turn)")
        if op is Op.ADMIT_PROMPT:
            automation = fields["automation"]
            if automation != record.automation_id:
                return Answer(
                    False,
                    f"this managed turn runs {record.automation_id}; a prompt of {automation or '(no automation)'} is not its wake "
                    "(a managed turn's hooks admit only the turn's own prompt)",
                )
            return Answer(True, f"the wake of managed turn {turn_id}")
        mission = fields["mission"]
        if mission is not None and mission != record.mission_id:
            return Answer(False, f"mission {mission} is not this turn's")
        if record.mission_id is None:
            return Answer(True, "no mission: nothing to bound")
        refusal = HookService(self.store, self.clock, self.envelope_mode).count_tool_call(record.mission_id)
        return Answer(True, "counted") if refusal is None else Answer(False, refusal)


class RunnerBroker:
    """A runner's broker, started at its first launched turn (a runner that launches nothing
    opens no socket) and served until ``close``; safe to share between a host's worker threads."""

    def __init__(self, store: Store, clock: Clock, envelope_mode: str) -> None:
        self._args = (store, clock, envelope_mode)
        self._broker: TurnBroker | None = None
        self._lock = threading.Lock()  # held only while the broker is made or dropped

    def turn(self, turn_id: str) -> contextlib.AbstractContextManager[TurnCredential]:
        """The credential of ``turn_id``, valid while the block runs."""
        with self._lock:
            if self._broker is None:
                seal_from_children()  # before any host runs: none can read this process's environment
                self._broker = TurnBroker(*self._args)
            broker = self._broker
        return broker.turn(turn_id)

    def close(self) -> None:
        """Stop serving (a later turn starts a new broker)."""
        with self._lock:
            broker, self._broker = self._broker, None
        if broker is not None:
            broker.close()


def _running(record: TurnRecord) -> bool:
    return record.verdict is None and record.phase in ("confirmed", "launched")


def _peer(conn: socket.socket) -> tuple[bool, int | None]:
    """Whether the peer is of this OS user, and its pid (None where it cannot be known: not
    Linux, where the 0700 directory alone keeps other users out)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None or not os.path.isdir("/proc/self"):
        return True, None
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    return uid == os.geteuid(), pid


MAX_DEPTH = 64  # an agent's hook runs a few processes below its host


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether ``pid`` is ``ancestor`` or below it (its parents read from /proc)."""
    for _ in range(MAX_DEPTH):
        if pid == ancestor:
            return True
        if pid <= 1:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rpartition(")")[2].split()[1])  # the parent: the field after the state
        except (OSError, ValueError, IndexError):
            return False
    return False


def _accept_loop(listener: socket.socket, ref: weakref.ReferenceType[TurnBroker]) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return  # shut down
        broker = ref()
        if broker is None:
            conn.close()
            return
        try:
            ours, pid = _peer(conn)
        except OSError:
            ours, pid = False, None
        if not ours or not broker._slots.acquire(blocking=False):
            conn.close()  # the hook gets no answer and blocks
            continue

        def serve(broker: TurnBroker = broker, conn: socket.socket = conn, pid: int | None = pid) -> None:
            try:
                broker._serve(conn, pid)
            finally:
                broker._slots.release()

        threading.Thread(target=serve, name="floorgate-turn-request", daemon=True).start()
        del broker


def _shut(listener: socket.socket, directory: Path) -> None:
    with contextlib.suppress(OSError):
        listener.shutdown(socket.SHUT_RDWR)
    listener.close()
    shutil.rmtree(directory, ignore_errors=True)
