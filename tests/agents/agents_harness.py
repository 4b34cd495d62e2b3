"""The qualification suite: floorgate's hooks and meters against the real agent CLIs.

The CLIs (Claude Code, Codex) are the pinned npm packages that ``.ci/agents`` installs into a cache
outside the repository (``$FLOORGATE_AGENT_CACHE``, default ``~/.cache/floorgate-agents``). They
run offline against local stand-ins for their providers' streaming APIs, which count every request.
The locator and the ``claude_cli``/``codex_cli`` fixtures live in ``tests/conftest.py`` (one
conftest for the whole suite: a second one would shadow its module name).
"""

from __future__ import annotations

from conftest import AGENTS_REQUIRED, AGENT_CACHE, agent_cli

__all__ = ["AGENTS_REQUIRED", "AGENT_CACHE", "agent_cli"]
