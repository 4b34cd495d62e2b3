"""Will Codex run a project's hooks? Read from the files on disk, the way Codex 0.171 decides.

Codex runs a command hook only when all of these hold, and otherwise skips it *silently*
(``codex exec`` prints nothing and wakes the model as if no hook were configured):

- hooks are on: ``[features] codex_hooks`` (or ``hooks``) is not ``false`` in
  ``$CODEX_HOME/config.toml``;
- a project-local hook's project is trusted: ``[projects."<root>"] trust_level = "trusted"`` in
  ``$CODEX_HOME/config.toml``, where ``<root>`` is the enclosing git checkout (a linked worktree
  counts as its main checkout), else the directory Codex runs in; a parent directory's entry does
  not cover it;
- the hook itself is trusted: ``[hooks.state."<key>"] trusted_hash`` in ``$CODEX_HOME/config.toml``
  (a project cannot trust its own hooks) equals the hash of the hook as configured now, and that
  state does not say ``enabled = false``. ``<key>`` is ``<absolute source file>:<event>:<group
  index>:<handler index>``, e.g. ``/srv/agent/.codex/hooks.json:user_prompt_submit:0:0``; the hash
  is ``sha256:`` and the hex SHA-256 of the compact, key-sorted JSON of the normalized hook
  (``event_name``, ``matcher`` when the event has one, and the one handler with its timeout
  defaulted to 600 s). Editing the hook (its command, matcher or timeout) or moving it to another
  index makes it *modified*: untrusted again.

Hooks are read from ``.codex/hooks.json`` and ``[hooks]`` in ``.codex/config.toml`` of every
folder from the trust root down to the working directory (project hooks, which need the project
trusted), and from ``$CODEX_HOME/hooks.json`` and ``[hooks]`` in ``$CODEX_HOME/config.toml`` (the
owner's own, which do not). ``codex exec --trust`` records only the project's trust, never a
hook's; ``codex exec --dangerously-bypass-hook-trust`` skips the hook check (not the project's).
"""

from __future__ import annotations

import hashlib
import json
import os
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

DEFAULT_TIMEOUT_SECONDS = 600  # what Codex runs a hook under when its config gives no timeout
EVENT_KEYS = {
    "PreToolUse": "pre_tool_use",
    "PermissionRequest": "permission_request",
    "PostToolUse": "post_tool_use",
    "PreCompact": "pre_compact",
    "PostCompact": "post_compact",
    "SessionStart": "session_start",
    "SessionEnd": "session_end",
    "UserPromptSubmit": "user_prompt_submit",
    "SubagentStart": "subagent_start",
    "SubagentStop": "subagent_stop",
    "Stop": "stop",
}
# Codex ignores a matcher on these events, and hashes them without one.
_MATCHERLESS = frozenset({"UserPromptSubmit", "Stop"})


def codex_hook_hash(
    event: str,
    command: str,
    *,
    matcher: str | None = None,
    timeout: int | None = None,
    is_async: bool = False,
    status_message: str | None = None,
) -> str:
    """The ``trusted_hash`` Codex records when its owner trusts this command hook."""
    handler: dict[str, Any] = {
        "type": "command",
        "command": command,
        # Codex raises a timeout below 1 s to 1 (a written 0 too; only an absent one takes the default).
        "timeout": max(1, DEFAULT_TIMEOUT_SECONDS if timeout is None else timeout),
        "async": is_async,
    }
    if status_message is not None:
        handler["statusMessage"] = status_message
    identity: dict[str, Any] = {"event_name": EVENT_KEYS[event], "hooks": [handler]}
    if matcher is not None and event not in _MATCHERLESS:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def codex_hook_key(source: Path, event: str, group_index: int, handler_index: int) -> str:
    """The key of a hook's entry under ``[hooks.state]``."""
    return f"{source}:{EVENT_KEYS[event]}:{group_index}:{handler_index}"


def owner_trust_toml(hooks_file: Path, commands: dict[str, str], project_root: Path | None) -> str:
    """What the owner adds to ``$CODEX_HOME/config.toml`` to trust hooks written to ``hooks_file``
    as each event's only handler (``{"Event": [{"hooks": [{"type": "command", "command": C}]}]}``):
    the project's trust (``project_root``; None for hooks in Codex's own home) and each hook's
    ``trusted_hash``. The same as reviewing and trusting them in ``codex``."""
    lines = []
    if project_root is not None:
        lines += [f"[projects.{_toml_string(str(project_root))}]", 'trust_level = "trusted"']
    for event, command in commands.items():
        key = codex_hook_key(hooks_file, event, 0, 0)
        lines += [f"[hooks.state.{_toml_string(key)}]", f"trusted_hash = {_toml_string(codex_hook_hash(event, command))}"]
    return "\n".join(lines) + "\n"


