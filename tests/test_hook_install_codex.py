"""``floorgate hook install|uninstall|status codex`` without Codex: what it writes, where, what it
tells the owner, and what readback makes of a Codex hook its owner has not trusted.

tests/agents/test_codex.py runs the same install under the real Codex 0.171.
"""

from __future__ import annotations

import json
import tomllib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from floorgate.admission import Automations, FixedClock, open_store
from floorgate.admission.clock import SystemClock, read_clock
from floorgate.admission.liveness import HookAnswers, HookInstalls
from floorgate.scheduler.agents._codex_trust import codex_hook_trust
from floorgate.scheduler.app.timers import TimerService

from cli import run_cli

LANE = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
THEIRS = {
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/usr/local/bin/audit-prompt"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    }
}
CONFIG = 'model = "gpt-5"\n\n[features]\nplugins = false\n\n[projects."/elsewhere"]\ntrust_level = "trusted"\n'


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    project, codex_home = tmp_path / "agent", tmp_path / "home" / ".codex"
    (project / ".codex").mkdir(parents=True)
    codex_home.mkdir(parents=True)
    (project / ".codex" / "hooks.json").write_text(json.dumps(THEIRS))
    (codex_home / "config.toml").write_text(CONFIG)
    return {"root": tmp_path, "project": project, "codex_home": codex_home, "hooks": project / ".codex" / "hooks.json"}


def env(world: dict[str, Path]) -> dict[str, str]:
    return {"HOME": str(world["root"] / "home"), "CODEX_HOME": str(world["codex_home"]), "PATH": "/usr/bin:/bin"}


def fg(world: dict[str, Path], *args: str) -> Any:
    return run_cli("--db", str(world["root"] / "fg.db"), *args, cwd=world["root"], env=env(world))


def install(world: dict[str, Path], *extra: str) -> Any:
    return fg(world, "hook", "install", "codex", "--project", str(world["project"]), *LANE, *extra)


def status(world: dict[str, Path], *extra: str) -> Any:
    return fg(world, "hook", "status", "codex", "--project", str(world["project"]), "--json", *extra)


def ours(doc: dict[str, Any], event: str) -> list[tuple[int, dict[str, Any]]]:
    return [(gi, h) for gi, g in enumerate(doc["hooks"].get(event, [])) for h in g["hooks"] if " hook " in h["command"]]


def test_install_merges_in_place_and_says_what_the_owner_must_trust(world: dict[str, Path]) -> None:
    first = install(world)
    assert first.returncode == 0, first.stderr
    doc = json.loads(world["hooks"].read_text())
    assert doc["hooks"]["Stop"][: len(THEIRS["hooks"]["Stop"])] == THEIRS["hooks"]["Stop"]  # theirs where it stood
    [stop] = [h for g in doc["hooks"]["Stop"] for h in g["hooks"] if " hook stop " in h["command"]]
    assert stop["command"].endswith("--app codex --hook-timeout 30s || exit 1")  # records usage, never blocks
    assert doc["hooks"]["UserPromptSubmit"][0] == THEIRS["hooks"]["UserPromptSubmit"][0]  # theirs keeps its index
    [(gi, prompt)] = ours(doc, "UserPromptSubmit")
    [(_, tool)] = ours(doc, "PreToolUse")
    assert tool["timeout"] == 30 and tool["command"].split(" || ")[0].endswith("hook pre-tool-use --hook-timeout 30s")
    assert gi == 1 and prompt["timeout"] == 50 and "--wait-eligible 20s --hook-timeout 50s" in prompt["command"]
    assert prompt["command"].endswith("exit 2; }") and "matcher" not in doc["hooks"]["PreToolUse"][0]
    assert json.loads((world["project"] / ".codex" / "hooks.json.floorgate-backup").read_text()) == THEIRS
    # Codex skips them until its owner trusts the project and each hook: the install says how.
    key = f"{world['hooks'].resolve()}:user_prompt_submit:1:0"
    assert "Codex will NOT run them yet" in first.stdout
    assert f'[projects."{world["project"].resolve()}"]' in first.stdout and f'[hooks.state."{key}"]' in first.stdout
    assert (world["codex_home"] / "config.toml").read_text() == CONFIG  # nothing trusted without --trust
    shown = status(world)
    assert shown.returncode == 1 and json.loads(shown.stdout)["runs"] is False
    assert "does not trust the project" in json.loads(shown.stdout)["hooks"][0]["why_not"]
    again = install(world)
    assert again.returncode == 0 and "already installed, unchanged" in again.stdout and json.loads(world["hooks"].read_text()) == doc


