"""The codex-json meter on a transcript captured from the real ``codex exec --json`` 0.171.0.

Captured offline against tests/agents/openai_standin.py: four model calls (two shell calls that
ran, one a PreToolUse hook refused, a final message) reporting input/cached/output/reasoning
tokens of 2000/1500/120/40, 2100/2000/60/0, 2200/2100/30/0 and 2300/2200/10/0. Codex sums
them into one ``turn.completed`` (reasoning is part of output_tokens, cached part of input), adds
``cache_write_input_tokens`` and ``reasoning_output_tokens``, prints a refused call as nothing at
all, and reports unknown model metadata as an ``error`` item.
"""

from __future__ import annotations

from pathlib import Path

from floorgate.scheduler.app.meters import codex_json

TRANSCRIPT = Path(__file__).parent / "transcripts" / "codex_exec_0171.jsonl"


def test_codex_0171_turn_usage_is_the_providers_input_plus_output() -> None:
    usage = codex_json(TRANSCRIPT.read_text().splitlines())
    assert usage.tokens == (2000 + 2100 + 2200 + 2300) + (120 + 60 + 30 + 10)
    assert usage.num_turns == 1 and usage.unparseable == 0 and usage.result_subtype is None


def test_codex_0171_counts_the_commands_that_ran_not_the_refused_one() -> None:
    assert codex_json(TRANSCRIPT.read_text().splitlines()).tool_calls == 2
