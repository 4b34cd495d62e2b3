"""A local stand-in for the Anthropic Messages API that Claude Code talks to in the qualification suite.

It logs every request (method, path, body) and answers ``POST /v1/messages`` with a server-sent
event stream (message_start, content_block_start/delta/stop, message_delta with usage,
message_stop) built from a script of replies: text, or tool_use blocks (a Bash command). Any other
request (token counting, a HEAD probe, an unknown path) is answered and counted apart from model
calls, so a test can assert "zero model calls" exactly. Point Claude Code at it with
``ANTHROPIC_BASE_URL``; ``CONNECT`` requests (the stand-in doubles as the CLI's HTTPS proxy) are
logged and refused, so traffic meant for any other host is seen and never leaves the machine.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODEL_PATH = "/v1/messages"


@dataclass(frozen=True)
class Logged:
    """One request the stand-in received."""

    method: str
    path: str
    body: Any  # the parsed JSON body, the raw text when it is not JSON, None when empty


@dataclass(frozen=True)
class Reply:
    """One model answer: text, or one tool call (``tool`` names it, ``tool_input`` is its input)."""

    text: str = ""
    tool: str | None = None
    tool_input: dict[str, Any] = field(default_factory=dict)
    input_tokens: int = 11
    output_tokens: int = 7
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    @property
    def tokens(self) -> int:
        """What a meter should count for this message."""
        return self.input_tokens + self.output_tokens + self.cache_read_input_tokens + self.cache_creation_input_tokens


def text(words: str, **usage: int) -> Reply:
    return Reply(text=words, **usage)


def bash(command: str, **usage: int) -> Reply:
    return Reply(tool="Bash", tool_input={"command": command, "description": "floorgate qualification step"}, **usage)


class AnthropicStandIn:
    """A threaded HTTP server on 127.0.0.1 (an ephemeral port) answering as the Messages API.

    ``script(n, body)`` gives the reply to the n-th model call (0-based) from its request body; by
    default every call gets ``text("ok")``. Use as a context manager.
    """

    def __init__(self, script: Callable[[int, Any], Reply] | None = None) -> None:
        self.script = script or (lambda _n, _body: text("ok"))
        self.log: list[Logged] = []
        self.replies: list[Reply] = []
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # the log list is the record
                pass

            def _body(self) -> Any:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
                if not raw:
                    return None
                try:
                    return json.loads(raw)
                except json.JSONDecodeError:
                    return raw

            def _record(self, body: Any) -> int:
                with standin._lock:
                    standin.log.append(Logged(self.command, self.path, body))
                    return sum(1 for r in standin.log if r.method == "POST" and _is_model_path(r.path)) - 1

            def _send(self, status: int, doc: Any) -> None:
                data = json.dumps(doc).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            def do_POST(self) -> None:
                body = self._body()
                n = self._record(body)
                path = self.path.split("?", 1)[0]
                if path == MODEL_PATH:
                    reply = standin.script(n, body)
                    with standin._lock:
                        standin.replies.append(reply)
                    model = body.get("model", "claude-standin") if isinstance(body, dict) else "claude-standin"
                    data = b"".join(_sse(n, model, reply))
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                elif path.endswith("/count_tokens"):
                    self._send(200, {"input_tokens": 1})
                else:
                    self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": f"stand-in: no {path}"}})

            def do_GET(self) -> None:
                self._record(None)
                self._send(404, {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}})

            def do_HEAD(self) -> None:
                self._record(None)
                self._send(200, {})

            def do_CONNECT(self) -> None:
                self._record(None)
                self.send_response(403)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> AnthropicStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- what the tests read ---------------------------------------------------------------------
    def snapshot(self) -> list[Logged]:
        with self._lock:
            return list(self.log)

    @property
    def model_calls(self) -> list[Logged]:
        """POST /v1/messages: the requests a provider bills."""
        return [r for r in self.snapshot() if r.method == "POST" and _is_model_path(r.path)]

    @property
    def other_requests(self) -> list[Logged]:
        """Everything else the CLI asked (token counts, probes, proxy CONNECTs)."""
        return [r for r in self.snapshot() if not (r.method == "POST" and _is_model_path(r.path))]


def _is_model_path(path: str) -> bool:
    return path.split("?", 1)[0] == MODEL_PATH


def _event(name: str, doc: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode()


def _sse(n: int, model: str, reply: Reply) -> Iterator[bytes]:
    message_id = f"msg_standin_{n:04d}"
    usage_start = {
        "input_tokens": reply.input_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": reply.cache_read_input_tokens,
        "cache_creation_input_tokens": reply.cache_creation_input_tokens,
    }
    start = {"id": message_id, "type": "message", "role": "assistant", "model": model, "content": []}
    yield _event("message_start", {"type": "message_start", "message": {**start, "stop_reason": None, "usage": usage_start}})
    if reply.tool is None:
        yield _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        yield _event(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": reply.text}}
        )
        stop = "end_turn"
    else:
        block = {"type": "tool_use", "id": f"toolu_standin_{n:04d}", "name": reply.tool, "input": {}}
        yield _event("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block})
        partial = json.dumps(reply.tool_input)
        yield _event(
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": partial}},
        )
        stop = "tool_use"
    yield _event("content_block_stop", {"type": "content_block_stop", "index": 0})
    usage_end = {**usage_start, "output_tokens": reply.output_tokens}
    yield _event("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage_end})
    yield _event("message_stop", {"type": "message_stop"})
