"""The qualification suite: floorgate's hooks and meters against the real agent CLIs.

The CLIs (Claude Code, Codex) are the pinned npm packages that ``.ci/agents`` installs into a cache
outside the repository (``$FLOORGATE_AGENT_CACHE``, default ``~/.cache/floorgate-agents``). They
run offline against local stand-ins for their providers' streaming APIs, which count every request.
Without the cache a developer's run skips these tests; with ``FLOORGATE_TEST_AGENTS_REQUIRED=1``
(set by ``.ci/run``) a missing CLI fails them.
"""

from __future__ import annotations

import os
from pathlib import Path

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
