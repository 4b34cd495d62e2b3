"""The ``floorgate`` console entry: a pre-model hook asks the user's hook server first.

A hook runs before every prompt and tool call; importing the store's stack costs far more than
the answer. So ``floorgate hook user-prompt-submit|pre-tool-use`` first asks ``floorgate hook
serve`` (same user, same code) over its socket, importing nothing heavy. On ANY failure to get a
trustworthy answer (no server, another uid, other code, a malformed or missing answer) the hook
runs in-process exactly as without a server, and that blocks on its own failures: a server's
failure never admits. Every other command goes straight to ``main``.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import time

from ..runtime import hook_wire
from ..runtime._proc_start import process_age

_DEFAULT_TIMEOUT_S = 30  # the hook's --hook-timeout default (commands/hook.py)
EXIT_BLOCK = 2
TURN_CREDENTIAL_ENV = ("FLOORGATE_TURN_SOCKET", "FLOORGATE_TURN_TOKEN")  # runtime.turn_wire's: a managed turn


def _timeout_seconds(argv: list[str]) -> float | None:
    """The hook's --hook-timeout in seconds when it is a plain "Ns" (installed hooks write that);
    None for any other form: the in-process hook parses and checks it."""
    value: str | None = None
    for i, token in enumerate(argv):
        if token == "--hook-timeout" and i + 1 < len(argv):
            value = argv[i + 1]
        elif token.startswith("--hook-timeout="):
            value = token.split("=", 1)[1]
    if value is None:
        return float(_DEFAULT_TIMEOUT_S)
    if len(value) > 1 and value.endswith("s") and value[:-1].isdigit() and int(value[:-1]) >= 2:
        return float(value[:-1])
    return None


def _deadline_of(timeout: float) -> float:
    return timeout - max(1.0, min(5.0, timeout / 10))  # as commands/hook.deadline_of


class _Expired(Exception):
    """The server took the request but did not answer before the hook's own deadline."""


def ask_server(argv: list[str], stdin: str, env: dict[str, str] | None = None, age: float | None = None) -> tuple[int, str]:
    """The server's (exit code, stderr) for this hook; ``Unserved`` when it gave no trustworthy
    answer (the caller answers in-process), ``_Expired`` when the hook's deadline passed after
    the request was sent (the caller blocks: the server may be deciding)."""
    env = dict(os.environ) if env is None else env
    timeout = _timeout_seconds(argv)
    if timeout is None:
        raise hook_wire.Unserved("a --hook-timeout only the in-process hook reads")
    left = _deadline_of(timeout) - (process_age().total_seconds() if age is None else age)
    directory = hook_wire.runtime_dir(env)
    problem = hook_wire.private_dir_problem(directory)
    if problem is not None:
        raise hook_wire.Unserved(problem)
    request = hook_wire.encode(
        {
            "v": hook_wire.VERSION,
            "code": hook_wire.code_identity(),
            "argv": argv,
            "stdin": stdin,
            "env": hook_wire.request_env(env),
            "cwd": os.getcwd(),
        },
        hook_wire.MAX_REQUEST,
    )
    if left <= 0.5:
        raise hook_wire.Unserved("too little time left for a round trip")
    sent = False
    end = time.monotonic() + left
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(min(left, 2.0))
            conn.connect(str(directory / hook_wire.SOCKET_NAME))
            if hook_wire.peer_uid(conn) != os.getuid():
                raise hook_wire.Unserved("the socket's server runs as another user")
            conn.sendall(request)
            conn.shutdown(socket.SHUT_WR)
            sent = True
            conn.settimeout(max(0.01, end - time.monotonic()))
            doc = hook_wire.read_message(conn, hook_wire.MAX_ANSWER)
    except TimeoutError:
        if sent:
            raise _Expired() from None
        raise hook_wire.Unserved("the server did not take the request") from None
    except OSError as exc:
        raise hook_wire.Unserved(f"no server: {exc.strerror or type(exc).__name__}") from None
    code, err = doc.get("exit"), doc.get("stderr")
    event = served_event(argv)
    if (
        event is None
        or doc.get("v") != hook_wire.VERSION
        or code not in hook_wire.SERVED_EXITS[event]
        or type(code) is not int
        or not isinstance(err, str)
    ):
        raise hook_wire.Unserved(str(doc.get("unserved") or "a malformed answer")[:200])
    return code, err


