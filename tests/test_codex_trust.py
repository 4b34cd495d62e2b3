"""scheduler/agents/_codex_trust.py without Codex: the hash Codex accepted, and files it cannot read.

tests/agents/test_codex.py checks the same reading against the real Codex 0.171.
"""

from __future__ import annotations

import json
from pathlib import Path

from floorgate.scheduler.agents._codex_trust import codex_hook_hash, codex_hook_trust, owner_trust_toml


def test_the_hash_is_the_one_codex_0171_accepted() -> None:
    # Recorded as trusted_hash, this made the real Codex 0.171 run the hook.
    command = "echo 'blocked by test' >&2; exit 2"
    assert codex_hook_hash("UserPromptSubmit", command) == "sha256:19a637bc71092483e1bb83c8f3140330c9f01f651bcb52b5c72a68c7be277425"
    # Codex defaults the timeout to 600 s and ignores a prompt hook's matcher before hashing.
    assert codex_hook_hash("UserPromptSubmit", command, timeout=600, matcher="x") == codex_hook_hash("UserPromptSubmit", command)
    assert codex_hook_hash("PreToolUse", command, matcher="Bash") != codex_hook_hash("PreToolUse", command)
    # A written timeout of 0 is hashed as 1 s, not as the default (tests/agents/test_codex.py runs it).
    assert codex_hook_hash("UserPromptSubmit", command, timeout=0) == codex_hook_hash("UserPromptSubmit", command, timeout=1)
    assert codex_hook_hash("UserPromptSubmit", command, timeout=0) != codex_hook_hash("UserPromptSubmit", command)


def _project(tmp_path: Path, hooks: str) -> tuple[Path, Path]:
    project, home = tmp_path / "project", tmp_path / "codex-home"
    (project / ".codex").mkdir(parents=True)
    home.mkdir()
    (project / ".codex" / "hooks.json").write_text(hooks)
    return project, home


def test_owner_trust_toml_makes_the_hooks_run(tmp_path: Path) -> None:
    commands = {"UserPromptSubmit": "fg hook user-prompt-submit", "PreToolUse": "fg hook pre-tool-use"}
    project, home = _project(
        tmp_path, json.dumps({"hooks": {e: [{"hooks": [{"type": "command", "command": c}]}] for e, c in commands.items()}})
    )
    assert not codex_hook_trust(project, home).runs("UserPromptSubmit")
    (home / "config.toml").write_text(owner_trust_toml(project / ".codex" / "hooks.json", commands, project))
    trust = codex_hook_trust(project, home)
    assert trust.runs("UserPromptSubmit") and trust.runs("PreToolUse", "pre-tool-use")


def test_unreadable_files_are_named_not_raised(tmp_path: Path) -> None:
    project, home = _project(tmp_path, "{not json")
    assert "hooks.json cannot be parsed" in (codex_hook_trust(project, home).why_not("UserPromptSubmit") or "")
    (home / "config.toml").write_text("[projects\n")
    assert "config.toml cannot be read" in (codex_hook_trust(project, home).why_not("UserPromptSubmit") or "")
