"""Fixtures of the qualification suite (see agents_harness for what it runs and how)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents_harness import agent_cli


@pytest.fixture
def claude_cli() -> Path:
    return agent_cli("claude")


@pytest.fixture
def codex_cli() -> Path:
    return agent_cli("codex")
