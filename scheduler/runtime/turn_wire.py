"""A managed turn's credential and the hooks' side of its broker (see ``turn_broker``).

A runner gives the host of each managed turn a socket and a token instead of the store's URL:
the host's hooks (``floorgate hook ...``) send their one request over that socket, and the
runner performs it for that turn's own mission only. This module is what a hook needs for that:
no store, no SQLAlchemy. Every failure raises ``BrokerUnavailable`` (an ``OSError``), which a
hook turns into a block.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

SOCKET_ENV = "FLOORGATE_TURN_SOCKET"
TOKEN_ENV = "FLOORGATE_TURN_TOKEN"
MAX_MESSAGE = 4096  # one JSON line each way; a longer one is refused, never cut
MAX_FIELD = 200  # ids and names in a request
MAX_REASON = 2000  # characters of an answer's reason


class Op(StrEnum):
    """What a turn's hooks may ask of its broker: nothing else."""

    COUNT_TOOL_CALL = "count_tool_call"  # PreToolUse: count one tool call of the turn's mission
    ADMIT_PROMPT = "admit_prompt"  # UserPromptSubmit: is this prompt the turn's own wake?


class BrokerUnavailable(ConnectionError):
    """The turn's broker gave no trustworthy answer (missing, refused, too slow, malformed)."""


@dataclass(frozen=True)
class TurnCredential:
    """Where a managed turn's hooks reach its runner, and the token naming the turn there."""

    socket: str
    token: str

    def env(self) -> dict[str, str]:
        """The host's environment variables for this credential."""
        return {SOCKET_ENV: self.socket, TOKEN_ENV: self.token}


@dataclass(frozen=True)
class Answer:
    """The broker's answer: allowed or not, and why."""

    allow: bool
    reason: str


def credential_from(env: Mapping[str, str]) -> TurnCredential | None:
    """The turn credential in ``env``; None outside a managed turn (the hook uses the store
    directly, as an agent app's own wake does). Only one of the two set is a broken turn."""
    path, token = env.get(SOCKET_ENV) or "", env.get(TOKEN_ENV) or ""
    if not path and not token:
        return None
    if not path or not token:
        missing = SOCKET_ENV if not path else TOKEN_ENV
        raise BrokerUnavailable(f"${missing} is not set but {SOCKET_ENV if path else TOKEN_ENV} is: a managed turn's hooks need both")
    return TurnCredential(path, token)


def encode(message: Mapping[str, object]) -> bytes:
    """One message on the wire: compact JSON and a newline; too long is an error, never cut."""
    data = json.dumps(message, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
    if len(data) > MAX_MESSAGE:
        raise ValueError(f"message of {len(data)} bytes (at most {MAX_MESSAGE})")
    return data


def read_line(conn: socket.socket) -> bytes:
    """One newline-terminated message of at most ``MAX_MESSAGE`` bytes (the newline excluded)."""
    data = b""
    while b"\n" not in data:
        chunk = conn.recv(MAX_MESSAGE + 1 - len(data))
        if not chunk:
            raise BrokerUnavailable("the connection closed before a whole message")
        data += chunk
        if len(data) > MAX_MESSAGE and b"\n" not in data:
            raise BrokerUnavailable(f"a message over {MAX_MESSAGE} bytes")
    line, _, rest = data.partition(b"\n")
    if rest:
        raise BrokerUnavailable("more than one message")
    return line


def ask(credential: TurnCredential, op: Op, fields: Mapping[str, str | None], *, timeout: float) -> Answer:
    """Send one request for the turn and read its answer within ``timeout`` seconds in all."""
    request = encode({"v": 1, "token": credential.token, "op": op.value, **{k: v for k, v in fields.items() if v is not None}})
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(timeout)
            conn.connect(credential.socket)
            conn.sendall(request)
            conn.shutdown(socket.SHUT_WR)
            line = read_line(conn)
    except BrokerUnavailable:
        raise
    except OSError as exc:
        raise BrokerUnavailable(f"the turn's broker at {credential.socket} did not answer: {exc.strerror or type(exc).__name__}") from None
    return _answer(line)


def _answer(line: bytes) -> Answer:
    try:
        doc = json.loads(line)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict) or type(doc.get("allow")) is not bool or not isinstance(doc.get("reason"), str):
        raise BrokerUnavailable("the turn's broker sent a malformed answer")
    return Answer(doc["allow"], doc["reason"][:MAX_REASON])


def tool_call_refusal(credential: TurnCredential, mission_id: str | None, *, timeout: float) -> str | None:
    """Have the turn's broker count one tool call of its mission: None when allowed, else why not."""
    said = ask(credential, Op.COUNT_TOOL_CALL, {"mission": mission_id}, timeout=timeout)
    return None if said.allow else said.reason


def tool_refused(payload: Mapping[str, object], refusal: str) -> str:
    """The line a refused tool call shows the agent app."""
    return f"floorgate: {str(payload.get('tool_name') or 'tool')[:64]} refused: {refusal}"
