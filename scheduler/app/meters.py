"""Usage meters: read the usage real agent CLIs print, so token bounds count what was spent.

- ``claude-stream-json``: Claude Code's ``-p --output-format stream-json --verbose``. Assistant
  events carry ``message.id`` and ``message.usage``; one API message can be printed as several
  events sharing its id, so usage is counted once per id (the last event wins). The ``result``
  event carries ``num_turns``, the total ``usage``, ``total_cost_usd`` and a ``subtype``
  (``success``, ``error_max_turns``, ``error_during_execution``...). Claude Code 2.1 prints an
  assistant event with the usage of the stream's ``message_start`` (output_tokens 1 or so), not
  the final ``message_delta`` figure, so the result's total is what was spent: what it counts
  above the per-message sum is recorded as one more request, ``result``. A host killed before
  its result leaves the per-message figures, an undercount the readback cannot see.
- ``codex-json``: Codex's ``exec --json``. ``turn.completed`` carries the turn's ``usage`` summed
  over its model calls (input_tokens, cached_input_tokens and cache_write_input_tokens within
  input, output_tokens, reasoning_output_tokens within output, as in 0.171); ``item.*`` events
  carry command executions and tool calls (a call a PreToolUse hook refused prints no item).
- ``jsonl``: floorgate's own protocol for any other host: one JSON object per line with
  ``"floorgate_usage": 1``, ``"request_id"``, ``"input_tokens"``, ``"output_tokens"`` (or
  ``"total_tokens"``) and optionally ``"model"`` and ``"backend"``; other lines are ignored.

A meter never turns missing usage into zero: ``requests`` is empty when nothing was reported,
and lines that look like usage but cannot be parsed are counted in ``unparseable``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Request:
    request_id: str
    tokens: int
    model: str | None


@dataclass
class Usage:
    requests: dict[str, Request] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)
    backends: set[str] = field(default_factory=set)
    tool_calls: int = 0
    num_turns: int | None = None
    result_subtype: str | None = None
    total_cost_usd: float | None = None
    unparseable: int = 0

    @property
    def reported(self) -> bool:
        return bool(self.requests)

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.requests.values())


def _int(value: object) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"not a token count: {value!r}")
    return value


def _usage_tokens(usage: dict) -> int:  # type: ignore[type-arg]
    if not isinstance(usage, dict):
        raise ValueError("usage is not an object")
    if "total_tokens" in usage:
        return _int(usage["total_tokens"])
    keys = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    present = [k for k in keys if k in usage]
    if "input_tokens" not in usage or "output_tokens" not in usage:
        raise ValueError("usage without input_tokens/output_tokens")
    return sum(_int(usage[k]) for k in present)


def _events(lines: Iterable[str], usage: Usage) -> Iterable[dict]:  # type: ignore[type-arg]
    for line in lines:
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            if '"usage"' in line or "floorgate_usage" in line:
                usage.unparseable += 1
            continue
        if isinstance(event, dict):
            yield event


RESULT_REQUEST = "result"


def claude_stream_json(lines: Iterable[str]) -> Usage:
    usage = Usage()
    total: int | None = None  # the result event's usage: the whole invocation's spend
    for event in _events(lines, usage):
        kind = event.get("type")
        try:
            if kind == "system" and event.get("subtype") == "init" and isinstance(event.get("model"), str):
                usage.models.add(event["model"])
            elif kind == "assistant":
                message = event.get("message") or {}
                if isinstance(message.get("model"), str):
                    usage.models.add(message["model"])
                for block in message.get("content") or []:
                    if isinstance(block, dict) and block.get("type") == "tool_use":
                        usage.tool_calls += 1
                if "usage" in message:
                    mid = str(message.get("id") or f"anon-{len(usage.requests)}")
                    usage.requests[mid] = Request(mid, _usage_tokens(message["usage"]), message.get("model"))
            elif kind == "result":
                usage.result_subtype = event.get("subtype")
                if isinstance(event.get("num_turns"), int):
                    usage.num_turns = event["num_turns"]
                if isinstance(event.get("total_cost_usd"), (int, float)):
                    usage.total_cost_usd = float(event["total_cost_usd"])
                if "usage" in event:
                    total = _usage_tokens(event["usage"])
        except (ValueError, TypeError, AttributeError):
            usage.unparseable += 1
    if total is not None and total > usage.tokens:
        model = next(iter(usage.models)) if len(usage.models) == 1 else None
        usage.requests[RESULT_REQUEST] = Request(RESULT_REQUEST, total - usage.tokens, model)
    return usage


def codex_json(lines: Iterable[str]) -> Usage:
    usage = Usage()
    turn = 0
    for event in _events(lines, usage):
        kind = event.get("type")
        try:
            if kind == "turn.completed":
                turn += 1
                u = event.get("usage")
                if not isinstance(u, dict) or "input_tokens" not in u or "output_tokens" not in u:
                    raise ValueError("turn.completed without usage")
                tokens = _int(u["input_tokens"]) + _int(u["output_tokens"])  # cached input is part of input
                usage.requests[f"turn-{turn}"] = Request(f"turn-{turn}", tokens, None)
            elif kind == "item.started":
                item = event.get("item") or {}
                if item.get("type") in ("command_execution", "mcp_tool_call", "web_search", "file_change"):
                    usage.tool_calls += 1
            elif kind == "turn.failed":
                usage.result_subtype = "turn_failed"
        except (ValueError, TypeError, AttributeError):
            usage.unparseable += 1
    if turn:
        usage.num_turns = turn
    return usage


def floorgate_jsonl(lines: Iterable[str]) -> Usage:
    usage = Usage()
    for event in _events(lines, usage):
        if event.get("floorgate_usage") != 1:
            continue
        try:
            rid = event["request_id"]
            if not isinstance(rid, str) or not rid:
                raise ValueError("request_id")
            usage.requests[rid] = Request(rid, _usage_tokens(event), event.get("model"))
            if isinstance(event.get("model"), str):
                usage.models.add(event["model"])
            if isinstance(event.get("backend"), str):
                usage.backends.add(event["backend"])
            if isinstance(event.get("tool_calls"), int):
                usage.tool_calls += event["tool_calls"]
        except (KeyError, ValueError, TypeError):
            usage.unparseable += 1
    return usage


METERS = {"claude-stream-json": claude_stream_json, "codex-json": codex_json, "jsonl": floorgate_jsonl}


def read_usage(meter: str, lines: Iterable[str]) -> Usage | None:
    """Parse with the named meter; None for ``none`` (the host reports nothing we can read)."""
    parse = METERS.get(meter)
    return parse(lines) if parse is not None else None


def metered(automation: Any, usage: Usage, started: datetime) -> dict[str, Any]:
    """A managed turn's usage as the budget ledger records it (``admission.usage.settle_turn``):
    the tokens of its reported requests (None when it reported none or a record did not parse:
    unknown), the cost it reported in whole micro-dollars rounded up, the model it reported (else
    the automation's)."""
    spec = automation.spec
    known = usage.reported and not usage.unparseable
    cost = usage.total_cost_usd
    usd = math.ceil(cost * 1_000_000) if known and cost is not None and math.isfinite(cost) and cost >= 0 else None
    model = sorted(usage.models)[0][:128] if len(usage.models) == 1 else spec.model
    return {
        "goal": spec.goal_id,
        "agent": spec.agent_id,
        "automation": automation.automation_id,
        "at": started,
        "tokens": usage.tokens if known else None,
        "usd_micros": usd,
        "model": model,
    }
