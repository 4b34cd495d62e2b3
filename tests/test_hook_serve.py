"""``floorgate hook serve``: a served hook answers as the in-process hook does, imports almost
nothing, and never trusts a server of another user or other code, nor one that dies mid-request.
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from floorgate.admission import Admission, FixedClock, Store
from floorgate.scheduler.cli import entry
from floorgate.scheduler.cli.commands.hook import ServedHooks
from floorgate.scheduler.cli.main import run
from floorgate.scheduler.runtime import hook_wire
from floorgate.scheduler.runtime.hook_server import HookServer

from helpers import add_automation, floor

PAYLOAD = '{"session_id": "s", "prompt": "go"}'


@pytest.fixture
def rundir(tmp_path: Path) -> Path:
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    return d


@pytest.fixture
def server(rundir: Path) -> Iterator[HookServer]:
    srv = HookServer(rundir, ServedHooks())
    srv.bind()
    t = threading.Thread(target=srv.serve, daemon=True)
    t.start()
    yield srv
    srv.stop()
    t.join(10)


def _prompt(db: str, lane: str, *extra: str) -> list[str]:
    return ["hook", "user-prompt-submit", "--db", db, "--goal", "g", "--agent", "a", "--automation", lane, "--wake", "automatic", *extra]


def _tool(db: str) -> list[str]:
    return ["hook", "pre-tool-use", "--db", db]


def _in_process(argv: list[str], stdin: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    err = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    monkeypatch.setattr(sys, "stderr", err)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = run(argv)
    monkeypatch.undo()
    return code, err.getvalue()


def _same(text: str, lane: str) -> str:
    """A hook's message with what differs between two identical lanes taken out (the lane, the time)."""
    return re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "T", text.replace(f"/{lane}", "/LANE").replace(f"'{lane}'", "'LANE'"))


def _lanes(store: Store, case: str) -> None:
    now = datetime.now(UTC)
    clock = FixedClock(now)
    for lane in ("served", "local"):
        add_automation(store, clock, lane)
    if case in ("floor-denies", "wait-too-long"):
        floor(store, clock, "g/a", timedelta(hours=1))
    if case == "floor-denies":
        for lane in ("served", "local"):
            Admission(store, clock).reserve(goal="g", agent="a", automation=lane, turn_id=f"t-{lane}", trigger_time=now)
            Admission(store, clock).confirm(f"t-{lane}")


