"""The qualification suite: floorgate's hooks and meters against the real agent CLIs.

The CLIs (Claude Code, Codex) are the pinned npm packages that ``.ci/agents`` installs into a cache
outside the repository (``$FLOORGATE_AGENT_CACHE``, default ``~/.cache/floorgate-agents``). They
run offline against local stand-ins for their providers' streaming APIs, which count every request.
Without the cache a developer's run skips these tests; with ``FLOORGATE_TEST_AGENTS_REQUIRED=1``
(set by ``.ci/run``) a missing CLI fails them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

AGENT_CACHE = Path(os.environ.get("FLOORGATE_AGENT_CACHE") or Path.home() / ".cache" / "floorgate-agents")
AGENTS_REQUIRED = os.environ.get("FLOORGATE_TEST_AGENTS_REQUIRED") == "1"


def agent_cli(name: str) -> Path:
    """The real CLI ``name`` ('claude' or 'codex') from the cache, or skip (fail when required)."""
    path = AGENT_CACHE / "node_modules" / ".bin" / name
    if not os.access(path, os.X_OK):
        message = f"{name} is not installed in {AGENT_CACHE} (run .ci/agents)"
        if AGENTS_REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return path


# Offline: no telemetry, error reports, update checks or other nonessential traffic; the stand-in
# doubles as the HTTPS proxy, so anything meant for another host is logged there and refused.
OFFLINE_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}


def claude_env(home: Path, provider_url: str) -> dict[str, str]:
    """The environment Claude Code runs in here: a fresh HOME (no user settings leak in), the
    stand-in as its API and proxy, and nothing else of the caller's but PATH."""
    home.mkdir(parents=True, exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": provider_url,
        "ANTHROPIC_API_KEY": "sk-ant-standin-not-a-key",
        "HTTPS_PROXY": provider_url,
        "HTTP_PROXY": provider_url,
        "NO_PROXY": "127.0.0.1,localhost",
        **OFFLINE_ENV,
    }


def claude_print_argv(cli: Path, prompt: str, *extra: str) -> list[str]:
    """``claude -p PROMPT --output-format stream-json --verbose``: the form scheduled runs use."""
    return [str(cli), "-p", prompt, "--output-format", "stream-json", "--verbose", *extra]


def run_claude(cli: Path, project: Path, env: dict[str, str], prompt: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(claude_print_argv(cli, prompt, *extra), cwd=project, env=env, capture_output=True, text=True, timeout=120)


def events(stdout: str) -> list[dict[str, Any]]:
    """The stream-json events Claude Code printed."""
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


# Fixtures live here, not in a tests/agents/conftest.py: a second module named "conftest" on the
# path shadows tests/conftest.py, whose helpers (T0, raw_sql, ...) the other tests import by name.
@pytest.fixture
def claude_cli() -> Path:
    return agent_cli("claude")


@pytest.fixture
def codex_cli() -> Path:
    return agent_cli("codex")
