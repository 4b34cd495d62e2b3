"""``floorgate hook status``: it never prints a store's password, and it counts a hook as enforcing
only when its command and timeout are what ``hook install`` wrote."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from floorgate.admission.store import redact_url
from floorgate.scheduler.agents.hook_install import HookPlan, Wake, guarded

from cli import run_cli

LANE = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://fg:s3cret@db.example/fg", "postgresql://fg:***@db.example/fg"),
        ("postgresql+psycopg://fg:p%40ss@db.example:5432/fg", "postgresql+psycopg://fg:***@db.example:5432/fg"),
        (
            "postgresql://db.example/fg?user=fg&password=s3cret&sslmode=require",
            "postgresql://db.example/fg?user=fg&password=***&sslmode=require",
        ),
        ("postgresql://fg@db.example/fg", "postgresql://fg@db.example/fg"),
        ("sqlite:////srv/a:b@c.db", "sqlite:////srv/a:b@c.db"),
        ("postgresql://fg:s3cret@[not a url", "postgresql://fg:***@[not a url"),
    ],
    ids=["user-password", "driver-and-port", "query-password", "no-password", "sqlite-path-with-colon-and-at", "malformed"],
)
def test_a_store_url_is_printed_without_its_password(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def _write_settings(project: Path, db: str) -> Path:
    plan = HookPlan(("/usr/bin/floorgate",), db, "g", "a", "x", Wake.AUTOMATIC, None, timedelta(seconds=20))
    entry = {"type": "command", "command": guarded(plan.prompt_argv(), "prompt"), "timeout": plan.prompt_timeout_seconds}
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_text(json.dumps({"hooks": {"UserPromptSubmit": [{"hooks": [entry]}]}}))
    return settings


def test_status_shows_a_postgresql_store_without_its_password(tmp_path: Path) -> None:
    _write_settings(tmp_path / "agent", "postgresql+psycopg://fg:s3cret@db.example/fg")
    for extra in ((), ("--json",)):
        told = run_cli("hook", "status", "claude", "--project", "agent", *extra, cwd=tmp_path)
        assert "s3cret" not in told.stdout + told.stderr
        assert "fg:***@db.example/fg" in told.stdout, told.stdout


def _install(tmp_path: Path) -> Path:
    project = tmp_path / "agent"
    project.mkdir()
    done = run_cli("--db", "fg.db", "hook", "install", "claude", "--project", "agent", *LANE, cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    return project / ".claude" / "settings.json"


def _prompt_entry(doc: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = doc["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    return entry


def _append(suffix: str) -> Callable[[dict[str, Any]], None]:
    def edit(entry: dict[str, Any]) -> None:
        entry["command"] += suffix

    return edit


def _prefix(entry: dict[str, Any]) -> None:
    entry["command"] = "exit 0; " + entry["command"]


def _shorter_timeout(entry: dict[str, Any]) -> None:
    entry["timeout"] = 1  # the app kills the hook first and lets the prompt through


EDITS = {
    "or-true-appended": _append(" || true"),
    "exit-0-appended": _append("; exit 0"),
    "exit-0-first": _prefix,
    "timeout-shortened": _shorter_timeout,
}


@pytest.mark.parametrize("edit", EDITS.values(), ids=EDITS.keys())
def test_an_edited_hook_is_reported_modified_and_not_enforcing(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    settings = _install(tmp_path)
    as_installed = run_cli("hook", "status", "claude", "--project", "agent", cwd=tmp_path)
    assert as_installed.returncode == 0 and "Claude Code runs it now" in as_installed.stdout, as_installed.stdout
    doc = json.loads(settings.read_text())
    edit(_prompt_entry(doc))
    settings.write_text(json.dumps(doc))
    told = run_cli("hook", "status", "claude", "--project", "agent", cwd=tmp_path)
    prompt_lines = told.stdout.split("PreToolUse")[0]
    assert told.returncode == 1, told.stdout
    assert "runs it now" not in prompt_lines and "modified, does not enforce" in prompt_lines, told.stdout
    assert "floorgate hook install" in prompt_lines
    doc_told = json.loads(run_cli("hook", "status", "claude", "--project", "agent", "--json", cwd=tmp_path).stdout)
    prompt = next(h for h in doc_told["hooks"] if h["event"] == "UserPromptSubmit")
    assert prompt["runs"] is False and prompt["modified"] is True and doc_told["runs"] is False


def test_a_missing_store_is_a_problem_because_the_prompt_hook_blocks_every_prompt(tmp_path: Path) -> None:
    """A hook never creates a store: status says every prompt is blocked, and exits 1 (it said the
    store would be created on first use, and exited 0)."""
    _install(tmp_path)
    assert run_cli("hook", "status", "claude", "--project", "agent", cwd=tmp_path).returncode == 0
    (tmp_path / "fg.db").rename(tmp_path / "moved.db")
    told = run_cli("hook", "status", "claude", "--project", "agent", cwd=tmp_path)
    assert told.returncode == 1, told.stdout
    assert "UserPromptSubmit: store" in told.stdout and "does not exist, so it blocks every prompt (fail closed)" in told.stdout
    assert f"floorgate init --db {tmp_path / 'fg.db'}" in told.stdout


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        pytest.param([], "no rule binds g/a/x yet: every start is admitted", id="no-rule"),
        pytest.param(
            [["automation", "add", "daily", "--goal", "g", "--agent", "a", "--schedule", "daily at 09:00 UTC", "--", "/bin/true"]],
            "did you mean 'daily'?",
            id="a-misspelt-automation",
        ),
        pytest.param([["policy", "set", "g", "--min-interval", "1h", "--revision", "0", "--owner-ref", "alice"]], None, id="a-goal-rule"),
        pytest.param(
            [["policy", "set", "g/a", "--max-starts", "3", "--per", "1d", "--revision", "0", "--owner-ref", "alice"]],
            None,
            id="a-limits-only-rule",
        ),
    ],
)
def test_install_notes_a_lane_no_rule_binds(tmp_path: Path, setup: list[list[str]], said: str | None) -> None:
    assert run_cli("--db", "fg.db", "init", cwd=tmp_path).returncode == 0
    lane = LANE if said is None or "did you mean" not in said else tuple(v if v != "x" else "dialy" for v in LANE)
    for argv in setup:
        assert run_cli("--db", "fg.db", *argv, cwd=tmp_path).returncode == 0
    (tmp_path / "agent").mkdir()
    done = run_cli(
        "--db", "fg.db", "hook", "install", "claude", "--project", "agent", *lane, "--json", cwd=tmp_path, env={"HOME": str(tmp_path)}
    )
    assert done.returncode == 0, done.stderr
    unbound = json.loads(done.stdout)["unbound"]
    assert (unbound is None) if said is None else (said in unbound), unbound