def _toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a TOML basic string


@dataclass(frozen=True)
class CodexHook:
    """One command hook Codex would discover, and whether it runs."""

    event: str
    command: str
    source: Path
    key: str
    current_hash: str
    trusted_hash: str | None
    enabled: bool
    needs_project_trust: bool

    @property
    def status(self) -> str:
        """``trusted``, ``untrusted``, ``modified`` (trusted once, changed since) or ``disabled``."""
        if not self.enabled:
            return "disabled"
        if self.trusted_hash is None:
            return "untrusted"
        return "trusted" if self.trusted_hash == self.current_hash else "modified"


@dataclass(frozen=True)
class CodexTrust:
    """What Codex will do with the hooks configured for a project, and why."""

    project_dir: Path
    codex_home: Path
    trust_root: Path
    project_trusted: bool
    hooks: tuple[CodexHook, ...]
    problems: tuple[str, ...]  # reasons no hook runs at all (config unreadable, hooks off)
    unreadable: tuple[str, ...] = ()  # hook files Codex cannot parse (it skips their hooks)
    states: dict[str, Any] = field(default_factory=dict, compare=False)  # [hooks.state] as read

    def with_hooks_file(self, source: Path, doc: dict[str, Any]) -> CodexTrust:
        """The same reading, with the hooks file ``source`` holding ``doc`` (what is about to be
        written) instead of what is on disk now."""
        where = Path(os.path.realpath(source))
        needs_project_trust = where.parent != self.codex_home  # Codex's own home needs no project trust
        kept = [h for h in self.hooks if h.source != where]
        new = _hooks_in(where, _table(doc, "hooks"), self.states, needs_project_trust=needs_project_trust)
        return replace(self, hooks=(*kept, *new))

    def runs(self, event: str, command_contains: str = "", *, source: Path | None = None) -> bool:
        """Whether Codex runs at least one hook for ``event`` (whose command contains the text)."""
        return self.why_not(event, command_contains, source=source) is None

    def matching(self, event: str, command_contains: str = "", *, source: Path | None = None) -> list[CodexHook]:
        """The hooks Codex discovers for ``event`` whose command contains the text (read from
        ``source`` when given), trusted or not."""
        where = Path(os.path.realpath(source)) if source is not None else None
        return [h for h in self.hooks if h.event == event and command_contains in h.command and where in (None, h.source)]

    def why_not(self, event: str, command_contains: str = "", *, source: Path | None = None) -> str | None:
        """None when a matching hook runs; otherwise one line naming what to fix."""
        if self.problems:
            return self.problems[0]
        found = self.matching(event, command_contains, source=source)
        if not found:
            if self.unreadable:
                return self.unreadable[0]
            named = " floorgate's" if command_contains else ""
            origin = f" in {source}" if source is not None else ""
            return f"Codex finds no{named} {event} hook{origin} for prompts in {self.project_dir}"
        reasons = []
        for hook in found:
            if hook.needs_project_trust and not self.project_trusted:
                reasons.append(
                    f"Codex does not trust the project {self.trust_root}: its .codex hooks are disabled; trust it "
                    f'(add [projects."{self.trust_root}"] trust_level = "trusted" to {self.codex_home / "config.toml"}, '
                    "or run 'codex exec --trust' there once)"
                )
                continue
            if hook.status == "trusted":
                return None
            if hook.status == "disabled":
                reasons.append(f"the {event} hook {hook.key} is disabled (enabled = false in {self.codex_home / 'config.toml'})")
            else:
                state = "changed since it was trusted" if hook.status == "modified" else "not trusted"
                reasons.append(
                    f"the {event} hook {hook.key} is {state}, so Codex skips it without a word; review and trust it in "
                    f'codex (/hooks), or record [hooks.state."{hook.key}"] trusted_hash = "{hook.current_hash}" in '
                    f"{self.codex_home / 'config.toml'}"
                )
        return reasons[0]


def trust_root(project_dir: Path) -> Path:
    """The directory Codex keys a project's trust by: the git checkout (a linked worktree's main
    checkout), else the directory itself."""
    start = Path(os.path.realpath(project_dir))
    for folder in (start, *start.parents):
        dot_git = folder / ".git"
        if dot_git.is_dir():
            return folder
        if dot_git.is_file():
            return _main_checkout(folder, dot_git) or folder
    return start


def _main_checkout(folder: Path, dot_git: Path) -> Path | None:
    try:
        text = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.startswith("gitdir:"):
        return None
    git_dir = Path(os.path.realpath(folder / text[len("gitdir:") :].strip()))
    if git_dir.parent.name != "worktrees":
        return None
    return git_dir.parent.parent.parent  # <main>/.git/worktrees/<name>


