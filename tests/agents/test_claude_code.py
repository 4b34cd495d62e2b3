"""floorgate's hooks and meter against the real Claude Code, offline, with a counting stand-in.

Every test configures the hooks with ``floorgate hook install claude`` exactly as README says and
asserts on what the stand-in provider saw: a blocked wake-up makes zero model requests.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from anthropic_standin import AnthropicStandIn, Reply, bash, text

from floorgate.admission import Admission, Missions, open_store
from floorgate.admission.clock import iso

from agents_harness import claude_env, claude_print_argv, events, run_claude
from cli import run_cli

pytestmark = pytest.mark.slow

FLOORGATE = Path(sys.executable).parent / "floorgate"  # the console script of this installation
LANE = ("--goal", "g", "--agent", "a", "--automation", "x")
PROVIDER_ENV = ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "DISABLE_TELEMETRY")
PROVIDER_ENV += ("DISABLE_ERROR_REPORTING", "DISABLE_AUTOUPDATER", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC")


class World:
    """One test's HOME, agent project and store, and the stand-in Claude Code talks to."""

    def __init__(self, tmp_path: Path, standin: AnthropicStandIn, claude: Path) -> None:
        self.root = tmp_path
        self.project = tmp_path / "agent"
        self.project.mkdir()
        self.db = tmp_path / "floorgate.db"
        self.env = claude_env(tmp_path / "home", standin.url)
        self.standin = standin
        self.claude = claude

    def floorgate(self, *args: str) -> Any:
        """``floorgate ARGS`` in the test's directory, with the test's HOME (in-process)."""
        return run_cli(*args, cwd=self.root, env=self.env)

    def install(self, *extra: str) -> None:
        # As README says: the store and the project named from wherever the owner stands.
        result = self.floorgate(
            "--db", "floorgate.db", "hook", "install", "claude", "--project", "agent", *LANE, "--wake", "automatic", *extra
        )
        assert result.returncode == 0, result.stderr

    def prompt(self, *extra: str) -> subprocess.CompletedProcess[str]:
        return run_claude(self.claude, self.project, self.env, "triage the inbox", *extra)

    def settings(self) -> dict[str, Any]:
        return json.loads((self.project / ".claude" / "settings.json").read_text())

    def prompt_hook_command(self) -> str:
        command = self.settings()["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
        assert isinstance(command, str)
        return command


@pytest.fixture
def world(tmp_path: Path, claude_cli: Path) -> Any:
    with AnthropicStandIn() as standin:
        yield World(tmp_path, standin, claude_cli)


def blocked_text(result: subprocess.CompletedProcess[str]) -> str:
    """What Claude Code printed for a prompt a hook blocked (its result event says it all)."""
    [done] = [e for e in events(result.stdout) if e.get("type") == "result"]
    assert done["num_turns"] == 0 and "blocked by hook" in done["result"], done
    return str(done["result"])


# -- UserPromptSubmit ---------------------------------------------------------------------------------
def test_a_prompt_inside_the_floor_never_reaches_the_provider(world: World) -> None:
    assert world.floorgate("--db", "floorgate.db", *"policy set g/a --min-interval 24h --revision 0 --owner-ref o".split()).returncode == 0
    world.install()
    first = world.prompt()
    assert first.returncode == 0, first.stderr
    assert len(world.standin.model_calls) == 1
    second = world.prompt()
    assert len(world.standin.model_calls) == 1  # blocked before the model call
    with open_store(str(world.db)) as store:
        anchor = Admission(store).starts()[0].anchor_at
    assert f"may not wake the model before {iso(anchor + timedelta(hours=24))}" in blocked_text(second)
    assert world.standin.other_requests == []  # nothing else left for the network either


def test_a_prompt_just_before_the_floor_waits_for_it(world: World) -> None:
    """An app's timer one floor after the last wake lands a moment early: the hook waits."""
    assert world.floorgate("--db", "floorgate.db", *"policy set g/a --min-interval 3s --revision 0 --owner-ref o".split()).returncode == 0
    world.install("--wait-eligible", "20s")
    assert world.prompt().returncode == 0
    second = world.prompt()  # within 3 s of the first: waits for the floor, then wakes the model
    assert second.returncode == 0 and len(world.standin.model_calls) == 2, second.stdout[-2000:]


def test_a_store_that_cannot_be_opened_blocks(world: World) -> None:
    world.install()
    world.db.write_bytes(b"not a database, " * 512)
    out = blocked_text(world.prompt())
    assert "fail closed" in out and world.standin.model_calls == []


def test_a_corrupt_payload_blocks(world: World) -> None:
    world.install()
    # The command exactly as Claude Code runs it (with a shell), fed garbage instead of its JSON.
    hook = subprocess.run(
        ["sh", "-c", world.prompt_hook_command()], input="{not json", capture_output=True, text=True, env=world.env, timeout=60
    )
    assert hook.returncode == 2 and "fail closed" in hook.stderr and "Traceback" not in hook.stderr


def test_a_missing_floorgate_blocks(world: World) -> None:
    copy = world.root / "bin" / "floorgate"
    copy.parent.mkdir()
    shutil.copy(FLOORGATE, copy)
    world.install("--floorgate", str(copy))
    copy.unlink()  # uninstalled, a venv moved, a path typed wrong: the shell answers 127
    out = blocked_text(world.prompt())
    assert "the floorgate hook exited 127" in out and world.standin.model_calls == []
    status = world.floorgate("hook", "status", "claude", "--project", "agent")
    assert status.returncode == 1 and f"floorgate executable {copy} is missing" in status.stdout


# -- managed turns: PreToolUse and the meter ------------------------------------------------------------
def managed(world: World, compute: str, *host_args: str) -> None:
    """An envelope on g/a and automation x whose host is Claude Code in print mode, metered."""
    policy = world.floorgate("--db", "floorgate.db", "policy", "set", "g/a", "--revision", "0", "--owner-ref", "o", "--compute", compute)
    assert policy.returncode == 0, policy.stderr
    env = [a for name in PROVIDER_ENV for a in ("--env", name)]
    argv = claude_print_argv(world.claude, "work the queue", "--allowedTools", "Bash", *host_args)
    add = world.floorgate(
        "--db", "floorgate.db", "automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h",
        "--meter", "claude-stream-json", "--cwd", str(world.project), "--timeout", "60s", *env, "--", *argv,
    )  # fmt: skip
    assert add.returncode == 0, add.stderr
    world.install()


def turn(world: World) -> subprocess.CompletedProcess[str]:
    """``floorgate turn run x`` as its own process (the host's hooks reach it through its turn broker)."""
    return subprocess.run(
        [str(FLOORGATE), "--db", "floorgate.db", "turn", "run", "x"],
        cwd=world.root,
        env=world.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def mission(world: World) -> Any:
    with open_store(str(world.db)) as store:
        return Missions(store).recent("x", 1)[0]


def marker_loop(n: int, _body: object) -> Reply:
    return bash("echo step >> marks.txt") if n < 5 else text("gave up")  # calls 4 and 5 are refused


def test_the_fourth_tool_call_is_refused_and_the_mission_is_stuck(world: World) -> None:
    world.standin.script = marker_loop
    managed(world, '{"max_tool_calls": 3, "on_exhausted": "finish_stuck"}')
    result = turn(world)
    assert (world.project / "marks.txt").read_text().splitlines() == ["step"] * 3
    m = mission(world)
    assert m.status == "stuck" and m.tool_calls == 3 and "max_tool_calls=3" in (m.stop_reason or ""), result.stdout


def test_pause_ask_refuses_the_fourth_call_until_the_owner_approves(world: World) -> None:
    world.standin.script = marker_loop
    managed(world, '{"max_tool_calls": 3, "on_exhausted": "pause_ask"}')
    turn(world)
    assert (world.project / "marks.txt").read_text().count("step") == 3
    shown = world.floorgate("--db", "floorgate.db", "mission", "show", mission(world).mission_id, "--json")
    asks = [a["approval_id"] for a in json.loads(shown.stdout)["pending_asks"]]
    assert len(asks) == 1, shown.stdout
    assert world.floorgate("--db", "floorgate.db", "approve", asks[0]).returncode == 0
    resumed = len(world.standin.model_calls)  # the stand-in numbers calls across runs
    world.standin.script = lambda n, body: bash("echo step >> marks.txt") if n == resumed else text("done")
    turn(world)  # the same mission goes on with the extension
    assert (world.project / "marks.txt").read_text().count("step") == 4


def test_recorded_tokens_are_what_the_provider_reported(world: World) -> None:
    replies = [
        bash("echo step >> marks.txt", input_tokens=120, output_tokens=33, cache_read_input_tokens=900),
        text("done", output_tokens=51),
    ]
    world.standin.script = lambda n, body: replies[min(n, 1)]
    managed(world, '{"max_turns": 5}')
    assert turn(world).returncode == 0
    assert len(world.standin.replies) == 2
    assert mission(world).tokens == sum(r.tokens for r in world.standin.replies)


@pytest.mark.parametrize("compute, bound", [('{"max_turns": 2}', "max_turns=2"), ('{"max_tokens": 1500}', "max_tokens=1500")])
def test_a_bound_stops_a_mission_of_several_turns(world: World, compute: str, bound: str) -> None:
    """Each turn is one tool call and Claude Code's own --max-turns 1 (error_max_turns, a failed
    turn): the mission goes on turn after turn until the envelope stops it."""
    world.standin.script = lambda n, body: bash("echo step >> marks.txt", input_tokens=600, output_tokens=200)  # 800 a turn
    managed(world, compute, "--max-turns", "1")
    for _ in range(3):
        turn(world)
    assert len(world.standin.model_calls) == 2  # the third turn never started its host
    m = mission(world)
    assert m.turns == 2 and m.tokens == 1600 and m.status == "stuck" and bound in (m.stop_reason or ""), m


# -- Stop: the turn's usage for budgets --------------------------------------------------------------
def test_the_stop_hook_records_what_the_provider_reported_once_per_turn(tmp_path: Path, claude_cli: Path) -> None:
    from floorgate.admission.limits import Series
    from floorgate.admission.usage import Usage, UsageState
    from floorgate.admission.windows import parse_window

    usage = {"input_tokens": 1234, "output_tokens": 56, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 10}
    with AnthropicStandIn(lambda n, _body: text(f"done {n}", **usage)) as standin:
        w = World(tmp_path, standin, claude_cli)
        w.install()
        assert "Stop" in w.settings()["hooks"]
        first = w.prompt()
        assert first.returncode == 0, first.stderr
        replies = list(standin.replies)
        assert len(standin.model_calls) == len(replies) >= 1
        with open_store(str(w.db)) as store:
            day = parse_window("1d")
            totals = Usage(store).in_window(Series("g", "a", "x"), day)
            [entry] = totals.entries
            assert entry.state is UsageState.SETTLED and entry.tokens == sum(r.tokens for r in replies) == 1600
            assert entry.source.value == "hook"  # the prompt's hold, settled by the Stop hook
        second = w.prompt()
        assert second.returncode == 0, second.stderr
        with open_store(str(w.db)) as store:
            entries = Usage(store).in_window(Series("g", "a", "x"), parse_window("1d")).entries
            assert len(entries) == 2 and sum(e.tokens or 0 for e in entries) == sum(r.tokens for r in standin.replies)


def test_a_spent_daily_token_budget_blocks_the_next_prompt_with_no_provider_request(tmp_path: Path, claude_cli: Path) -> None:
    """README "Budgets" with the real CLI: the first prompt is admitted holding the estimate, its
    Stop hook settles what the stand-in reported; that spends the day's budget, so the next prompt
    makes no provider request and says budget_exhausted and the exact instant it frees."""
    from floorgate.admission.limits import Series
    from floorgate.admission.usage import Usage, UsageState
    from floorgate.admission.windows import parse_window

    with AnthropicStandIn(lambda n, _body: text(f"done {n}", input_tokens=1500, output_tokens=100)) as standin:
        w = World(tmp_path, standin, claude_cli)
        budget = "policy set g/a --budget-tokens 2000 --per 1d --estimate-tokens 1000 --revision 0 --owner-ref o"
        assert w.floorgate("--db", "floorgate.db", *budget.split()).returncode == 0
        w.install()
        first = w.prompt()
        assert first.returncode == 0, first.stderr
        calls = len(standin.model_calls)
        assert calls == len(standin.replies) >= 1
        with open_store(str(w.db)) as store:
            [entry] = Usage(store).in_window(Series("g", "a", "x"), parse_window("1d")).entries
        assert entry.state is UsageState.SETTLED and entry.tokens == sum(r.tokens for r in standin.replies) == 1600
        second = w.prompt()
        assert len(standin.model_calls) == calls  # blocked before any provider request
        said = blocked_text(second)
        assert "budget_exhausted" in said and f"may not wake the model before {iso(entry.at + timedelta(days=1))}" in said, said


# -- served hooks: 'floorgate hook serve' answers them --------------------------------------------------
@pytest.fixture
def served(world: World) -> Any:
    """A hook server for this world's runtime directory; Claude Code's hooks find it there."""
    import threading

    from floorgate.scheduler.cli.commands.hook import ServedHooks
    from floorgate.scheduler.runtime.hook_server import HookServer
    from floorgate.scheduler.runtime.hook_wire import RUNTIME_DIR_ENV

    world.env[RUNTIME_DIR_ENV] = str(world.root / "rt")
    server = HookServer(world.root / "rt", ServedHooks())
    server.bind()
    serving = threading.Thread(target=server.serve, daemon=True)
    serving.start()
    yield server
    server.stop()
    serving.join(10)


def test_a_served_prompt_hook_blocks_inside_the_floor_with_no_provider_request(world: World, served: Any) -> None:
    assert world.floorgate("--db", "floorgate.db", *"policy set g/a --min-interval 24h --revision 0 --owner-ref o".split()).returncode == 0
    world.install()
    status = world.floorgate("hook", "status", "claude", "--project", "agent")
    assert "served by the hook server" in status.stdout, status.stdout
    first = world.prompt()
    assert first.returncode == 0 and len(world.standin.model_calls) == 1, first.stderr
    second = world.prompt()
    assert len(world.standin.model_calls) == 1  # blocked before the model call
    assert "may not wake the model before" in blocked_text(second)
    assert served.answered == 3  # both prompts and the admitted one's Stop hook: by the server, not in-process


def test_with_a_hook_server_running_a_managed_turn_still_refuses_the_fourth_tool_call(world: World, served: Any) -> None:
    """A managed turn's broker answers only the turn's own processes: its hooks ask it themselves
    (the tool hook without starting floorgate's store stack), never through the server."""
    world.standin.script = marker_loop
    managed(world, '{"max_tool_calls": 3, "on_exhausted": "finish_stuck"}')
    turn(world)
    assert (world.project / "marks.txt").read_text().splitlines() == ["step"] * 3
    assert mission(world).tool_calls == 3
    assert served.answered == 0
