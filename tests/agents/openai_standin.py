"""A local stand-in for the OpenAI Responses streaming API, for running the real Codex offline.

``codex exec`` is pointed at it through a ``[model_providers.<name>]`` entry whose ``base_url`` is
this server's ``/v1`` and whose ``wire_api`` is ``"responses"``. Every request is logged (method,
path, parsed JSON body); ``POST .../responses`` is a *model call* and is answered with a scripted
server-sent event stream; anything else Codex asks at start (the models list, ...) is answered
with an empty but well-formed document and counted apart from model calls.

A script is a list of replies, one per model call, in order; when it runs out, ``default`` is
used. The server is also the client's HTTP(S) proxy: whatever Codex tries to reach on the
internet is refused and logged as an escape. A reply is a list of output items (``message``, ``shell_call``) and the usage it reports.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

PROVIDER = "standin"
API_KEY_ENV = "FLOORGATE_STANDIN_KEY"


@dataclass(frozen=True)
class Logged:
    """One request the stand-in received."""

    method: str
    path: str
    body: Any


@dataclass(frozen=True)
class Reply:
    """What one model call answers: output items and the usage reported in response.completed."""

    items: tuple[dict[str, Any], ...]
    input_tokens: int = 100
    output_tokens: int = 20
    cached_tokens: int = 0
    reasoning_tokens: int = 0  # part of output_tokens, as the API counts them


def message(text: str) -> dict[str, Any]:
    """An assistant message output item."""
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text, "annotations": []}]}


def shell_call(command: str) -> dict[str, Any]:
    """A function call of Codex's shell tool running ``command`` (a shell string).

    The tool name and argument shape must match a tool Codex offered in the request; the test
    picks ``exec_command`` / ``shell`` from what the request's ``tools`` list holds."""
    return {"type": "function_call", "_shell": command}


def text_reply(text: str = "ok", input_tokens: int = 100, output_tokens: int = 20) -> Reply:
    """A reply that ends the turn with one assistant message."""
    return Reply((message(text),), input_tokens, output_tokens)


@dataclass
class StandIn:
    """The server's script and log; thread-safe."""

    script: list[Reply] = field(default_factory=list)
    default: Reply = field(default_factory=text_reply)
    on_model_call: Callable[[Any], Reply] | None = None
    log: list[Logged] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Any = field(default_factory=itertools.count)

    @property
    def model_calls(self) -> list[Logged]:
        """Requests that would have woken (and billed) the model."""
        with self._lock:
            return [r for r in self.log if r.method == "POST" and r.path.rstrip("/").endswith("/responses")]

    @property
    def other_calls(self) -> list[Logged]:
        """Everything else Codex asked (models list, ...): never a model wake."""
        with self._lock:
            return [r for r in self.log if not (r.method == "POST" and r.path.rstrip("/").endswith("/responses"))]

    @property
    def escapes(self) -> list[Logged]:
        """Requests meant for the internet that reached us as the client's proxy: none may."""
        with self._lock:
            return [r for r in self.log if r.method == "CONNECT" or r.path.startswith("http")]

    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)

    def next_reply(self, body: Any) -> Reply:
        if self.on_model_call is not None:
            return self.on_model_call(body)
        with self._lock:
            return self.script.pop(0) if self.script else self.default

    def new_id(self, prefix: str) -> str:
        with self._lock:
            return f"{prefix}_{next(self._ids)}"


def offered_tools(body: Any) -> list[str]:
    """The names of the function tools a model request offered."""
    names = []
    for tool in (body or {}).get("tools") or []:
        if isinstance(tool, dict):
            names.append(str(tool.get("name") or tool.get("type")))
    return names


def _shell_item(standin: StandIn, command: str, body: Any) -> dict[str, Any]:
    tools = offered_tools(body)
    call_id = standin.new_id("call")
    if "exec_command" in tools:
        name, arguments = "exec_command", {"cmd": command}
    elif "shell_command" in tools:
        name, arguments = "shell_command", {"command": command}
    else:
        name, arguments = "shell", {"command": ["sh", "-c", command]}
    return {"type": "function_call", "id": standin.new_id("fc"), "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def _sse(kind: str, data: dict[str, Any]) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode()


def _stream(standin: StandIn, reply: Reply, body: Any) -> bytes:
    rid = standin.new_id("resp")
    chunks = [_sse("response.created", {"response": {"id": rid, "object": "response", "status": "in_progress"}})]
    for index, item in enumerate(reply.items):
        if "_shell" in item:
            item = _shell_item(standin, item["_shell"], body)
        elif item.get("type") == "message":
            item = {"id": standin.new_id("msg"), "status": "completed", **item}
        chunks.append(_sse("response.output_item.added", {"output_index": index, "item": item}))
        chunks.append(_sse("response.output_item.done", {"output_index": index, "item": item}))
    usage = {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": reply.cached_tokens},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    chunks.append(_sse("response.completed", {"response": {"id": rid, "object": "response", "status": "completed", "usage": usage}}))
    return b"".join(chunks)


def _handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def _body(self) -> Any:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if self.headers.get("Content-Encoding") == "zstd" or not raw:
                return raw.decode("latin-1") if raw else None
            try:
                return json.loads(raw)
            except ValueError:
                return raw.decode("utf-8", "replace")

        def _send(self, status: int, content_type: str, payload: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_GET(self) -> None:
            standin.record(Logged("GET", self.path, None))
            if self.path.split("?")[0].rstrip("/").endswith("/models"):
                self._send(200, "application/json", json.dumps({"object": "list", "data": [], "models": []}).encode())
            else:
                self._send(404, "application/json", b'{"error": {"message": "not here"}}')

        def do_CONNECT(self) -> None:
            # Also the client's HTTPS proxy, so that anything headed for the internet is seen
            # (and refused) here rather than leaving the machine.
            standin.record(Logged("CONNECT", self.path, None))
            self._send(403, "text/plain", b"offline")
            self.close_connection = True

        def do_POST(self) -> None:
            body = self._body()
            standin.record(Logged("POST", self.path, body))
            if self.path.split("?")[0].rstrip("/").endswith("/responses"):
                self._send(200, "text/event-stream", _stream(standin, standin.next_reply(body), body))
            else:
                self._send(404, "application/json", b'{"error": {"message": "not here"}}')

    return Handler


class Server:
    """The stand-in on 127.0.0.1, a free port, serving from a daemon thread until ``close``."""

    def __init__(self, standin: StandIn | None = None) -> None:
        self.standin = standin or StandIn()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self.standin))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="openai-standin", daemon=True)
        self.thread.start()

    @property
    def proxy_url(self) -> str:
        """What HTTPS_PROXY must say so that any request for the internet lands here."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        """What ``base_url`` of the model provider must say."""
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
