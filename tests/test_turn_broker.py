"""A managed turn's host gets a scoped turn credential, never the store's URL or its password.

Its hooks count tool calls and admit the turn's own prompt through the runner's turn broker;
a wrong, ended or foreign token, a mission of another turn, a dead socket and a malformed
answer all block. Both backends; the PostgreSQL store's URL carries a password.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from admission import Automations, FixedClock, Missions, Store, open_store
from scheduler.executor import TurnExecutor, TurnOutcome
from scheduler.turn_broker import RunnerBroker
from scheduler.turn_wire import SOCKET_ENV, TOKEN_ENV

from cli import run_cli
from conftest import T0
from helpers import command, wait_for
from test_envelope import automation, envelope

SECRET = "s3cret-Pw-4turns"
PAYLOAD = json.dumps({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}})
PROMPT = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "go"})


def with_password(url: str) -> str:
    """The store's URL with a password in it (PostgreSQL here trusts loopback, so any works)."""
    return url.replace("://postgres@", f"://postgres:{SECRET}@", 1)


def dump_env(path: Path) -> str:
    """A host snippet that writes its environment to ``path`` (atomically)."""
    return f"import json, os; open({str(path)!r} + '.tmp', 'w').write(json.dumps(dict(os.environ))); os.replace({str(path)!r} + '.tmp', {str(path)!r})"


