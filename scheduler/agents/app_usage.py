"""An agent app's turn usage, read from its transcript by its end-of-turn hook (``hook stop``).

Claude Code's ``Stop`` hook gets ``{"session_id", "transcript_path", ...}``; the transcript is JSON
Lines, one entry per line: the owner's prompt (``type: user`` with text, not a tool result), then
the model's messages (``type: assistant``, ``message.id``, ``message.model``, ``message.usage``),
a message split over several lines repeating its usage. The turn is everything after the last
prompt; its tokens are input + output + cache reads + cache writes of each message, counted once
per message id (as the provider reported them). The prompt's ``uuid`` names the turn, so a hook
that fires twice for it records it once. Only counts and the model name leave the transcript.

A transcript that cannot be read, or a turn without usage, reads as ``tokens`` None (unknown): the
ledger then keeps the turn's estimate held, never a guessed zero.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

# A transcript larger than this is not read whole (a turn's tail is what matters; see _tail).
MAX_TRANSCRIPT_BYTES = 64 * 1024 * 1024
_USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


@dataclass(frozen=True)
class TurnUsage:
    """One app turn's usage: ``key`` names the turn (stable across repeated hooks), ``tokens``
    None when unknown (``problem`` says why)."""

    key: str
    tokens: int | None
    model: str | None
    problem: str | None = None


def digest(value: object) -> str:
    """The 16-hex digest floorgate names an app session by (as ``hooks.hook_turn_id`` does)."""
    return hashlib.sha256(str(value).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def unread_key(session_id: object) -> str:
    """The key a report of the session takes when its transcript names no turn (it could not be
    read): a later readable report of the session corrects the row it left (``Usage.report``)."""
    return f"stop-{digest(session_id)}-unknown"


def codex_turn_usage(session_id: object, turn_id: object, transcript: object, model: object) -> TurnUsage:
    """Codex's turn ``turn_id`` from its rollout transcript: the ``token_usage_record`` lines of
    that turn, input + output tokens of each response once (cached input is part of input, as the
    ``codex-json`` meter counts them)."""
    session = digest(session_id)
    if not isinstance(turn_id, str) or not turn_id:
        return TurnUsage(unread_key(session_id), None, None, "the hook payload names no turn_id")
    key = f"stop-{session}-{digest(turn_id)}"
    name = model[:128] if isinstance(model, str) and model else None
    entries, bad, problem = _read_jsonl(transcript)
    if problem is not None:
        return TurnUsage(key, None, name, problem)
    per_response: dict[str, int] = {}
    for entry in entries:
        payload = entry.get("payload")
        if entry.get("type") != "token_usage_record" or not isinstance(payload, dict) or payload.get("turn_id") != turn_id:
            continue
        usage = payload.get("usage")
        values = [usage.get(k) for k in ("input_tokens", "output_tokens")] if isinstance(usage, dict) else [None]
        if any(type(v) is not int or v < 0 for v in values):
            return TurnUsage(key, None, name, "a response's usage in the transcript is malformed")
        given = payload.get("response_id")
        per_response[given if isinstance(given, str) else f"line-{len(per_response)}"] = sum(values)  # type: ignore[arg-type]
    if bad:
        return TurnUsage(key, None, name, f"{bad} transcript line(s) could not be parsed")
    if not per_response:
        return TurnUsage(key, None, name, "the turn reported no usage")
    return _counted(key, sum(per_response.values()), name)


def _read_jsonl(transcript: object) -> tuple[list[dict[str, Any]], int, str | None]:
    """The transcript's JSON objects, how many lines did not parse, or why it cannot be read."""
    if not isinstance(transcript, str) or not transcript:
        return [], 0, "the hook payload names no transcript_path"
    try:
        with open(transcript, "rb") as f:
            raw = f.read(MAX_TRANSCRIPT_BYTES + 1)
    except OSError as exc:
        return [], 0, f"cannot read the transcript {transcript}: {exc.strerror or exc}"
    if len(raw) > MAX_TRANSCRIPT_BYTES:
        return [], 0, "the transcript is larger than floorgate reads"
    entries: list[dict[str, Any]] = []
    bad = 0
    for line in raw.splitlines():
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            bad += 1
            continue
        if isinstance(entry, dict):
            entries.append(entry)
    return entries, bad, None


def _prompt(entry: dict[str, Any]) -> bool:
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isSidechain"):
        return False
    content = (entry.get("message") or {}).get("content") if isinstance(entry.get("message"), dict) else None
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(isinstance(c, dict) and c.get("type") == "text" for c in content)


def claude_turn_usage(session_id: object, transcript: object) -> TurnUsage:
    """The last turn of a Claude Code transcript (``transcript``: its path from the hook payload)."""
    session = digest(session_id)
    entries, bad, problem = _read_jsonl(transcript)
    if problem is not None:
        return TurnUsage(unread_key(session_id), None, None, problem)
    starts = [i for i, e in enumerate(entries) if _prompt(e)]
    if not starts:
        return TurnUsage(unread_key(session_id), None, None, "no prompt found in the transcript")
    first = starts[-1]
    prompt_id = entries[first].get("uuid")
    key = f"stop-{session}-{digest(prompt_id if isinstance(prompt_id, str) else first)}"
    per_message: dict[str, int] = {}
    model = None
    for entry in entries[first + 1 :]:
        message = entry.get("message")
        if entry.get("type") != "assistant" or not isinstance(message, dict):
            continue
        usage = message.get("usage")
        if not isinstance(usage, dict):
            continue
        values = [usage.get(k, 0) for k in _USAGE_KEYS]
        if any(type(v) is not int or v < 0 for v in values):
            return TurnUsage(key, None, None, "a message's usage in the transcript is malformed")
        given = message.get("id")
        mid = given if isinstance(given, str) else f"line-{len(per_message)}"
        per_message[mid] = max(per_message.get(mid, 0), sum(values))
        if isinstance(message.get("model"), str):
            model = message["model"][:128]
    if bad:
        return TurnUsage(key, None, model, f"{bad} transcript line(s) could not be parsed")
    if not per_message:
        return TurnUsage(key, None, model, "the turn reported no usage")
    return _counted(key, sum(per_message.values()), model)


def _counted(key: str, tokens: int, model: str | None) -> TurnUsage:
    """The turn's usage as reported, or unknown when it is more than the ledger records (a
    transcript's number no provider reports for one turn): its estimate then stays held, as for
    any other usage that cannot be read, rather than the record refused."""
    from floorgate.admission.windows import MAX_TOKENS

    if tokens > MAX_TOKENS:
        return TurnUsage(key, None, model, f"the turn reported {tokens} tokens, more than floorgate records ({MAX_TOKENS})")
    return TurnUsage(key, tokens, model)
