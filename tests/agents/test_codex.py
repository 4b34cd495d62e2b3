"""floorgate's hooks and meter against the real Codex 0.171 (``codex exec``), run offline.

Each test gets its own HOME, CODEX_HOME, project and SQLite store under tmp_path, and a stand-in
for the Responses API that counts model calls (openai_standin). What Codex does is asserted by
those counts, never by timing.

Codex facts these tests stand on (0.171.0): a UserPromptSubmit/PreToolUse command hook blocks on
exit 2 *with a non-empty stderr* (exit 2 without stderr, any other exit code, a missing command
(127) and a hook timeout all let the prompt or call through); ``codex exec`` exits 0 either way
and prints no reason; a hook runs only when its project is trusted and its hash is recorded as
trusted in ``$CODEX_HOME/config.toml`` (see scheduler/_codex_trust.py), otherwise it is skipped
without a word.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from openai_standin import API_KEY_ENV, PROVIDER, Reply, Server, StandIn, shell_call, text_reply

from floorgate.scheduler.agents._codex_trust import codex_hook_hash, codex_hook_trust, owner_trust_toml

pytestmark = pytest.mark.slow

FLOORGATE = Path(sys.executable).with_name("floorgate")  # the console script of this venv
GOAL, AGENT = "inbox", "triage"
CODEX_TIMEOUT = 120  # a hang is a failure, not a wait


def blocking(command: str) -> str:
    """A hook command that blocks whenever ``command`` fails, however it fails: Codex lets a
    prompt through on any exit code but 2, and on 2 without stderr (a missing floorgate is 127)."""
    return f'{command} || {{ echo "floorgate hook failed (exit $?)" >&2; exit 2; }}'


def hand_written_hooks(project: Path, codex_home: Path, *, db: str, automation: str, floorgate: Path = FLOORGATE, wrap=blocking) -> None:  # type: ignore[no-untyped-def]
    """Hooks written by hand, not by 'hook install' (for what its output cannot show: a payload
    that is not JSON, a command left unguarded), trusted as their owner would."""
    fg = shlex.quote(str(floorgate))
    prompt = f"{fg} --db {shlex.quote(db)} hook user-prompt-submit --goal {GOAL} --agent {AGENT} --automation {automation} --wake automatic"
    commands = {"UserPromptSubmit": wrap(prompt), "PreToolUse": wrap(f"{fg} hook pre-tool-use")}
    hooks_json = project / ".codex" / "hooks.json"
    hooks_json.parent.mkdir(parents=True, exist_ok=True)
    hooks_json.write_text(
        json.dumps({"hooks": {event: [{"hooks": [{"type": "command", "command": cmd}]}] for event, cmd in commands.items()}}, indent=2)
    )
    with (codex_home / "config.toml").open("a") as fh:
        fh.write("\n" + owner_trust_toml(hooks_json.resolve(), commands, project.resolve()))


@dataclass
class CodexWorld:
    """One hermetic Codex setup: HOME, CODEX_HOME, a project, a store and the provider stand-in."""

    root: Path
    cli: Path
    server: Server
    home: Path = field(init=False)
    codex_home: Path = field(init=False)
    project: Path = field(init=False)
    db: str = field(init=False)
    extra_env: dict[str, str] = field(default_factory=dict)  # more of the caller's environment (a hook server's directory)

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        self.codex_home = self.home / ".codex"
        self.project = self.root / "project"
        self.codex_home.mkdir(parents=True)
        self.project.mkdir()
        self.db = str(self.root / "floorgate.db")
        # Offline and quiet: our provider only (its key from the env), no update check, no
        # analytics, no plugin sync (which reaches github.com and chatgpt.com); the model's
        # metadata is unknown to Codex, which it only warns about.
        (self.codex_home / "config.toml").write_text(
            f'model = "gpt-standin"\nmodel_provider = "{PROVIDER}"\ncheck_for_update_on_startup = false\n\n'
            "[features]\nplugins = false\n\n"
            f'[model_providers.{PROVIDER}]\nname = "stand-in"\nbase_url = "{self.server.base_url}"\nwire_api = "responses"\n'
            f'env_key = "{API_KEY_ENV}"\nrequest_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n'
        )

    @property
    def standin(self) -> StandIn:
        return self.server.standin

    @property
    def env(self) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "CODEX_HOME": str(self.codex_home),
            API_KEY_ENV: "sk-standin",
            "LANG": "C.UTF-8",
            "HTTPS_PROXY": self.server.proxy_url,
            "HTTP_PROXY": self.server.proxy_url,
            "NO_PROXY": "127.0.0.1,localhost",
            **self.extra_env,
        }

    def codex_argv(self, prompt: str, *, json_events: bool = True) -> list[str]:
        # Tool calls run unsandboxed: the sandbox's bubblewrap is not what these tests qualify.
        flags = ["--json"] if json_events else []
        return [str(self.cli), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", *flags, prompt]

    def codex(self, prompt: str = "wake up", *, json_events: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.codex_argv(prompt, json_events=json_events),
            cwd=cwd or self.project,
            env=self.env,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=CODEX_TIMEOUT,
        )

    def floorgate(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(FLOORGATE), "--db", self.db, *args], cwd=self.project, env=self.env, capture_output=True, text=True, timeout=CODEX_TIMEOUT
        )
        if check and out.returncode != 0:
            raise AssertionError(f"floorgate {' '.join(args)} exited {out.returncode}: {out.stderr}")
        return out

    def floorgate_json(self, *args: str) -> dict:  # type: ignore[type-arg]
        return json.loads(self.floorgate(*args, "--json").stdout)

    def install(self, automation: str, *extra: str, db: str | None = None) -> subprocess.CompletedProcess[str]:
        """``floorgate --db DB hook install codex --project P ...`` as README shows it."""
        lane = ("--goal", GOAL, "--agent", AGENT, "--automation", automation, "--wake", "automatic")
        argv = [str(FLOORGATE), "--db", db or self.db, "hook", "install", "codex", "--project", str(self.project), *lane, *extra]
        out = subprocess.run(argv, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=CODEX_TIMEOUT)
        assert out.returncode == 0, out.stderr
        return out

    def installed_command(self, event: str) -> str:
        doc = json.loads((self.project / ".codex" / "hooks.json").read_text())
        [command] = [h["command"] for g in doc["hooks"][event] for h in g["hooks"]]
        return command


@pytest.fixture
def world(tmp_path: Path, codex_cli: Path):  # type: ignore[no-untyped-def]
    server = Server()
    try:
        yield CodexWorld(tmp_path, codex_cli, server)
        assert server.standin.escapes == [], "Codex tried to reach the internet"
    finally:
        server.close()


def _external_lane(world: CodexWorld, automation: str = "morning") -> None:
    world.floorgate("policy", "set", f"{GOAL}/{AGENT}", "--min-interval", "24h", "--revision", "0", "--owner-ref", "qual")
    world.floorgate(
        "automation", "add", automation, "--goal", GOAL, "--agent", AGENT, "--schedule", "daily at 09:00 UTC", "--timer", "external"
    )


def _iso_z(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


# -- UserPromptSubmit ----------------------------------------------------------------------------


def test_prompt_inside_the_floor_never_reaches_the_model(world: CodexWorld) -> None:
    _external_lane(world)
    world.install("morning", "--trust")

    first = world.codex()
    assert first.returncode == 0, first.stderr
    assert len(world.standin.model_calls) == 1
    (start,) = world.floorgate_json("starts", "--goal", GOAL)["starts"]
    assert start["automation"] == "morning" and start["phase"] == "confirmed"
    # The hook answered from inside Codex: the lane's guarantee is now the pre-model hook.
    assert world.floorgate_json("automation", "show", "morning")["timer"]["guarantee"] == "pre-model hook"

    second = world.codex(json_events=False)
    assert len(world.standin.model_calls) == 1  # the second wake cost nothing
    assert "hook: UserPromptSubmit Blocked" in second.stderr
    assert len(world.floorgate_json("starts", "--goal", GOAL)["starts"]) == 1

    # codex exec prints no hook reason; the same command says exactly when the lane may run.
    payload = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "wake up", "cwd": str(world.project)})
    told = subprocess.run(
        ["sh", "-c", world.installed_command("UserPromptSubmit")], input=payload, capture_output=True, text=True, env=world.env, timeout=60
    )
    assert told.returncode == 2
    due = _iso_z(start["anchor_at"]) + timedelta(hours=24)
    assert f"may not wake the model before {due.isoformat().replace('+00:00', 'Z')}" in told.stderr


@pytest.mark.parametrize(
    "case",
    ["store_unopenable", "payload_corrupt", "floorgate_missing"],
)
def test_prompt_hook_fails_closed_inside_codex(world: CodexWorld, case: str) -> None:
    _external_lane(world)
    if case == "payload_corrupt":
        hand_written_hooks(
            world.project, world.codex_home, db=world.db, automation="morning", wrap=lambda c: blocking(f"printf '{{not json' | {c}")
        )
    elif case == "store_unopenable":
        store_dir = world.root / "store"
        store_dir.mkdir()
        db = str(store_dir / "floorgate.db")
        world.floorgate("--db", db, "policy", "set", f"{GOAL}/{AGENT}", "--min-interval", "24h", "--revision", "0", "--owner-ref", "qual")
        world.install("morning", "--trust", db=db)
        store_dir.rename(world.root / "store-moved")  # the store the hook names is gone
    else:
        copy = world.root / "bin" / "floorgate"
        copy.parent.mkdir()
        copy.write_text(f'#!/bin/sh\nexec {shlex.quote(str(FLOORGATE))} "$@"\n')
        copy.chmod(0o755)
        world.install("morning", "--trust", "--floorgate", str(copy))
        copy.unlink()  # floorgate was uninstalled after its hooks were
    out = world.codex(json_events=False)
    assert "hook: UserPromptSubmit Blocked" in out.stderr, out.stderr
    assert world.standin.model_calls == []


def test_a_bare_missing_floorgate_lets_the_prompt_through(world: CodexWorld) -> None:
    """Why 'hook install' guards the command: Codex reads exit 127 as a hook error, not a block."""
    _external_lane(world)
    hand_written_hooks(
        world.project, world.codex_home, db=world.db, automation="morning", floorgate=world.root / "nope" / "floorgate", wrap=str
    )
    world.codex()
    assert len(world.standin.model_calls) == 1


# -- PreToolUse and the meter, inside a managed turn ----------------------------------------------


def _managed_lane(world: CodexWorld, compute: dict, *, argv_wrap: str | None = None) -> None:  # type: ignore[type-arg]
    """A floorgate-launched automation whose host is ``codex exec --json`` read by the codex-json meter."""
    world.floorgate(
        "policy",
        "set",
        f"{GOAL}/{AGENT}",
        "--min-interval",
        "0",
        "--revision",
        "0",
        "--owner-ref",
        "qual",
        "--compute",
        json.dumps(compute),
    )
    argv = world.codex_argv("work through the task")
    if argv_wrap is not None:
        argv = ["sh", "-c", argv_wrap.format(codex=shlex.join(argv))]
    world.floorgate(
        "automation", "add", "work", "--goal", GOAL, "--agent", AGENT, "--schedule", "every 1h",
        "--cwd", str(world.project), "--env", "CODEX_HOME", "--env", API_KEY_ENV, "--env", "HTTPS_PROXY", "--env", "HTTP_PROXY",
        "--env", "NO_PROXY", "--meter", "codex-json", "--", *argv,
    )  # fmt: skip
    world.install("work", "--trust")


def _turn(world: CodexWorld) -> subprocess.CompletedProcess[str]:
    return world.floorgate("turn", "run", "work", "--state-dir", str(world.root / "state"), check=False)


def _mission(world: CodexWorld) -> dict:  # type: ignore[type-arg]
    (latest, *_) = world.floorgate_json("mission", "list", "--automation", "work")["missions"]
    return latest


def test_the_tool_call_past_max_tool_calls_is_refused_and_the_mission_is_stuck(world: CodexWorld) -> None:
    world.standin.script = [Reply((shell_call("echo ran >> marker"),)) for _ in range(6)] + [text_reply("done")]
    _managed_lane(world, {"max_tool_calls": 3})

    out = _turn(world)
    assert (world.project / "marker").read_text().splitlines() == ["ran"] * 3, out.stderr
    mission = _mission(world)
    assert mission["status"] == "stuck" and mission["tool_calls"] == 3
    assert "compute bound exhausted: max_tool_calls=3" in mission["stop_reason"]
    # Codex exits 0 after a refused call; the turn is still the one the envelope stopped.
    assert out.returncode == 5 and "stuck" in out.stdout, out.stdout
    assert world.floorgate_json("automation", "show", "work")["state"] == "held"
    # The model was told why: Codex hands the hook's stderr back as the call's output.
    refused = [
        item["output"]
        for call in world.standin.model_calls
        for item in call.body["input"]
        if isinstance(item, dict) and item.get("type") == "function_call_output" and "floorgate" in str(item.get("output"))
    ]
    assert refused and "Command blocked by PreToolUse hook: floorgate:" in refused[0]


def test_codex_json_meter_records_what_the_provider_reported(world: CodexWorld) -> None:
    world.standin.script = [
        Reply((shell_call("echo ran >> marker"),), input_tokens=1200, output_tokens=80, cached_tokens=500),
        Reply(text_reply("done").items, input_tokens=1400, output_tokens=30, cached_tokens=1100),
    ]
    _managed_lane(world, {"max_tokens": 1_000_000})

    out = _turn(world)
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(world.standin.model_calls) == 2
    mission = _mission(world)
    assert mission["tokens"] == (1200 + 80) + (1400 + 30)  # cached input is part of input, counted once


@pytest.mark.parametrize(
    "compute, bound", [({"max_turns": 2}, "max_turns=2"), ({"max_tokens": 250}, "max_tokens=250")], ids=["max_turns", "max_tokens"]
)
def test_turn_and_token_bounds_stop_a_mission_of_several_codex_turns(world: CodexWorld, compute: dict, bound: str) -> None:  # type: ignore[type-arg]
    # Each turn spends 150 tokens and then fails, so the mission goes on to its next turn.
    world.standin.default = text_reply("not yet", input_tokens=100, output_tokens=50)
    _managed_lane(world, compute, argv_wrap="{codex}; exit 1")

    assert [_turn(world).returncode for _ in range(2)] == [5, 5]  # failed turns (exit 1), mission open
    assert len(world.standin.model_calls) == 2 and _mission(world)["tokens"] == 300
    third = _turn(world)
    assert third.returncode == 5 and bound in third.stdout, third.stdout
    assert len(world.standin.model_calls) == 2  # the bound stopped it before Codex ran again
    mission = _mission(world)
    assert mission["status"] == "stuck" and mission["turns"] == 2


# -- trust: will Codex run the hooks at all? -------------------------------------------------------


def _edit_config(world: CodexWorld, old: str, new: str) -> None:
    config = world.codex_home / "config.toml"
    text = config.read_text()
    assert old in text
    config.write_text(text.replace(old, new))


def _edit_hooks(world: CodexWorld, old: str, new: str) -> None:
    hooks = world.project / ".codex" / "hooks.json"
    hooks.write_text(hooks.read_text().replace(old, new))


def _retrusted_with_timeout(world: CodexWorld, seconds: int) -> None:
    """The owner gives the prompt hook a timeout of ``seconds`` and trusts it again, its hash as
    floorgate computes it (what ``hook status codex`` compares)."""
    hooks = world.project / ".codex" / "hooks.json"
    doc = json.loads(hooks.read_text())
    handler = doc["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    command, status = handler["command"], handler.get("statusMessage")
    before = codex_hook_hash("UserPromptSubmit", command, timeout=handler.get("timeout"), status_message=status)
    handler["timeout"] = seconds
    hooks.write_text(json.dumps(doc))
    _edit_config(world, before, codex_hook_hash("UserPromptSubmit", command, timeout=seconds, status_message=status))


def _git_subdir(world: CodexWorld, trusted: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(world.project)], check=True, timeout=60)
    (world.project / "sub").mkdir()
    _edit_config(world, f'[projects."{world.project.resolve()}"]', f'[projects."{trusted.resolve()}"]')
    return world.project / "sub"


def _to_codex_home(world: CodexWorld) -> None:
    """Move the hooks to Codex's own home, where they need no project trust."""
    (world.project / ".codex" / "hooks.json").rename(world.codex_home / "hooks.json")
    _edit_config(world, f"{world.project.resolve()}/.codex/hooks.json:", f"{world.codex_home.resolve()}/hooks.json:")
    _edit_config(world, 'trust_level = "trusted"', 'trust_level = "untrusted"')