CASES = {
    # case: (argv builder, stdin, env, expected exit)
    "admits": (lambda db, lane: _prompt(db, lane, "--wait-eligible", "0s"), PAYLOAD, {}, 0),
    "floor-denies": (lambda db, lane: _prompt(db, lane, "--wait-eligible", "0s"), PAYLOAD, {}, 2),
    "bad-payload-blocks": (lambda db, lane: _prompt(db, lane), "not json", {}, 2),
    "manual-without-reason-blocks": (lambda db, lane: [*_prompt(db, lane)[:-1], "manual"], PAYLOAD, {}, 2),
    "stop-without-a-transcript": (
        lambda db, lane: ["hook", "stop", "--db", db, "--goal", "g", "--agent", "a", "--automation", lane],
        '{"session_id": "s", "transcript_path": "/nonexistent/t.jsonl"}',
        {},
        0,
    ),
    "stop-with-a-bad-payload": (
        lambda db, lane: ["hook", "stop", "--db", db, "--goal", "g", "--agent", "a", "--automation", lane],
        "[]",
        {},
        1,
    ),
    "tool-outside-a-mission": (lambda db, lane: _tool(db), '{"tool_name": "Bash"}', {}, 0),
    "tool-of-an-unknown-mission": (lambda db, lane: _tool(db), '{"tool_name": "Bash"}', {"FLOORGATE_MISSION_ID": "m-none"}, 2),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_served_hook_answers_as_the_in_process_hook(
    store: Store, db_url: str, server: HookServer, rundir: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _lanes(store, case)
    build, stdin, env, expected = CASES[case]
    served = entry.ask_server(build(db_url, "served"), stdin, {hook_wire.RUNTIME_DIR_ENV: str(rundir), **env}, age=0.0)
    local = _in_process(build(db_url, "local"), stdin, env, monkeypatch)
    assert served[0] == local[0] == expected
    assert _same(served[1], "served") == _same(local[1], "local")


def test_a_served_admission_is_the_atomic_one_a_second_prompt_is_denied(
    store: Store, db_url: str, server: HookServer, rundir: Path
) -> None:
    _lanes(store, "wait-too-long")  # a floor, no start yet
    env = {hook_wire.RUNTIME_DIR_ENV: str(rundir)}
    argv = _prompt(db_url, "served", "--wait-eligible", "0s")
    first = entry.ask_server(argv, PAYLOAD, env, age=0.0)
    second = entry.ask_server(argv, PAYLOAD, env, age=0.0)
    assert (first[0], second[0]) == (0, 2)
    assert "interval_wait" in second[1]


def test_a_server_of_other_code_does_not_answer_and_decides_nothing(store: Store, db_url: str, rundir: Path) -> None:
    _lanes(store, "wait-too-long")
    srv = HookServer(rundir, ServedHooks(), identity=lambda: "other code")
    srv.bind()
    t = threading.Thread(target=srv.serve, daemon=True)
    t.start()
    try:
        with pytest.raises(hook_wire.Unserved, match="another code version"):
            entry.ask_server(_prompt(db_url, "served", "--wait-eligible", "0s"), PAYLOAD, {hook_wire.RUNTIME_DIR_ENV: str(rundir)}, age=0.0)
        # Nothing was admitted: the lane's first prompt in-process is still admitted.
        code, _ = _subprocess_hook(_prompt(db_url, "served", "--wait-eligible", "0s"), rundir / "none")
        assert code == 0
    finally:
        srv.stop()
        t.join(10)


def _subprocess_hook(argv: list[str], rundir: Path, stdin: str = PAYLOAD) -> tuple[int, str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(rundir.parent), "LANG": "C.UTF-8", hook_wire.RUNTIME_DIR_ENV: str(rundir)}
    done = subprocess.run([sys.executable, "-m", "floorgate", *argv], input=stdin, capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, done.stderr


# A stand-in server that says "admit" to anything: only a hook that trusts it wrongly would admit.
_FAKE = """
import os, socket, sys
path, mode = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
if mode == "other-uid":
    os.chmod(path, 0o777)
    os.setuid(65534)
s.listen(8)
print("ready", flush=True)
conn, _ = s.accept()
conn.recv(1 << 20)
if mode == "dies":
    os.kill(os.getpid(), 9)
conn.sendall(b'{"v":1,"exit":0,"stderr":""}\\n')
"""


@pytest.mark.parametrize("mode", ["other-uid", "dies"])
def test_a_server_of_another_user_or_one_that_dies_mid_request_never_admits(store: Store, db_url: str, rundir: Path, mode: str) -> None:
    if mode == "other-uid" and os.getuid() != 0:
        pytest.skip("running a server as another user needs root")
    _lanes(store, "floor-denies")  # in-process, the lane is denied
    fake = subprocess.Popen([sys.executable, "-c", _FAKE, str(rundir / hook_wire.SOCKET_NAME), mode], stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
        code, err = _subprocess_hook(_prompt(db_url, "served", "--wait-eligible", "0s"), rundir)
    finally:
        fake.kill()
        fake.wait(10)
    assert code == 2, err
    assert "interval_wait" in err  # the in-process hook's own decision


def test_a_server_that_takes_the_request_and_never_answers_blocks_at_the_hook_deadline(store: Store, db_url: str, rundir: Path) -> None:
    _lanes(store, "admits")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(rundir / hook_wire.SOCKET_NAME))
    listener.listen(1)
    try:
        with pytest.raises(entry._Expired):  # the hook then blocks: the server may be deciding
            entry.ask_server(_prompt(db_url, "served", "--hook-timeout", "3s"), PAYLOAD, {hook_wire.RUNTIME_DIR_ENV: str(rundir)}, age=1.0)
    finally:
        listener.close()


@pytest.mark.parametrize("problem", ["mode", "symlink", "missing"])
def test_a_socket_directory_that_is_not_private_is_not_used(tmp_path: Path, problem: str) -> None:
    d = tmp_path / "rt"
    if problem == "mode":
        d.mkdir(mode=0o755)
        d.chmod(0o755)
    elif problem == "symlink":
        (tmp_path / "real").mkdir(mode=0o700)
        d.symlink_to(tmp_path / "real")
    assert hook_wire.private_dir_problem(d) is not None
    with pytest.raises(hook_wire.Unserved):
        entry.ask_server(_tool(str(tmp_path / "s.db")), "{}", {hook_wire.RUNTIME_DIR_ENV: str(d)}, age=0.0)


# What the served hook's process must never load: the store's stack, the full command line.
CLIENT_NEVER = (
    "sqlalchemy",
    "pydantic",
    "psycopg",
    "alembic",
    "floorgate.admission",
    "floorgate.hosts",
    "floorgate.scheduler.app",
    "floorgate.scheduler.cli.main",
    "floorgate.scheduler.cli.commands",
    "argparse",
)

_CLIENT = """
import json, os, sys
report = sys.argv[1]
real = os._exit
def _exit(code):
    with open(report, "w") as f:
        json.dump({"code": code, "modules": sorted(sys.modules)}, f)
    real(code)
os._exit = _exit
sys.argv = ["floorgate", *sys.argv[2:]]
from floorgate.scheduler.cli.entry import main
main()
"""


def _client(tmp_path: Path, argv: list[str], stdin: str, **env: str) -> tuple[dict, subprocess.CompletedProcess[str]]:  # type: ignore[type-arg]
    """Run the console entry in a fresh interpreter: what it answered with ``os._exit`` (a served
    answer; the in-process path never calls it) and every module it imported by then."""
    report = tmp_path / "modules.json"
    report.unlink(missing_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8", **env}
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, str(report), *argv], input=stdin, capture_output=True, text=True, env=env, timeout=120
    )
    return (json.loads(report.read_text()) if report.exists() else {}), done


def _heavy(found: dict) -> list[str]:  # type: ignore[type-arg]
    return sorted(m for m in found["modules"] if any(m == f or m.startswith(f + ".") for f in CLIENT_NEVER))


@pytest.mark.parametrize("denied", [False, True], ids=["admitted", "denied"])
def test_a_served_hook_imports_almost_nothing(
    store: Store, db_url: str, server: HookServer, rundir: Path, tmp_path: Path, denied: bool
) -> None:
    _lanes(store, "floor-denies" if denied else "admits")
    found, done = _client(tmp_path, _prompt(db_url, "served", "--wait-eligible", "0s"), PAYLOAD, **{hook_wire.RUNTIME_DIR_ENV: str(rundir)})
    assert found, done.stderr  # answered by the server
    assert found["code"] == (2 if denied else 0)
    assert _heavy(found) == []


# A stand-in for a managed turn's broker: it refuses the call, or closes without an answer.
_BROKER = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1])
s.listen(8)
print("ready", flush=True)
while True:
    conn, _ = s.accept()
    conn.recv(65536)
    if sys.argv[2] == "refuses":
        conn.sendall(b'{"allow": false, "reason": "max_tool_calls=3 reached"}\\n')
    conn.close()