def test_a_managed_turn_s_host_gets_no_store_url_and_no_password(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = with_password(store.url)
    monkeypatch.setenv("FLOORGATE_DB", url)  # the runner's own: never handed on
    clock = FixedClock(T0)
    seen = tmp_path / "env.json"
    with open_store(url) as secret_store:
        assert SECRET in secret_store.url or store.dialect == "sqlite"
        envelope(secret_store, clock, '{"max_tool_calls": 5}')
        auto = automation(secret_store, clock, dump_env(seen))
        executor = TurnExecutor(secret_store, state_dir=tmp_path / "state", clock=clock)
        try:
            outcome = executor.run(auto)
        finally:
            executor.close()
    assert outcome.verdict.status == "succeeded", outcome.verdict
    env = json.loads(seen.read_text())
    assert "FLOORGATE_DB" not in env
    leaked = [k for k, v in env.items() if SECRET in v or store.url.split("?")[0] in v]
    assert leaked == [], f"the store's URL or password is in {leaked}"
    assert env["FLOORGATE_MISSION_ID"] and env[SOCKET_ENV] and env[TOKEN_ENV]


def test_turn_run_counts_a_script_host_s_tool_calls_through_the_broker(db_url: str, store: Store, tmp_path: Path) -> None:
    """A real ``floorgate turn run`` whose host runs ``floorgate hook pre-tool-use`` four times
    against max_tool_calls=3: three are counted, the fourth is refused and the mission is stuck."""
    url = with_password(db_url)
    clock = FixedClock(T0)
    codes, seen = tmp_path / "codes.json", tmp_path / "env.json"
    hook = [sys.executable, "-m", "scheduler", "hook", "pre-tool-use"]
    script = (
        f"import json, os, subprocess; open({str(seen)!r}, 'w').write(json.dumps(dict(os.environ))); "
        f"codes = [subprocess.run({hook!r}, input={PAYLOAD!r}, text=True, capture_output=True).returncode for _ in range(4)]; "
        f"open({str(codes)!r}, 'w').write(json.dumps(codes))"
    )
    envelope(store, clock, '{"max_tool_calls": 3}')
    auto = automation(store, clock)
    host_dir = tmp_path / "elsewhere"  # no store here: the hooks can reach it only through the broker
    host_dir.mkdir()
    spec = auto.spec.model_copy(update={"host": command(script, 60).model_copy(update={"cwd": str(host_dir)})})
    Automations(store, clock).edit("x", spec)
    env = {k: v for k, v in os.environ.items() if k != "FLOORGATE_DB"}
    ran = subprocess.run(
        [sys.executable, "-m", "scheduler", "--db", url, "turn", "run", "x", "--state-dir", str(tmp_path / "state")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(codes.read_text()) == [0, 0, 0, 2], ran.stdout + ran.stderr
    mission = Missions(store, clock).recent("x", 1)[0]
    assert mission.tool_calls == 3 and mission.status == "stuck", mission
    host_env = json.loads(seen.read_text())
    assert "FLOORGATE_DB" not in host_env and not [k for k, v in host_env.items() if SECRET in v]
    assert not (host_dir / "floorgate.db").exists()


# -- what blocks ------------------------------------------------------------------------------------
@dataclass
class LiveTurn:
    """A managed turn held running (its host waits for ``go``), and the environment it got."""

    store: Store
    env: dict[str, str]
    executor: TurnExecutor
    go: Path
    mission_id: str
    done: list[TurnOutcome]
    thread: threading.Thread

    def release(self) -> TurnOutcome:
        self.go.write_text("go")
        self.thread.join(timeout=60)
        return self.done[0]


@pytest.fixture
def live(store: Store, tmp_path: Path) -> Iterator[LiveTurn]:
    clock = FixedClock(T0)
    seen, go = tmp_path / "env.json", tmp_path / "go"
    waits = f"import os, time; t = time.monotonic()\nwhile not os.path.exists({str(go)!r}) and time.monotonic() - t < 60: time.sleep(0.05)"
    envelope(store, clock, '{"max_tool_calls": 5}')
    auto = automation(store, clock, f"{dump_env(seen)}\n{waits}", timeout=90)
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
    done: list[TurnOutcome] = []
    thread = threading.Thread(target=lambda: done.append(executor.run(auto)), daemon=True)
    thread.start()
    env = wait_for(lambda: seen.exists() and json.loads(seen.read_text()), 60, "the host's environment")
    turn = LiveTurn(store, env, executor, go, env["FLOORGATE_MISSION_ID"], done, thread)
    try:
        yield turn
    finally:
        if thread.is_alive():
            turn.release()
        executor.close()


def tool_call(env: dict[str, str], *args: str) -> Any:
    """``floorgate hook pre-tool-use`` as the host's hook runs it (its environment, no --db)."""
    return run_cli("hook", "pre-tool-use", *args, env={"PATH": os.environ["PATH"], **env}, stdin=PAYLOAD)


def counted(turn: LiveTurn) -> int:
    return Missions(turn.store).get(turn.mission_id).tool_calls


def _fake_broker(path: Path, answer: bytes) -> threading.Thread:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


BLOCKS = [
    pytest.param(lambda t, tmp: {**t.env, TOKEN_ENV: "x" * 43}, "not valid", id="wrong-token"),
    pytest.param(lambda t, tmp: {**t.env, TOKEN_ENV: "x" * 43, "FLOORGATE_DB": t.store.url}, "not valid", id="wrong-token-with-store-url"),
    pytest.param(lambda t, tmp: {**t.env, SOCKET_ENV: str(tmp / "none.sock")}, "did not answer", id="dead-socket"),
    pytest.param(lambda t, tmp: {k: v for k, v in t.env.items() if k != TOKEN_ENV}, "need both", id="socket-without-token"),
    pytest.param(lambda t, tmp: {**t.env, "FLOORGATE_MISSION_ID": "m-other"}, "not this turn's", id="another-mission"),
]


@pytest.mark.parametrize(("env_of", "why"), BLOCKS)
def test_a_tool_call_without_a_valid_turn_credential_is_refused(live: LiveTurn, tmp_path: Path, env_of: Any, why: str) -> None:
    refused = tool_call(env_of(live, tmp_path))
    assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    assert counted(live) == 0
    allowed = tool_call(live.env)  # the turn's own credential still counts
    assert allowed.returncode == 0, allowed.stderr
    assert counted(live) == 1


def test_another_runner_s_token_and_an_ended_turn_s_token_are_refused(live: LiveTurn, store: Store) -> None:
    other = RunnerBroker(store, FixedClock(T0), "enforce")
    try:
        with other.turn(live.env["FLOORGATE_TURN_ID"]) as foreign:  # a valid token of another runner's broker
            refused = tool_call({**live.env, TOKEN_ENV: foreign.token})
            assert refused.returncode == 2 and "not valid" in refused.stderr, refused.stderr
    finally:
        other.close()
    assert live.release().verdict.status == "succeeded"
    ended = tool_call(live.env)  # the broker still serves this runner; the turn's token is gone
    assert ended.returncode == 2 and "not valid" in ended.stderr, ended.stderr
    live.executor.close()
    closed = tool_call(live.env)
    assert closed.returncode == 2 and "did not answer" in closed.stderr, closed.stderr
    assert counted(live) == 0


@pytest.mark.parametrize(
    "answer",
    [pytest.param(b"garbage\n", id="not-json"), pytest.param(b'{"allow": "yes", "reason": ""}\n', id="allow-not-bool"), pytest.param(b"", id="closed")],
)
def test_a_malformed_answer_blocks(answer: bytes, store: Store, tmp_path: Path) -> None:
    """Even with the store's URL at hand (an owner's --env FLOORGATE_DB), the credential decides."""
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_tool_calls": 5}')
    automation(store, clock)
    mission = Missions(store, clock).open("x", "g", "a")
    path = tmp_path / "fake.sock"
    server = _fake_broker(path, answer)
    env = {SOCKET_ENV: str(path), TOKEN_ENV: "t", "FLOORGATE_MISSION_ID": mission.mission_id, "FLOORGATE_DB": store.url}
    refused = tool_call(env)
    server.join(timeout=10)
    assert refused.returncode == 2 and "refused (fail closed)" in refused.stderr, refused.stderr
    assert Missions(store, clock).get(mission.mission_id).tool_calls == 0


@pytest.mark.parametrize(
    ("automation_id", "code"), [pytest.param("x", 0, id="own-automation"), pytest.param("y", 2, id="another-automation")]
)
def test_the_prompt_hook_admits_only_the_turn_s_own_wake(live: LiveTurn, automation_id: str, code: int) -> None:
    argv = ("hook", "user-prompt-submit", "--goal", "g", "--agent", "a", "--automation", automation_id, "--wake", "automatic")
    said = run_cli(*argv, env={"PATH": os.environ["PATH"], **live.env}, stdin=PROMPT)
    assert said.returncode == code, said.stderr