def ask_broker(argv: list[str], stdin: str, env: dict[str, str], age: float | None = None) -> tuple[int, str]:
    """A managed turn's tool call, counted by its runner's broker directly (the broker answers
    only the turn's own processes, so no server may ask it for this hook). ``Unserved`` for
    anything but the plain form installed hooks use, and on any failure: the in-process hook
    then answers (and blocks on its own failure)."""
    from ..runtime import turn_wire

    options: dict[str, str] = {}
    words = iter(argv)
    for token in words:
        name, eq, value = token.partition("=")
        if token in ("hook", "pre-tool-use", "--json"):
            continue
        if name not in ("--db", "--mission", "--hook-timeout"):
            raise hook_wire.Unserved(f"{token!r}: only the in-process hook reads it")
        options[name] = value if eq else next(words, "")
    timeout = _timeout_seconds(argv)
    payload = json.loads(stdin) if stdin.strip() else None
    if timeout is None or not isinstance(payload, dict):
        raise hook_wire.Unserved("only the in-process hook names this refusal")
    credential = turn_wire.credential_from(env)
    if credential is None:
        raise hook_wire.Unserved("not a managed turn")
    left = _deadline_of(timeout) - (process_age().total_seconds() if age is None else age)
    if left <= 0.5:
        raise hook_wire.Unserved("too little time left for a round trip")
    refusal = turn_wire.tool_call_refusal(credential, options.get("--mission") or env.get("FLOORGATE_MISSION_ID"), timeout=left)
    return (0, "") if refusal is None else (EXIT_BLOCK, turn_wire.tool_refused(payload, refusal) + "\n")


def _served(argv: list[str]) -> int | None:
    """The served answer's exit code (its stderr written), or None to answer in-process."""
    stdin = sys.stdin.read()
    sys.stdin = io.StringIO(stdin)  # the in-process hook reads the same payload
    env = dict(os.environ)
    try:
        if any(k in env for k in TURN_CREDENTIAL_ENV):
            if served_event(argv) != "pre-tool-use":
                return None  # a managed turn's prompt and end: once a turn, in-process
            code, err = ask_broker(argv, stdin, env)
        else:
            code, err = ask_server(argv, stdin, env)
    except _Expired:
        if served_event(argv) == "stop":  # the end-of-turn hook never blocks: its usage stays an estimate
            sys.stderr.write("floorgate: turn usage not recorded: the hook server did not answer in time\n")
            return 1
        sys.stderr.write("floorgate: blocked (fail closed): the hook server did not answer before the hook's own deadline\n")
        return EXIT_BLOCK
    except (OSError, ValueError, UnicodeError, RecursionError):  # Unserved, BrokerUnavailable, a bad payload
        return None
    if err:
        sys.stderr.write(err)
        sys.stderr.flush()
    return code


def served_event(argv: list[str]) -> str | None:
    """The hook ``argv`` runs when the server may answer it (``hook EVENT``, after only the root's
    --db, where installed hooks name their store, and --json); None for any other command line."""
    rest = list(argv)
    while rest and (rest[0] in ("--db", "--json") or rest[0].startswith("--db=")):
        rest = rest[2:] if rest[0] == "--db" else rest[1:]
    if len(rest) >= 2 and rest[0] == "hook" and rest[1] in hook_wire.SERVED_EVENTS and "-h" not in argv and "--help" not in argv:
        return rest[1]
    return None


def main() -> None:
    """Console entry point: a served hook's answer, else the full command line (``cli.main``)."""
    argv = sys.argv[1:]
    if served_event(argv) is not None:
        try:
            code = _served(argv)
        except Exception:  # any failure of the served path answers in-process, which fails closed
            code = None
        if code is not None:
            sys.stdout.flush()
            os._exit(code)  # nothing else to flush or run: skip the interpreter's teardown
    from .main import main as full

    full()