"""


@pytest.mark.parametrize("broker", ["refuses", "closes"])
def test_a_managed_turn_s_tool_hook_asks_its_broker_itself_and_blocks_when_it_fails(tmp_path: Path, broker: str) -> None:
    sock = tmp_path / "turn.sock"
    fake = subprocess.Popen([sys.executable, "-c", _BROKER, str(sock), broker], stdout=subprocess.PIPE, text=True)
    try:
        assert fake.stdout is not None and fake.stdout.readline().strip() == "ready"
        turn = {"FLOORGATE_TURN_SOCKET": str(sock), "FLOORGATE_TURN_TOKEN": "t", "FLOORGATE_MISSION_ID": "m-1"}
        found, done = _client(tmp_path, ["hook", "pre-tool-use", "--hook-timeout", "10s"], '{"tool_name": "Bash"}', **turn)
    finally:
        fake.kill()
        fake.wait(10)
    if broker == "refuses":  # answered without floorgate's store stack
        assert found and found["code"] == 2 and _heavy(found) == []
        assert done.stderr == "floorgate: Bash refused: max_tool_calls=3 reached\n"
    else:  # the in-process hook asked again and blocked on the failure
        assert not found and done.returncode == 2
        assert "tool call refused (fail closed)" in done.stderr


def test_a_second_server_for_the_same_directory_is_refused(server: HookServer, rundir: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(rundir.parent), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-m", "floorgate", "hook", "serve", "--runtime-dir", str(rundir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "already serves" in done.stderr
    assert hook_wire.probe({hook_wire.RUNTIME_DIR_ENV: str(rundir)}) is None  # the first still serves
