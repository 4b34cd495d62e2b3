"""The pinned CLIs run here at all: what every qualification test stands on."""

from __future__ import annotations

import subprocess

import pytest

from agents_harness import agent_cli


@pytest.mark.parametrize("name, needle", [("claude", "Claude Code"), ("codex", "codex-cli")], ids=["claude-code", "codex"])
def test_pinned_cli_runs(name: str, needle: str) -> None:
    out = subprocess.run([str(agent_cli(name)), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and needle in out.stdout