TRUST_CASES = {
    # case: (what the owner did after 'hook install codex --trust', Codex runs the hook, why not)
    "trusted": (lambda w: None, True, None),
    "hook_never_trusted": (lambda w: _edit_config(w, "trusted_hash", "# trusted_hash"), False, "is not trusted"),
    "project_not_trusted": (
        lambda w: _edit_config(w, 'trust_level = "trusted"', 'trust_level = "untrusted"'),
        False,
        "does not trust the project",
    ),
    "hook_edited_after_trust": (lambda w: _edit_hooks(w, "--wake", " --wake"), False, "changed since it was trusted"),
    "hook_disabled": (lambda w: _edit_config(w, "trusted_hash", "enabled = false\ntrusted_hash"), False, "is disabled"),
    "hooks_feature_off": (
        lambda w: _edit_config(w, "plugins = false", "plugins = false\nhooks = false"),
        False,
        "hooks are turned off",
    ),
    "user_hooks_json_trusted": (_to_codex_home, True, None),
    "hook_timeout_zero_retrusted": (lambda w: _retrusted_with_timeout(w, 0), True, None),
    "hook_timeout_five_retrusted": (lambda w: _retrusted_with_timeout(w, 5), True, None),
    "git_subdir_trusted_at_checkout": (lambda w: _git_subdir(w, w.project), True, None),
    "git_subdir_trusted_at_subdir_only": (lambda w: _git_subdir(w, w.project / "sub"), False, "does not trust the project"),
}


