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
    if not isinstance(transcript, str) or not transcript:
        return TurnUsage(f"stop-{session}-unknown", None, None, "the hook payload names no transcript_path")
    try:
        with open(transcript, "rb") as f:
            raw = f.read(MAX_TRANSCRIPT_BYTES + 1)
    except OSError as exc:
        return TurnUsage(f"stop-{session}-unknown", None, None, f"cannot read the transcript: {exc.strerror or exc}")
    if len(raw) > MAX_TRANSCRIPT_BYTES:
        return TurnUsage(f"stop-{session}-unknown", None, None, "the transcript is larger than floorgate reads")
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
    starts = [i for i, e in enumerate(entries) if _prompt(e)]
    if not starts:
        return TurnUsage(f"stop-{session}-unknown", None, None, "no prompt found in the transcript")
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
    return TurnUsage(key, sum(per_message.values()), model)