def _project_folders(project_dir: Path, root: Path) -> list[Path]:
    start = Path(os.path.realpath(project_dir))
    if start != root and root not in start.parents:
        return [start]
    folders = [start]
    while folders[-1] != root:
        folders.append(folders[-1].parent)
    return list(reversed(folders))


def _read_toml(path: Path) -> dict[str, Any]:
    with path.open("rb") as fh:
        return tomllib.load(fh)


def _table(doc: object, key: str) -> dict[str, Any]:
    value = doc.get(key) if isinstance(doc, dict) else None
    return value if isinstance(value, dict) else {}


def _hooks_in(source: Path, events: dict[str, Any], states: dict[str, Any], needs_project_trust: bool) -> list[CodexHook]:
    found = []
    for event, groups in events.items():
        if event not in EVENT_KEYS or not isinstance(groups, list):
            continue
        for gi, group in enumerate(groups):
            if not isinstance(group, dict):
                continue
            matcher = group.get("matcher") if isinstance(group.get("matcher"), str) else None
            for hi, handler in enumerate(group.get("hooks") or []):
                if not isinstance(handler, dict) or handler.get("type") != "command" or not str(handler.get("command") or "").strip():
                    continue
                timeout = handler.get("timeout", handler.get("timeout_sec"))
                key = codex_hook_key(source, event, gi, hi)
                state = _table(states, key)
                trusted = state.get("trusted_hash")
                found.append(
                    CodexHook(
                        event=event,
                        command=str(handler["command"]),
                        source=source,
                        key=key,
                        current_hash=codex_hook_hash(
                            event,
                            str(handler["command"]),
                            matcher=matcher,
                            timeout=timeout if type(timeout) is int else None,
                            is_async=handler.get("async") is True,
                            status_message=handler.get("statusMessage") if isinstance(handler.get("statusMessage"), str) else None,
                        ),
                        trusted_hash=trusted if isinstance(trusted, str) else None,
                        enabled=state.get("enabled") is not False,
                        needs_project_trust=needs_project_trust,
                    )
                )
    return found


def _hooks_json(path: Path, states: dict[str, Any], unreadable: list[str], *, needs_project_trust: bool) -> list[CodexHook]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        unreadable.append(f"{path} cannot be parsed ({exc}): Codex skips every hook in it; fix the file")
        return []
    return _hooks_in(path, _table(doc, "hooks"), states, needs_project_trust=needs_project_trust)


def codex_hook_trust(project_dir: Path, codex_home: Path) -> CodexTrust:
    """Which hooks ``codex exec`` run in ``project_dir`` with ``CODEX_HOME=codex_home`` will run.

    Never raises for what it reads: an unreadable file is a problem it names."""
    codex_home = Path(os.path.realpath(codex_home))
    root = trust_root(project_dir)
    problems: list[str] = []
    unreadable: list[str] = []
    user_path = codex_home / "config.toml"
    user: dict[str, Any] = {}
    try:
        user = _read_toml(user_path)
    except FileNotFoundError:
        pass
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{user_path} cannot be read ({exc}): Codex refuses to start or runs without its trust records; fix the file")
    features = _table(user, "features")
    for flag in ("codex_hooks", "hooks"):
        if features.get(flag) is False:
            problems.append(f"hooks are turned off ([features] {flag} = false in {user_path}); remove that line")
    hooks_table = _table(user, "hooks")
    states = _table(hooks_table, "state")
    projects = _table(user, "projects")
    trusted = any(
        Path(os.path.realpath(path)) == root and isinstance(entry, dict) and entry.get("trust_level") == "trusted"
        for path, entry in projects.items()
    )

    hooks: list[CodexHook] = []
    user_json = codex_home / "hooks.json"
    if user_json.is_file():
        hooks += _hooks_json(user_json, states, unreadable, needs_project_trust=False)
    if user_path.is_file():
        hooks += _hooks_in(user_path, {k: v for k, v in hooks_table.items() if k != "state"}, states, needs_project_trust=False)
    for folder in _project_folders(project_dir, root):
        dot_codex = folder / ".codex"
        json_path = dot_codex / "hooks.json"
        if json_path.is_file():
            hooks += _hooks_json(json_path, states, unreadable, needs_project_trust=True)
        toml_path = dot_codex / "config.toml"
        if toml_path.is_file():
            try:
                local = _read_toml(toml_path)
            except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                unreadable.append(f"{toml_path} cannot be read ({exc}): fix the file")
                local = {}
            hooks += _hooks_in(toml_path, _table(local, "hooks"), states, needs_project_trust=True)
    return CodexTrust(Path(project_dir), codex_home, root, trusted, tuple(hooks), tuple(problems), tuple(unreadable), states)
