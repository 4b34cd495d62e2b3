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
from basics import T0

from floorgate.admission import Automations, CommandHost, FixedClock, Missions, Policies, Scope, Store, open_store, parse_compute
from floorgate.scheduler.runtime.executor import TurnExecutor, TurnOutcome
from floorgate.scheduler.runtime.turn_broker import RunnerBroker
from floorgate.scheduler.runtime.turn_wire import SOCKET_ENV, TOKEN_ENV

from cli import run_cli
from helpers import add_automation, command, wait_for

SECRET = "s3cret-Pw-4turns"
PAYLOAD = json.dumps({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {}})
PROMPT = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "go"})


def envelope(store: Store, clock: FixedClock, text: str) -> None:
    Policies(store, clock).configure(Scope.parse("g/a"), compute=parse_compute(text), expected_revision=0, owner_ref="o")


def automation(store: Store, clock: FixedClock, script: str = "pass", *, timeout: float = 30.0) -> Any:
    return add_automation(store, clock, script=script, timeout=timeout)


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
    hook = [sys.executable, "-m", "floorgate", "hook", "pre-tool-use"]
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
        [sys.executable, "-m", "floorgate", "--db", url, "turn", "run", "x", "--state-dir", str(tmp_path / "state")],
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
# The host of a live turn: it writes its environment, then runs each hook request the test drops
# into its directory (as an agent app runs its hooks: a child of the host) until ``go`` appears.
SERVE_HOOKS = """
import json, os, subprocess, sys, time
d = sys.argv[1]
with open(d + '/env.json.tmp', 'w') as f:
    json.dump(dict(os.environ), f)
os.replace(d + '/env.json.tmp', d + '/env.json')
n, t = 0, time.monotonic()
while not os.path.exists(d + '/go') and time.monotonic() - t < 90:
    req = f'{d}/req-{n}.json'
    if not os.path.exists(req):
        time.sleep(0.05)
        continue
    r = json.load(open(req))
    p = subprocess.run(r['argv'], input=r['stdin'], env=r['env'], text=True, capture_output=True)
    with open(req + '.out.tmp', 'w') as f:
        json.dump({'returncode': p.returncode, 'stderr': p.stderr}, f)
    os.replace(req + '.out.tmp', f'{d}/res-{n}.json')
    n += 1
"""


@dataclass(frozen=True)
class Said:
    returncode: int
    stderr: str


@dataclass
class LiveTurn:
    """A managed turn held running (its host runs the hooks it is handed until ``release``)."""

    store: Store
    env: dict[str, str]
    executor: TurnExecutor
    directory: Path
    mission_id: str
    done: list[TurnOutcome]
    thread: threading.Thread
    asked: int = 0

    def hook(self, env: dict[str, str], *args: str, stdin: str = PAYLOAD) -> Said:
        """``floorgate hook ARGS`` run by the turn's host with ``env`` (and PATH) as its environment."""
        n, self.asked = self.asked, self.asked + 1
        request = {"argv": [sys.executable, "-m", "floorgate", "hook", *args], "env": {"PATH": os.environ["PATH"], **env}, "stdin": stdin}
        (self.directory / f"req-{n}.json.tmp").write_text(json.dumps(request))
        os.replace(self.directory / f"req-{n}.json.tmp", self.directory / f"req-{n}.json")
        done = self.directory / f"res-{n}.json"
        return Said(**wait_for(lambda: done.exists() and json.loads(done.read_text()), 90, f"hook request {n}"))

    def release(self) -> TurnOutcome:
        (self.directory / "go").write_text("go")
        self.thread.join(timeout=60)
        return self.done[0]


@pytest.fixture
def live(store: Store, tmp_path: Path) -> Iterator[LiveTurn]:
    clock = FixedClock(T0)
    directory = tmp_path / "turn"
    directory.mkdir()
    envelope(store, clock, '{"max_tool_calls": 5}')
    auto = automation(store, clock, timeout=120)
    host = CommandHost(argv=(sys.executable, "-c", SERVE_HOOKS, str(directory)), timeout_seconds=120)
    auto = Automations(store, clock).edit("x", auto.spec.model_copy(update={"host": host}))
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
    done: list[TurnOutcome] = []
    thread = threading.Thread(target=lambda: done.append(executor.run(auto)), daemon=True)
    thread.start()
    seen = directory / "env.json"
    env = wait_for(lambda: seen.exists() and json.loads(seen.read_text()), 60, "the host's environment")
    turn = LiveTurn(store, env, executor, directory, env["FLOORGATE_MISSION_ID"], done, thread)
    try:
        yield turn
    finally:
        if thread.is_alive():
            turn.release()
        executor.close()


def tool_call(env: dict[str, str], *args: str) -> Any:
    """``floorgate hook pre-tool-use`` run by this test process: not a process of any turn."""
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
    refused = live.hook(env_of(live, tmp_path), "pre-tool-use")
    assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    assert counted(live) == 0
    allowed = live.hook(live.env, "pre-tool-use")  # the turn's own credential still counts
    assert allowed.returncode == 0, allowed.stderr
    assert counted(live) == 1


def test_a_token_works_only_inside_its_turn_and_only_while_it_runs(live: LiveTurn, store: Store) -> None:
    outside = tool_call(live.env)  # the turn's valid credential, read by a process outside the turn
    assert outside.returncode == 2 and "not one of turn" in outside.stderr, outside.stderr
    other = RunnerBroker(store, FixedClock(T0), "enforce")
    try:
        with other.turn(live.env["FLOORGATE_TURN_ID"]) as foreign:  # a valid token of another runner's broker
            refused = live.hook({**live.env, TOKEN_ENV: foreign.token}, "pre-tool-use")
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
    [
        pytest.param(b"garbage\n", id="not-json"),
        pytest.param(b'{"allow": "yes", "reason": ""}\n', id="allow-not-bool"),
        pytest.param(b"", id="closed"),
    ],
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
    said = live.hook(live.env, *argv[1:], stdin=PROMPT)
    assert said.returncode == code, said.stderr
