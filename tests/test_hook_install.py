"""``floorgate hook install|uninstall|status claude``: what it writes, merges, keeps and refuses."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from cli import run_cli

LANE = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
FLOORGATE = str(Path(sys.executable).parent / "floorgate")
THEIRS = {
    "model": "claude-sonnet-4-5",
    "permissions": {"allow": ["Bash(ls:*)"]},
    "hooks": {
        "UserPromptSubmit": [{"hooks": [{"type": "command", "command": "/usr/local/bin/audit-prompt"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
    },
}


def settings_of(project: Path) -> dict[str, Any]:
    return json.loads((project / ".claude" / "settings.json").read_text())


def ours(doc: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [h for g in doc["hooks"].get(event, []) for h in g["hooks"] if " hook " in h["command"]]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "agent"
    (path / ".claude").mkdir(parents=True)
    (path / ".claude" / "settings.json").write_text(json.dumps(THEIRS))
    return path


def install(tmp_path: Path, *extra: str, db: str = "floorgate.db") -> Any:
    return run_cli(
        "--db", db, "hook", "install", "claude", "--project", "agent", *LANE, *extra, cwd=tmp_path, env={"HOME": str(tmp_path / "home")}
    )


def test_install_merges_keeps_a_backup_and_is_idempotent(tmp_path: Path, project: Path) -> None:
    first = install(tmp_path)
    assert first.returncode == 0, first.stderr
    doc = settings_of(project)
    assert {k: v for k, v in doc.items() if k != "hooks"} == {"model": THEIRS["model"], "permissions": THEIRS["permissions"]}
    assert doc["hooks"]["Stop"][: len(THEIRS["hooks"]["Stop"])] == THEIRS["hooks"]["Stop"]  # theirs kept, ours after
    [stop] = ours(doc, "Stop")
    assert stop["command"].endswith("hook stop --goal g --agent a --automation x --app claude --hook-timeout 30s || exit 1")  # never exit 2
    assert THEIRS["hooks"]["UserPromptSubmit"][0] in doc["hooks"]["UserPromptSubmit"]  # the app's own prompt hook stays
    [prompt] = ours(doc, "UserPromptSubmit")
    [tool] = ours(doc, "PreToolUse")
    store = f"sqlite:///{tmp_path / 'floorgate.db'}"  # resolved where the owner stood
    assert prompt["command"].startswith(
        f"{FLOORGATE} --db {store} hook user-prompt-submit --goal g --agent a --automation x --wake automatic"
    )
    assert "--wait-eligible 20s" in prompt["command"] and prompt["timeout"] == 50 > 20
    assert tool["command"].startswith(f"{FLOORGATE} hook pre-tool-use") and [g["matcher"] for g in doc["hooks"]["PreToolUse"]] == ["*"]
    assert json.loads((project / ".claude" / "settings.json.floorgate-backup").read_text()) == THEIRS
    again = install(tmp_path, "--wait-eligible", "10s")  # installing again replaces floorgate's entries
    doc = settings_of(project)
    assert again.returncode == 0 and len(ours(doc, "UserPromptSubmit")) == 1 and len(ours(doc, "PreToolUse")) == 1
    assert len(ours(doc, "Stop")) == 1
    assert ours(doc, "UserPromptSubmit")[0]["timeout"] == 40
    unchanged = install(tmp_path, "--wait-eligible", "10s")
    assert unchanged.returncode == 0 and "already installed, unchanged" in unchanged.stdout


def test_status_reads_the_lane_and_store_back_and_uninstall_leaves_the_rest(tmp_path: Path, project: Path) -> None:
    def status() -> Any:
        return run_cli("hook", "status", "claude", "--project", "agent", "--json", cwd=tmp_path)

    assert status().returncode == 1 and json.loads(status().stdout)["installed"] is False
    install(tmp_path)
    shown = status()
    doc = json.loads(shown.stdout)
    assert shown.returncode == 0 and doc["installed"] is True
    [prompt] = [h for h in doc["hooks"] if h["event"] == "UserPromptSubmit"]
    assert prompt["lane"] == {"goal": "g", "agent": "a", "automation": "x", "wake": "automatic", "wait_eligible": "20s"}
    assert prompt["db"] == f"sqlite:///{tmp_path / 'floorgate.db'}" and prompt["floorgate"] == FLOORGATE and prompt["problems"] == []
    text = run_cli("hook", "status", "claude", "--project", "agent", cwd=tmp_path).stdout
    assert "  Stop for g/a/x: store" in text and "None" not in text  # the Stop hook has no wake to name
    removed = run_cli("hook", "uninstall", "claude", "--project", "agent", cwd=tmp_path)
    assert removed.returncode == 0 and "removed 3 floorgate hook(s)" in removed.stdout  # prompt, tool call and end of turn
    assert settings_of(project) == THEIRS


def test_user_settings_live_in_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = run_cli("--db", str(tmp_path / "f.db"), "hook", "install", "claude", "--user", *LANE, cwd=tmp_path, env={"HOME": str(home)})
    assert result.returncode == 0, result.stderr
    assert len(ours(json.loads((home / ".claude" / "settings.json").read_text()), "UserPromptSubmit")) == 1


def test_the_installed_command_blocks_when_floorgate_cannot_run(tmp_path: Path, project: Path) -> None:
    copy = tmp_path / "floorgate-copy"
    copy.write_text("#!/bin/sh\nexit 0\n")
    copy.chmod(0o755)
    assert install(tmp_path, "--floorgate", str(copy)).returncode == 0
    command = ours(settings_of(project), "UserPromptSubmit")[0]["command"]
    copy.unlink()
    ran = subprocess.run(["sh", "-c", command], input="{}", capture_output=True, text=True, timeout=30)
    assert ran.returncode == 2 and "the floorgate hook exited 127" in ran.stderr


@pytest.mark.parametrize(
    "extra, field",
    [
        pytest.param(("--goal", "bad id!"), "--goal", id="bad-id"),
        pytest.param(("--wake", "manual"), "--manual-reason", id="manual-without-reason"),
        pytest.param(("--manual-reason", "me"), "--manual-reason", id="reason-without-manual"),
        pytest.param(("--wait-eligible", "5m"), "--wait-eligible", id="wait-too-long"),
        pytest.param(("--wait-eligible", "soon"), "--wait-eligible", id="wait-unparseable"),
        pytest.param(("--floorgate", "/nonexistent/floorgate"), "--floorgate", id="no-floorgate"),
        pytest.param(("--project", "missing"), "--project", id="no-project"),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(tmp_path: Path, project: Path, extra: tuple[str, ...], field: str) -> None:
    before = (project / ".claude" / "settings.json").read_text()
    args = list(LANE)
    for flag, value in zip(extra[::2], extra[1::2], strict=True):
        if flag in args:
            args[args.index(flag) + 1] = value
        else:
            args += [flag, value]
    where = [] if "--project" in extra else ["--project", "agent"]
    result = run_cli("--db", "floorgate.db", "hook", "install", "claude", *where, *args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and field in result.stderr, result.stderr
    assert (project / ".claude" / "settings.json").read_text() == before
    assert not (project / ".claude" / "settings.json.floorgate-backup").exists()


def test_settings_that_are_not_json_are_left_alone(tmp_path: Path, project: Path) -> None:
    (project / ".claude" / "settings.json").write_text('{"hooks": {')
    result = install(tmp_path)
    assert result.returncode == 2 and "is not valid JSON" in result.stderr and result.stderr.count("\n") == 1
    assert (project / ".claude" / "settings.json").read_text() == '{"hooks": {'
    (project / ".claude" / "settings.json").write_text('{"hooks": {"PreToolUse": {"matcher": "*"}}}')
    result = install(tmp_path)
    assert result.returncode == 2 and "hooks.PreToolUse" in result.stderr