def test_trust_records_the_owners_consent_merged_into_config_toml(world: dict[str, Path]) -> None:
    done = install(world, "--trust")
    assert done.returncode == 0, done.stderr
    assert "Codex runs them now" in done.stdout
    config = tomllib.loads((world["codex_home"] / "config.toml").read_text())
    before = tomllib.loads(CONFIG)
    assert config["model"] == before["model"] and config["features"] == before["features"]
    assert config["projects"]["/elsewhere"] == before["projects"]["/elsewhere"]
    assert config["projects"][str(world["project"].resolve())] == {"trust_level": "trusted"}
    assert (world["codex_home"] / "config.toml.floorgate-backup").read_text() == CONFIG
    trust = codex_hook_trust(world["project"], world["codex_home"])
    assert trust.runs("UserPromptSubmit", "floorgate") and trust.runs("PreToolUse", "pre-tool-use") and trust.runs("Stop", "hook stop")
    assert status(world).returncode == 0
    # Installing other settings changes the hook: Codex no longer runs it until trusted again;
    # it is replaced where it stands, so a hook added after it keeps its index (and its trust key).
    doc = json.loads(world["hooks"].read_text())
    later = {"hooks": [{"type": "command", "command": "/usr/local/bin/later"}]}
    doc["hooks"]["UserPromptSubmit"].append(later)
    world["hooks"].write_text(json.dumps(doc))
    assert install(world, "--wait-eligible", "10s").returncode == 0
    assert json.loads(world["hooks"].read_text())["hooks"]["UserPromptSubmit"][2] == later
    shown = status(world)
    assert shown.returncode == 1 and "changed since it was trusted" in json.loads(shown.stdout)["hooks"][0]["why_not"]


def test_a_user_install_goes_to_codex_home_and_needs_no_project_trust(world: dict[str, Path]) -> None:
    done = fg(world, "hook", "install", "codex", "--user", *LANE)
    assert done.returncode == 0, done.stderr
    assert len(ours(json.loads((world["codex_home"] / "hooks.json").read_text()), "UserPromptSubmit")) == 1
    assert "[projects." not in done.stdout and "[hooks.state." in done.stdout


@pytest.mark.parametrize(
    "config, field",
    [
        pytest.param('projects = { "/elsewhere" = { trust_level = "trusted" } }\n', "laid out", id="inline-table"),
        pytest.param("[projects\n", "not valid TOML", id="not-toml"),
    ],
)
def test_trust_that_cannot_be_merged_writes_nothing(world: dict[str, Path], config: str, field: str) -> None:
    (world["codex_home"] / "config.toml").write_text(config)
    done = install(world, "--trust")
    assert done.returncode == 2 and field in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert (world["codex_home"] / "config.toml").read_text() == config
    assert json.loads(world["hooks"].read_text()) == THEIRS
    assert not (world["project"] / ".codex" / "hooks.json.floorgate-backup").exists()


def test_trust_is_refused_for_an_app_that_needs_none(world: dict[str, Path]) -> None:
    done = fg(world, "hook", "install", "claude", "--project", str(world["project"]), *LANE, "--trust")
    assert done.returncode == 2 and "--trust" in done.stderr
    assert not (world["project"] / ".claude").exists()


def test_an_untrusted_codex_hook_is_schedule_only_even_after_it_answered(world: dict[str, Path]) -> None:
    db = str(world["root"] / "fg.db")
    for args in (
        ("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "t"),
        ("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--timer", "external"),
    ):
        assert fg(world, *args).returncode == 0
    assert install(world, "--trust").returncode == 0
    store = open_store(db)
    try:
        now = read_clock(SystemClock())
        HookAnswers(store).record("x", admitted=True, at=now)
        record = HookInstalls(store).get("x")
        assert record is not None and record.client == "codex" and record.app_home == str(world["codex_home"])
        svc = TimerService(store, clock=FixedClock(now))

        def promise():  # type: ignore[no-untyped-def]
            return svc.guarantee(Automations(store).get("x"), None, now + timedelta(seconds=1))

        assert promise().guarantee == "pre-model hook"
        config = world["codex_home"] / "config.toml"
        config.write_text(config.read_text().replace("trusted_hash", "# trusted_hash"))  # the owner withdraws it
        got = promise()
        assert got.guarantee == "schedule-only"
        assert "the Codex hook in" in got.why and "is not trusted" in got.why
        shown = json.loads(fg(world, "status", "--json").stdout)
        [row] = [r for r in shown["automations"] if r["automation"] == "x"]
        assert row["timer"]["guarantee"] == "schedule-only" and "is not trusted" in row["timer"]["guarantee_why"]
    finally:
        store.close()