@pytest.mark.parametrize("case", list(TRUST_CASES))
def test_codex_trust_is_read_from_disk_as_codex_decides(world: CodexWorld, case: str) -> None:
    change, runs, why = TRUST_CASES[case]
    # A prompt hook that blocks whenever it runs: a model call means Codex skipped it.
    blocker = world.root / "bin" / "floorgate"
    blocker.parent.mkdir()
    blocker.write_text("#!/bin/sh\necho 'blocked whenever it runs' >&2\nexit 2\n")
    blocker.chmod(0o755)
    world.install("morning", "--trust", "--floorgate", str(blocker))
    cwd = change(world) or world.project

    trust = codex_hook_trust(cwd, world.codex_home)
    assert trust.runs("UserPromptSubmit") is runs
    if why is not None:
        assert why in (trust.why_not("UserPromptSubmit") or "")

    world.codex(cwd=cwd)
    assert len(world.standin.model_calls) == (0 if runs else 1)


def test_an_untrusted_install_is_reported_and_never_counted_as_a_guarantee(world: CodexWorld) -> None:
    _external_lane(world)
    installed = world.install("morning")  # as README's first step: no --trust yet
    assert "Codex will NOT run them yet" in installed.stdout and "[hooks.state." in installed.stdout

    def hook_status() -> subprocess.CompletedProcess[str]:
        return world.floorgate("hook", "status", "codex", "--project", str(world.project), check=False)

    def guarantee() -> dict:  # type: ignore[type-arg]
        [row] = [r for r in world.floorgate_json("status")["automations"] if r["automation"] == "morning"]
        return row["timer"]  # type: ignore[no-any-return]

    told = hook_status()
    assert told.returncode == 1 and "Codex will not run it: Codex does not trust the project" in told.stdout, told.stdout
    assert guarantee()["guarantee"] == "schedule-only" and "will not run" in guarantee()["guarantee_why"]
    world.codex()
    assert len(world.standin.model_calls) == 1  # Codex skipped the hook without a word
    assert world.floorgate_json("starts", "--goal", GOAL)["starts"] == []

    # Trusted, the hook answers and the guarantee holds; reinstalled with another wait, the hook
    # is changed since its owner trusted it: Codex skips it again although it answered a moment ago.
    world.install("morning", "--trust")
    assert hook_status().returncode == 0
    world.codex()
    assert len(world.standin.model_calls) == 2 and guarantee()["guarantee"] == "pre-model hook"
    world.install("morning", "--wait-eligible", "10s")
    assert hook_status().returncode == 1 and "changed since it was trusted" in hook_status().stdout
    promise = guarantee()
    assert promise["guarantee"] == "schedule-only" and "changed since it was trusted" in promise["guarantee_why"]
    world.codex()
    assert len(world.standin.model_calls) == 3  # inside the 24 h floor, and nothing stopped it


