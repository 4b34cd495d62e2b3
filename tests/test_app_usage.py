"""Reading an app turn's usage from a Claude Code transcript (the Stop hook's input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from floorgate.scheduler.agents.app_usage import claude_turn_usage


def prompt(uuid: str, content: object = "triage") -> dict:  # type: ignore[type-arg]
    return {"type": "user", "uuid": uuid, "message": {"role": "user", "content": content}}


def reply(mid: str, inp: int, out: int, model: str = "claude-sonnet-4-5", **more: int) -> dict:  # type: ignore[type-arg]
    usage = {"input_tokens": inp, "output_tokens": out, **more}
    return {"type": "assistant", "message": {"id": mid, "model": model, "usage": usage}}


def tool_result() -> dict:  # type: ignore[type-arg]
    return prompt("tr", [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}])


CASES = [
    ("one-message", [prompt("u1"), reply("m1", 100, 20)], 120),
    ("cache-counts", [prompt("u1"), reply("m1", 100, 20, cache_read_input_tokens=5, cache_creation_input_tokens=7)], 132),
    ("split-message-counted-once", [prompt("u1"), reply("m1", 100, 20), reply("m1", 100, 20)], 120),
    ("tool-round-trip-is-one-turn", [prompt("u1"), reply("m1", 100, 20), tool_result(), reply("m2", 200, 30)], 350),
    ("only-the-last-turn", [prompt("u0"), reply("m0", 999, 999), prompt("u1"), reply("m1", 10, 5)], 15),
    ("text-blocks-prompt", [prompt("u1", [{"type": "text", "text": "go"}]), reply("m1", 1, 2)], 3),
]


@pytest.mark.parametrize(("entries", "tokens"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_turn_tokens(tmp_path: Path, entries: list[dict], tokens: int) -> None:  # type: ignore[type-arg]
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    turn = claude_turn_usage("s", str(path))
    assert (turn.tokens, turn.model, turn.problem) == (tokens, "claude-sonnet-4-5", None)
    assert turn.key == claude_turn_usage("s", str(path)).key  # the same turn, the same key
    assert turn.key != claude_turn_usage("other-session", str(path)).key


UNKNOWN = [
    ("missing-file", None, "cannot read"),
    ("malformed-line", "{not json\n" + json.dumps(prompt("u1")) + "\n" + json.dumps(reply("m1", 1, 1)), "could not be parsed"),
    ("negative-usage", json.dumps(prompt("u1")) + "\n" + json.dumps(reply("m1", -1, 1)), "malformed"),
    ("no-usage", json.dumps(prompt("u1")), "no usage"),
    ("no-prompt", json.dumps(reply("m1", 1, 1)), "no prompt"),
    ("above-the-ledger-cap", json.dumps(prompt("u1")) + "\n" + json.dumps(reply("m1", 2 * 10**12, 1)), "more than floorgate records"),
]


@pytest.mark.parametrize(("content", "problem"), [u[1:] for u in UNKNOWN], ids=[u[0] for u in UNKNOWN])
def test_unreadable_usage_is_unknown_never_zero(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "t.jsonl"
    if content is not None:
        path.write_text(content)
    turn = claude_turn_usage("s", str(path))
    assert turn.tokens is None and turn.problem is not None and problem in turn.problem


def _stop(db: str, payload: dict, env: dict | None = None):  # type: ignore[no-untyped-def,type-arg]
    from cli import run_cli

    return run_cli("hook", "stop", "--goal", "g", "--agent", "a", "--automation", "x", db=db, stdin=json.dumps(payload), env=env)


def _entries(db: str) -> list:  # type: ignore[type-arg]
    from floorgate.admission import open_store
    from floorgate.admission.limits import Series
    from floorgate.admission.usage import Usage
    from floorgate.admission.windows import parse_window

    with open_store(db) as store:
        return list(Usage(store).in_window(Series("g", "a", "x"), parse_window("1d")).entries)


def test_hook_stop_records_a_turn_once(sqlite_db: str, tmp_path: Path) -> None:
    import os

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(prompt("u1")) + "\n" + json.dumps(reply("m1", 70, 30)) + "\n")
    payload = {"session_id": "s1", "transcript_path": str(path), "hook_event_name": "Stop"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_")}
    assert _stop(sqlite_db, payload, env).returncode == 0
    assert _stop(sqlite_db, payload, env).returncode == 0  # the same turn again
    [entry] = _entries(sqlite_db)
    assert entry.tokens == 100 and entry.state.value == "settled" and entry.model == "claude-sonnet-4-5"


def test_hook_stop_with_unreadable_usage_records_unknown(sqlite_db: str, tmp_path: Path) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_")}
    result = _stop(sqlite_db, {"session_id": "s1", "transcript_path": str(tmp_path / "gone.jsonl")}, env)
    assert result.returncode == 0 and "usage unknown" in result.stderr
    [entry] = _entries(sqlite_db)
    assert entry.state.value == "unknown" and entry.tokens is None and entry.held


def test_hook_stop_with_more_tokens_than_the_ledger_records_records_unknown(sqlite_db: str, tmp_path: Path) -> None:
    import os

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(prompt("u1")) + "\n" + json.dumps(reply("m1", 2 * 10**12, 1)) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_")}
    result = _stop(sqlite_db, {"session_id": "s1", "transcript_path": str(path)}, env)
    assert result.returncode == 0 and "usage unknown" in result.stderr, result.stderr
    [entry] = _entries(sqlite_db)
    assert entry.state.value == "unknown" and entry.tokens is None and entry.held


def test_hook_stop_inside_a_managed_turn_leaves_it_to_the_meter(sqlite_db: str, tmp_path: Path) -> None:
    import os

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps(prompt("u1")) + "\n" + json.dumps(reply("m1", 70, 30)) + "\n")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_")}, "FLOORGATE_TURN_ID": "t-1"}
    assert _stop(sqlite_db, {"session_id": "s1", "transcript_path": str(path)}, env).returncode == 0
    assert _entries(sqlite_db) == []


def test_hook_stop_never_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_bytes(b"not a database " * 100)
    result = _stop(str(bad), {"session_id": "s1", "transcript_path": "x"})
    assert result.returncode == 1 and "turn usage not recorded" in result.stderr
    garbage = _stop(str(bad), "not an object")  # type: ignore[arg-type]
    assert garbage.returncode == 1


def _record(turn: str, response: str, inp: int, out: int) -> dict:  # type: ignore[type-arg]
    usage = {"input_tokens": inp, "cached_input_tokens": 0, "output_tokens": out}
    return {"type": "token_usage_record", "payload": {"turn_id": turn, "response_id": response, "usage": usage}}


def test_codex_turn_counts_its_own_responses_once(tmp_path: Path) -> None:
    from floorgate.scheduler.agents.app_usage import codex_turn_usage

    path = tmp_path / "rollout.jsonl"
    lines = [_record("t0", "r0", 999, 9), _record("t1", "r1", 1200, 80), _record("t1", "r1", 1200, 80), _record("t1", "r2", 1400, 30)]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    turn = codex_turn_usage("s", "t1", str(path), "gpt-standin")
    assert (turn.tokens, turn.model, turn.problem) == (2710, "gpt-standin", None)
    assert turn.key != codex_turn_usage("s", "t0", str(path), "m").key
    missing = codex_turn_usage("s", None, str(path), "m")
    assert missing.tokens is None and missing.problem is not None and "turn_id" in missing.problem
