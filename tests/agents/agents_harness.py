"""The qualification suite: floorgate's hooks and meters against the real agent CLIs.

The CLIs (Claude Code, Codex) are the pinned npm packages that ``.ci/agents`` installs into a cache
outside the repository (``$FLOORGATE_AGENT_CACHE``, default ``~/.cache/floorgate-agents``). They
run offline against local stand-ins for their providers' streaming APIs, which count every request.
The locator lives in ``tests/basics.py`` and the ``claude_cli``/``codex_cli`` fixtures in ``tests/conftest.py`` (one
conftest for the whole suite: a second one would shadow its module name).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from basics import AGENTS_REQUIRED, AGENT_CACHE, agent_cli

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


__all__ = [
    "AGENTS_REQUIRED",
    "AGENT_CACHE",
    "agent_cli",
    "claude_env",
    "claude_print_argv",
    "events",
    "run_claude",
]