def test_the_stop_hook_records_what_the_provider_reported_once_per_turn(world: CodexWorld) -> None:
    from floorgate.admission import open_store
    from floorgate.admission.limits import Series
    from floorgate.admission.usage import Usage, UsageState
    from floorgate.admission.windows import parse_window

    world.standin.script = [
        Reply((shell_call("echo ran >> marker"),), input_tokens=1200, output_tokens=80, cached_tokens=500),
        Reply(text_reply("done").items, input_tokens=1400, output_tokens=30, cached_tokens=1100),
    ]
    world.install("morning", "--trust")
    out = world.codex()
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(world.standin.model_calls) == 2
    with open_store(world.db) as store:
        [entry] = Usage(store).in_window(Series(GOAL, AGENT, "morning"), parse_window("1d")).entries
    assert entry.state is UsageState.SETTLED and entry.tokens == (1200 + 80) + (1400 + 30) and entry.model == "gpt-standin"


def test_a_spent_daily_token_budget_blocks_the_next_codex_wake_with_no_model_call(world: CodexWorld) -> None:
    """The Stop hook settles what the stand-in reported; that spends the day's token budget, so the
    next wake makes no model call, and the installed hook names budget_exhausted and the instant."""
    from floorgate.admission import open_store
    from floorgate.admission.clock import iso
    from floorgate.admission.limits import Series
    from floorgate.admission.usage import Usage, UsageState
    from floorgate.admission.windows import parse_window

    world.floorgate(
        "policy", "set", f"{GOAL}/{AGENT}", "--budget-tokens", "3000", "--per", "1d", "--estimate-tokens", "1000",
        "--revision", "0", "--owner-ref", "qual",
    )  # fmt: skip
    world.standin.script = [Reply(text_reply("done").items, input_tokens=2500, output_tokens=210)]
    world.install("morning", "--trust")
    assert world.codex().returncode == 0 and len(world.standin.model_calls) == 1
    with open_store(world.db) as store:
        [entry] = Usage(store).in_window(Series(GOAL, AGENT, "morning"), parse_window("1d")).entries
    assert entry.state is UsageState.SETTLED and entry.tokens == 2500 + 210
    second = world.codex(json_events=False)
    assert len(world.standin.model_calls) == 1  # blocked before any model call
    assert "hook: UserPromptSubmit Blocked" in second.stderr
    payload = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "wake up", "cwd": str(world.project)})
    told = subprocess.run(
        ["sh", "-c", world.installed_command("UserPromptSubmit")], input=payload, capture_output=True, text=True, env=world.env, timeout=60
    )
    assert told.returncode == 2 and "budget_exhausted" in told.stderr, told.stderr
    assert f"may not wake the model before {iso(entry.at + timedelta(days=1))}" in told.stderr, told.stderr


def test_a_served_prompt_hook_blocks_inside_the_floor_with_no_model_call(world: CodexWorld) -> None:
    """With 'floorgate hook serve' running, Codex's prompt hook is answered by it: the same block."""
    import threading

    from floorgate.scheduler.cli.commands.hook import ServedHooks
    from floorgate.scheduler.runtime.hook_server import HookServer
    from floorgate.scheduler.runtime.hook_wire import RUNTIME_DIR_ENV

    world.extra_env[RUNTIME_DIR_ENV] = str(world.root / "rt")
    server = HookServer(world.root / "rt", ServedHooks())
    server.bind()
    serving = threading.Thread(target=server.serve, daemon=True)
    serving.start()
    try:
        _external_lane(world)
        world.install("morning", "--trust")
        assert world.codex().returncode == 0 and len(world.standin.model_calls) == 1
        second = world.codex(json_events=False)
        assert len(world.standin.model_calls) == 1 and "hook: UserPromptSubmit Blocked" in second.stderr
        answered = server.answered
    finally:
        server.stop()
        serving.join(10)
    assert answered >= 2  # both prompts (and any Stop hook) answered by the server
