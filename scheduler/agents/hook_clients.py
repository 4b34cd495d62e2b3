"""The agent apps ``floorgate hook install`` knows: where their settings live, how entries look.

Claude Code (2.1): ``.claude/settings.json`` in the project or ``~/.claude/settings.json``;
``{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": ..., "timeout": s}]}],
"PreToolUse": [{"matcher": "*", "hooks": [...]}]}}``. It runs the command with a shell, the
event's JSON on stdin; only exit 2 blocks, showing stderr; the default timeout is 30 s.

Codex (0.171): the same layout in ``.codex/hooks.json`` of the project or ``$CODEX_HOME/hooks.json``
(a group without a matcher matches every tool). It blocks only on exit 2 with stderr, and runs a
hook only when its owner trusts it, which it reads from ``$CODEX_HOME/config.toml``.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from floorgate.admission import FloorgateError, InvalidInput, Store
from floorgate.admission.liveness import HookInstalls

from ._codex_trust import codex_hook_trust
from .hook_install import (
    PROMPT_EVENT,
    STOP_EVENT,
    TOOL_EVENT,
    TOOL_HOOK_TIMEOUT_SECONDS,
    HookInstaller,
    HookPlan,
    InstalledHook,
    OwnerSteps,
    Target,
    guarded,
    stop_guarded,
)

_LANE_FLAGS = {"--goal": "goal", "--agent": "agent", "--automation": "automation", "--wake": "wake", "--manual-reason": "manual_reason"}
_LANE_FLAGS["--wait-eligible"] = "wait_eligible"


def parse_command(command: str) -> tuple[str, dict[str, Any]] | None:
    """(floorgate's event, what the command names) when ``command`` runs a floorgate hook."""
    try:
        tokens = shlex.split(command)
    except ValueError:
        return None
    if "||" in tokens:
        tokens = tokens[: tokens.index("||")]
    for i in range(len(tokens) - 1):
        if tokens[i] == "hook" and tokens[i + 1] in (PROMPT_EVENT, TOOL_EVENT, STOP_EVENT):
            head, rest = tokens[:i], tokens[i + 2 :]
            db = head[head.index("--db") + 1] if "--db" in head[:-1] else None
            if "--db" in rest[:-1]:
                db = rest[rest.index("--db") + 1]
            lane = {_LANE_FLAGS[t]: rest[j + 1] for j, t in enumerate(rest[:-1]) if t in _LANE_FLAGS}
            return tokens[i + 1], {"floorgate": head[0] if head else None, "db": db, "lane": lane}
    return None


def as_installed(command: str, event: str, timeout: object) -> bool:
    """Whether ``command`` (floorgate's ``event``) and its ``timeout`` are exactly what install
    writes: the guarded argv with nothing added, and the timeout its ``--hook-timeout`` names."""
    tokens = shlex.split(command)
    argv = tokens[: tokens.index("||")] if "||" in tokens else tokens
    written = stop_guarded(argv) if event == STOP_EVENT else guarded(argv, "prompt" if event == PROMPT_EVENT else "tool call")
    if command != written:
        return False
    flags = [argv[i + 1] for i, t in enumerate(argv[:-1]) if t == "--hook-timeout"]
    return (
        len(flags) == 1 and re.fullmatch(r"[1-9][0-9]*s", flags[0]) is not None and type(timeout) is int and timeout == int(flags[0][:-1])
    )


class JsonHooks:
    """An app whose settings file holds ``{"hooks": {Event: [{"hooks": [command entries]}]}}``."""

    name: str
    title: str
    owner_trust: bool = False
    # The Stop hook records the ended turn's usage from the transcript (budgets count it).
    events: ClassVar[dict[str, str]] = {PROMPT_EVENT: "UserPromptSubmit", TOOL_EVENT: "PreToolUse", STOP_EVENT: "Stop"}
    tool_group: ClassVar[dict[str, str]] = {}  # what else a tool hook's group says (its matcher)
    app_home: Path | None

    def install(self, doc: dict[str, Any], plan: HookPlan, path: Path) -> dict[str, Any]:
        doc = _copy(doc)
        hooks = doc.setdefault("hooks", {})
        _hooks(doc, path)
        prompt = {"type": "command", "command": guarded(plan.prompt_argv(), "prompt"), "timeout": plan.prompt_timeout_seconds}
        tool = {"type": "command", "command": guarded(plan.tool_argv(), "tool call"), "timeout": TOOL_HOOK_TIMEOUT_SECONDS}
        stop = {"type": "command", "command": stop_guarded(plan.stop_argv(self.name)), "timeout": TOOL_HOOK_TIMEOUT_SECONDS}
        wanted = [(PROMPT_EVENT, prompt, {}), (TOOL_EVENT, tool, self.tool_group)]
        if STOP_EVENT in self.events:
            wanted.append((STOP_EVENT, stop, {}))
        for event, entry, group in wanted:
            name = self.events[event]
            groups = _groups(hooks.setdefault(name, []), name, path)
            # Replaced where it stands: moving it would shift the others' positions, which a Codex
            # owner's trust records are keyed by.
            spots = [(gi, hi) for gi, g in enumerate(groups) for hi, e in enumerate(g.get("hooks", [])) if _ours(e)]
            if spots:
                gi, hi = spots[0]
                groups[gi]["hooks"][hi] = entry
                for gj, hj in reversed(spots[1:]):
                    del groups[gj]["hooks"][hj]
            else:
                groups.append({**group, "hooks": [entry]})
        return doc

    def uninstall(self, doc: dict[str, Any], path: Path) -> tuple[dict[str, Any], int]:
        doc = _copy(doc)
        hooks = _hooks(doc, path)
        removed = 0
        for event in self.events.values():
            groups = hooks.get(event)
            if groups is None:
                continue
            kept_groups = []
            for group in _groups(groups, event, path):
                entries = group.get("hooks", [])
                kept = [e for e in entries if not _ours(e)]
                removed += len(entries) - len(kept)
                if kept or not entries:
                    kept_groups.append({**group, "hooks": kept})
            if kept_groups:
                hooks[event] = kept_groups
            else:
                del hooks[event]
        if "hooks" in doc and not hooks:
            del doc["hooks"]
        return doc, removed

    def installed(self, doc: dict[str, Any], path: Path) -> list[InstalledHook]:
        found = []
        hooks = _hooks(_copy(doc), path)
        for event in self.events.values():
            for group in _groups(hooks.get(event) or [], event, path):
                for entry in group.get("hooks", []):
                    parsed = parse_command(entry.get("command", "")) if isinstance(entry, dict) else None
                    if parsed is None:
                        continue
                    command = entry["command"]
                    ours, named = parsed
                    installed_as = as_installed(command, ours, entry.get("timeout"))
                    found.append(
                        InstalledHook(
                            event=event,
                            command=command,
                            timeout=entry.get("timeout"),
                            floorgate=named["floorgate"],
                            db=named["db"],
                            lane=named["lane"],
                            # The end-of-turn hook never blocks: it is "guarded" when any failure exits 1.
                            guarded=installed_as if ours == STOP_EVENT else ("|| {" in command and "exit 2" in command),
                            as_installed=installed_as,
                        )
                    )
        return found

    def will_run(self, hook: InstalledHook, path: Path, project: Path) -> str | None:
        return None

    def owner_steps(self, doc: dict[str, Any], path: Path, project: Path) -> OwnerSteps | None:
        return None


class ClaudeCode(JsonHooks):
    """Claude Code's settings.json."""

    name = "claude"
    title = "Claude Code"
    tool_group: ClassVar[dict[str, str]] = {"matcher": "*"}

    def __init__(self, home: Path) -> None:
        self.home = home
        self.app_home = None

    def settings_file(self, target: Target, project: Path) -> Path:
        return (self.home if target is Target.USER else project) / ".claude" / "settings.json"


class Codex(JsonHooks):
    """Codex's hooks.json: ``.codex/hooks.json`` in the project, or ``$CODEX_HOME/hooks.json``.

    Codex runs them only when its owner trusts them (see ``_codex_trust``); that is read from
    ``$CODEX_HOME/config.toml`` (``app_home``) and, with the owner's consent, written there."""

    name = "codex"
    title = "Codex"
    owner_trust = True

    def __init__(self, codex_home: Path) -> None:
        self.app_home = codex_home

    @property
    def home(self) -> Path:
        assert self.app_home is not None
        return self.app_home

    def settings_file(self, target: Target, project: Path) -> Path:
        return (self.home if target is Target.USER else project / ".codex") / "hooks.json"

    def will_run(self, hook: InstalledHook, path: Path, project: Path) -> str | None:
        return codex_hook_trust(project, self.home).why_not(hook.event, hook.command, source=path)

    def owner_steps(self, doc: dict[str, Any], path: Path, project: Path) -> OwnerSteps | None:
        trust = codex_hook_trust(project, self.home).with_hooks_file(path, doc)
        tables: dict[tuple[str, ...], dict[str, str]] = {}
        for hook in self.installed(doc, path):
            for found in trust.matching(hook.event, hook.command, source=path):
                if found.needs_project_trust and not trust.project_trusted:
                    tables[("projects", str(trust.trust_root))] = {"trust_level": "trusted"}
                if found.enabled and found.status != "trusted":
                    tables[("hooks", "state", found.key)] = {"trusted_hash": found.current_hash}
        if not tables:
            return None
        return OwnerSteps(
            self.home / "config.toml",
            tables,
            "Codex runs a project's hooks only when its owner trusts the project and each hook as written "
            "(an untrusted or edited hook is skipped without a word and the model wakes)",
        )


def _ours(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("command"), str) and parse_command(entry["command"]) is not None


def _copy(doc: dict[str, Any]) -> dict[str, Any]:
    import copy

    return copy.deepcopy(doc)


def _hooks(doc: dict[str, Any], path: Path) -> dict[str, Any]:
    hooks = doc.get("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidInput("settings", f'{path}: "hooks" is not an object; fix it first')
    return hooks


def _groups(groups: object, event: str, path: Path) -> list[dict[str, Any]]:
    if not isinstance(groups, list) or not all(isinstance(g, dict) and isinstance(g.get("hooks", []), list) for g in groups):
        raise InvalidInput("settings", f'{path}: "hooks.{event}" is not a list of {{"hooks": [...]}} objects; fix it first')
    return groups


CLIENTS = ("claude", "codex")


def installer(client: str, *, env: Mapping[str, str] | None = None, app_home: Path | None = None) -> HookInstaller:
    """The installer for the named agent app; ``env`` (default: this process's) says where the
    app keeps its configuration, unless ``app_home`` names it."""
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home()).absolute()
    if client == "claude":
        return HookInstaller(ClaudeCode(home))
    if client == "codex":
        return HookInstaller(Codex(app_home or Path(env.get("CODEX_HOME") or home / ".codex").absolute()))
    raise InvalidInput("client", f"{client!r} is not supported; use one of: {', '.join(CLIENTS)}")


def hook_problem(store: Store, automation_id: str, env: Mapping[str, str] | None = None) -> str | None:
    """Why the agent app will not run the automation's recorded prompt hook now, as one line that
    names the app (None: no install recorded, or the app runs it)."""
    try:
        install = HookInstalls(store).get(automation_id)
        if install is None:
            return None
        svc = installer(install.client, env=env, app_home=Path(install.app_home) if install.app_home else None)
    except FloorgateError as exc:
        return f"its hook install record cannot be used ({exc})"
    why = svc.why_not_running(install)
    return None if why is None else f"the {svc.client.title} hook in {install.settings_file} will not run: {why}"
