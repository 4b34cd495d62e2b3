"""Installing floorgate's hooks into an agent app's settings: install, uninstall, status.

An agent app (Claude Code today; Codex can follow) runs a hook as a shell command and blocks a
prompt only on exit code 2: a hook that cannot start (exit 127), crashes (1), is killed or times
out lets the prompt reach the model. So the installed command is floorgate's own, by absolute
path, with the store as an absolute URL, followed by ``|| { ...; exit 2; }``: any outcome but 0
becomes a block with a line on stderr naming what failed. The hook's ``timeout`` is set above
the prompt hook's own wait, so the app does not kill a hook that is waiting for its floor.

Installing merges into the settings file: other keys and other hooks stay; floorgate's previous
entries are replaced, so installing twice leaves one; the previous file is kept beside it as
``<name>.floorgate-backup`` before anything is written, and the new one is written atomically.
Every read and write goes through ``_safe_files``: nothing below the project (or the app's own
directory) is followed as a symbolic link, a backup is never more readable than 0600, and a
directory another user owns or may write to is refused.
An app is one ``HookClient`` (where its settings live, how its hook entries look, whether it will
run them and what its owner must do first: a Codex hook runs only once its owner trusts it).
Each install is recorded in the store (``HookInstalls``) so readback can ask the client, later,
whether the app still runs the hook, and never claims a guarantee from a hook that is skipped.
"""

from __future__ import annotations

import json
import math
import os
import shlex
import socket
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any, Protocol

from floorgate.admission import InvalidInput, Store
from floorgate.admission.decisions import StartKind
from floorgate.admission.intervals import format_interval
from floorgate.admission.liveness import HookInstall, HookInstalls
from floorgate.admission.scope import check_id
from floorgate.admission.store import absolute_url, redact_url

from . import _safe_files, _toml_edit

BACKUP_SUFFIX = ".floorgate-backup"
PROMPT_EVENT = "user-prompt-submit"
TOOL_EVENT = "pre-tool-use"
STOP_EVENT = "stop"  # the app's end of turn: records the turn's usage, never blocks
# Above the wait: opening the store, the admission itself and an interpreter start.
TIMEOUT_MARGIN = timedelta(seconds=30)
TOOL_HOOK_TIMEOUT_SECONDS = 30


# Whether the prompts a hook guards are scheduled wakes or a person's own: the kind of start each is.
Wake = StartKind


class Target(str, Enum):
    """Which settings file: the agent project's, or the user's (every project)."""

    PROJECT = "project"
    USER = "user"


@dataclass(frozen=True)
class HookPlan:
    """What the installed hooks run: floorgate (argv prefix, absolute), the store and the lane."""

    floorgate: tuple[str, ...]
    db: str
    goal: str
    agent: str
    automation: str
    wake: Wake
    manual_reason: str | None
    wait: timedelta

    def prompt_argv(self) -> list[str]:
        argv = [*self.floorgate, "--db", self.db, "hook", PROMPT_EVENT, "--goal", self.goal, "--agent", self.agent]
        argv += ["--automation", self.automation, "--wake", self.wake.value]
        if self.manual_reason is not None:
            argv += ["--manual-reason", self.manual_reason]
        return [*argv, "--wait-eligible", format_interval(self.wait), "--hook-timeout", f"{self.prompt_timeout_seconds}s"]

    def tool_argv(self) -> list[str]:
        # No --db: inside a managed turn it asks the runner's broker ($FLOORGATE_TURN_SOCKET, set by 'turn run').
        return [*self.floorgate, "hook", TOOL_EVENT, "--hook-timeout", f"{TOOL_HOOK_TIMEOUT_SECONDS}s"]

    def stop_argv(self, app: str) -> list[str]:
        argv = [*self.floorgate, "--db", self.db, "hook", STOP_EVENT, "--goal", self.goal, "--agent", self.agent]
        return [*argv, "--automation", self.automation, "--app", app, "--hook-timeout", f"{TOOL_HOOK_TIMEOUT_SECONDS}s"]

    @property
    def prompt_timeout_seconds(self) -> int:
        return math.ceil((self.wait + TIMEOUT_MARGIN).total_seconds())


def plan(
    *,
    floorgate: str | None,
    db: str | None,
    goal: str,
    agent: str,
    automation: str,
    wake: str,
    manual_reason: str | None,
    wait: timedelta,
    max_wait: timedelta,
) -> HookPlan:
    """Validate what ``hook install`` was given and resolve it to absolute paths; raises
    ``InvalidInput`` naming the field before anything is written."""
    for name, value in (("--goal", goal), ("--agent", agent), ("--automation", automation)):
        check_id(value, name)
    try:
        kind = Wake(wake)
    except ValueError:
        raise InvalidInput("--wake", "use automatic (scheduled wakes) or manual (with --manual-reason)") from None
    reason = manual_reason.strip() if manual_reason is not None else None
    if kind is Wake.MANUAL and not reason:
        raise InvalidInput("--manual-reason", "a manual wake needs an explicit reason in the hook's configuration")
    if kind is Wake.AUTOMATIC and manual_reason is not None:
        raise InvalidInput("--manual-reason", "only with --wake manual")
    if not timedelta(0) <= wait <= max_wait:
        raise InvalidInput("--wait-eligible", f"at most {format_interval(max_wait)} (the agent app kills a slow hook)")
    url = absolute_url(db)
    if url.startswith("sqlite:"):
        parent = Path(url.removeprefix("sqlite:///")).parent
        if not parent.is_dir():
            raise InvalidInput("--db", f"directory {parent} does not exist; create it or choose another path")
    return HookPlan(_floorgate_argv(floorgate), url, goal, agent, automation, kind, reason if kind is Wake.MANUAL else None, wait)


def _floorgate_argv(explicit: str | None) -> tuple[str, ...]:
    """The absolute command that runs floorgate: the given path, else this installation's console
    script, else this interpreter with ``-m floorgate``."""
    if explicit is not None:
        path = Path(explicit).expanduser().absolute()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise InvalidInput("--floorgate", f"{path} is not an executable file; give the path of the floorgate command")
        return (str(path),)
    python = Path(sys.executable).absolute()  # not resolved: a venv's python is a symlink out of it
    script = python.parent / "floorgate"
    if script.is_file() and os.access(script, os.X_OK):
        return (str(script),)
    return (str(python), "-m", "floorgate")


def guarded(argv: list[str], what: str) -> str:
    """The shell command: ``argv``, and any exit but 0 or 2 (127 when floorgate is gone, 1 on a
    crash, a signal) turned into 2 with a line on stderr."""
    message = f"floorgate: {what} blocked (fail closed): the floorgate hook exited $rc; check it with 'floorgate hook status'"
    return f'{shlex.join(argv)} || {{ rc=$?; [ "$rc" -eq 2 ] || echo "{message}" >&2; exit 2; }}'


def stop_guarded(argv: list[str]) -> str:
    """The end-of-turn command: ``argv``, and any failure turned into exit 1. A Stop hook that
    exits 2 makes the app go on with another model call: recording usage must never do that."""
    return f"{shlex.join(argv)} || exit 1"


@dataclass(frozen=True)
class InstalledHook:
    """One floorgate hook found in a settings file, read back from its command."""

    event: str  # the app's event name (UserPromptSubmit, PreToolUse)
    command: str
    timeout: object
    floorgate: str | None  # the executable the command starts
    db: str | None
    lane: dict[str, str] = field(default_factory=dict)  # goal, agent, automation, wake, ...
    guarded: bool = False  # any failure is turned into a block
    as_installed: bool = False  # command and timeout exactly what 'hook install' writes

    def modified(self) -> str | None:
        """Why this hook cannot be counted on to block (None: it is as installed). An edit such as
        ``|| true`` or ``exit 0;`` still names floorgate but lets every prompt through."""
        if self.as_installed:
            return None
        return (
            "its command or timeout was changed from what 'floorgate hook install' writes, so it does not enforce "
            "(an edit like '|| true' lets every prompt through); run 'floorgate hook install' again to restore it"
        )

    def problems(self) -> list[str]:
        """What would make this hook block every prompt (or, unguarded, let them all through)."""
        out = []
        if self.floorgate is None or not (os.path.isfile(self.floorgate) and os.access(self.floorgate, os.X_OK)):
            out.append(f"{self.event}: floorgate executable {self.floorgate} is missing")
        if not self.guarded:
            out.append(f"{self.event}: not guarded: a failure to run floorgate lets the prompt through; reinstall it")
        if self.db is not None and self.db.startswith("sqlite:///") and not Path(self.db.removeprefix("sqlite:///")).exists():
            # A hook never creates a store: the prompt hook blocks every prompt until there is one.
            path = self.db.removeprefix("sqlite:///")
            fails = "records no usage" if self.event == "Stop" else "blocks every prompt (fail closed)"
            out.append(
                f"{self.event}: store {redact_url(self.db)} does not exist, so it {fails}; create it with 'floorgate init --db {path}'"
            )
        return out


@dataclass(frozen=True)
class OwnerSteps:
    """What the owner must do before the app runs the installed hooks: keys to set in one TOML file."""

    file: Path
    tables: _toml_edit.Tables
    why: str

    @property
    def text(self) -> str:
        """The lines to add to ``file``, as the owner would write them."""
        return _toml_edit.render(self.tables)


class HookClient(Protocol):
    """One agent app: where its settings live, how floorgate's entries look in them, and whether
    the app will run them as they stand."""

    name: str
    title: str
    app_home: Path | None  # the app's own configuration directory, when its decisions live there
    owner_trust: bool  # the app runs hooks only once its owner trusts them (``owner_steps``)

    def settings_file(self, target: Target, project: Path) -> Path: ...

    def install(self, doc: dict[str, Any], plan: HookPlan, path: Path) -> dict[str, Any]: ...

    def uninstall(self, doc: dict[str, Any], path: Path) -> tuple[dict[str, Any], int]: ...

    def installed(self, doc: dict[str, Any], path: Path) -> list[InstalledHook]: ...

    def will_run(self, hook: InstalledHook, path: Path, project: Path) -> str | None:
        """None when the app runs ``hook`` (found in ``path``) for prompts in ``project``; else why not."""
        ...

    def owner_steps(self, doc: dict[str, Any], path: Path, project: Path) -> OwnerSteps | None:
        """What the owner must still do for the app to run floorgate's hooks in ``doc``, the
        settings ``path`` holds or is about to hold; None when nothing."""
        ...


@dataclass(frozen=True)
class Written:
    """What install or uninstall did to the settings file."""

    path: Path
    changed: bool
    backup: Path | None
    removed: int = 0


@dataclass(frozen=True)
class Installed:
    """What install did: the settings file, the owner's steps still due (or done), and the file
    those steps were written to when the owner asked (``--trust``)."""

    settings: Written
    steps: OwnerSteps | None
    granted: Written | None


@dataclass(frozen=True)
class HookStatus:
    """The hooks found in one settings file."""

    path: Path
    exists: bool
    hooks: list[InstalledHook]

    @property
    def problems(self) -> list[str]:
        return [p for h in self.hooks for p in h.problems()]


class HookInstaller:
    """Install, remove and read back floorgate's hooks in an agent app's settings file."""

    def __init__(self, client: HookClient) -> None:
        self.client = client

    def settings_file(self, target: Target, project: Path | None) -> Path:
        return self.client.settings_file(target, project_dir(project))

    def install(self, path: Path, plan: HookPlan, *, trust: bool = False, project: Path | None = None) -> Installed:
        """Merge the plan's hooks into ``path``; with ``trust`` (the owner consents) also do the
        owner's steps. Everything is checked before anything is written."""
        where = project_dir(project)
        anchor = self._anchor(path, where)
        before, doc = _read(path, anchor)
        after = self.client.install(doc, plan, path)
        steps = self.client.owner_steps(after, path, where) if self.client.owner_trust else None
        grant = self._grant_text(steps) if trust and steps is not None else None
        written = _write(path, anchor, before, after)
        granted = None
        if steps is not None and grant is not None:
            granted = _write_text(steps.file, steps.file.parent, grant[0], grant[1], field="--trust")
        return Installed(written, steps, granted)

    def uninstall(self, path: Path, *, project: Path | None = None) -> Written:
        """Remove floorgate's entries from ``path`` (the rest stays; the previous file is kept)."""
        anchor = self._anchor(path, project_dir(project))
        before, doc = _read(path, anchor)
        if before is None:
            return Written(path, False, None)
        after, removed = self.client.uninstall(doc, path)
        written = _write(path, anchor, before, after)
        return Written(written.path, written.changed, written.backup, removed)

    def status(self, path: Path, *, project: Path | None = None) -> HookStatus:
        """The floorgate hooks ``path`` holds (read without following a planted link)."""
        # Not project_dir(): readback asks about a project that may be gone since (user settings stay).
        where = project.expanduser().absolute() if project is not None else project_dir(None)
        before, doc = _read(path, self._anchor(path, where))
        return HookStatus(path, before is not None, self.client.installed(doc, path))

    def runs(self, status: HookStatus, project: Path) -> list[tuple[InstalledHook, str | None]]:
        """Each hook found, and why it does not enforce now (None: the app runs it as installed)."""
        return [(h, h.modified() or self.client.will_run(h, status.path, project)) for h in status.hooks]

    def owner_steps(self, path: Path, project: Path) -> OwnerSteps | None:
        """What the owner must still do for the app to run the hooks in ``path`` as they are."""
        _, doc = _read(path, self._anchor(path, project))
        return self.client.owner_steps(doc, path, project) if self.client.owner_trust else None

    def _anchor(self, path: Path, project: Path) -> Path:
        """Below which directory no link is followed: the project for its own settings (a
        repository chooses what its ``.claude`` or ``.codex`` is), else the app's own directory."""
        return project if path.absolute() == self.client.settings_file(Target.PROJECT, project).absolute() else path.parent

    def _grant_text(self, steps: OwnerSteps) -> tuple[str | None, str]:
        try:
            found = _safe_files.read(steps.file.parent, steps.file, "--trust")
            before = found.data.decode("utf-8") if found is not None else None
        except UnicodeDecodeError:
            raise InvalidInput("--trust", f"{steps.file} is not UTF-8 text; fix it first") from None
        except OSError as exc:
            raise InvalidInput("--trust", f"cannot read {steps.file}: {exc.strerror or exc}") from None
        return before, _toml_edit.merged(before or "", steps.tables, str(steps.file))

    def record(self, store: Store, plan: HookPlan, path: Path, project: Path, at: datetime) -> None:
        """Record where the lane's prompt hook now is, for readback to check later."""
        HookInstalls(store).record(
            HookInstall(
                automation_id=plan.automation,
                client=self.client.name,
                settings_file=str(path),
                project_dir=str(project),
                app_home=str(self.client.app_home) if self.client.app_home is not None else None,
                hostname=socket.gethostname(),
                installed_at=at,
            )
        )

    def why_not_running(self, install: HookInstall) -> str | None:
        """Why the app will not run the recorded prompt hook now (None: it will, or it cannot be
        checked from this host)."""
        if install.hostname != socket.gethostname():
            return None  # its files are on the host it was installed on
        path, project = Path(install.settings_file), Path(install.project_dir)
        try:
            status = self.status(path, project=project)
        except InvalidInput as exc:
            return str(exc)
        prompt_event = getattr(self.client, "events", {}).get(PROMPT_EVENT, "UserPromptSubmit")
        # The prompt hook alone guards the wake: the end-of-turn hook names the lane too, but never blocks.
        prompts = [h for h in status.hooks if h.event == prompt_event and h.lane.get("automation") == install.automation_id]
        if not prompts:
            return f"{path} no longer holds floorgate's prompt hook for {install.automation_id} (see 'floorgate hook status {self.client.name}')"
        reasons = [why for h, why in self.runs(HookStatus(path, True, prompts), project)]
        return None if None in reasons else reasons[0]


def project_dir(project: Path | None) -> Path:
    """The agent's project directory (default: the current one), absolute; it must exist."""
    where = (project if project is not None else Path.cwd()).expanduser().absolute()
    if not where.is_dir():
        raise InvalidInput("--project", f"{where} is not a directory; give the agent's project directory")
    return where


def _read(path: Path, anchor: Path) -> tuple[str | None, dict[str, Any]]:
    """The file's text (None when absent) and its JSON object; anything else is refused."""
    try:
        found = _safe_files.read(anchor, path, "settings")
        if found is None:
            return None, {}
        text = found.data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("settings", f"{path} is not UTF-8 text: fix or move it first") from None
    except OSError as exc:
        raise InvalidInput("settings", f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as exc:
        raise InvalidInput("settings", f"{path} is not valid JSON (line {exc.lineno}): fix or move it first") from None
    if not isinstance(doc, dict):
        raise InvalidInput("settings", f"{path} does not hold a JSON object: fix or move it first")
    return text, doc


def _write(path: Path, anchor: Path, before: str | None, doc: dict[str, Any]) -> Written:
    if before is not None:
        try:
            if json.loads(before) == doc:
                return Written(path, False, None)
        except json.JSONDecodeError:
            pass
    return _write_text(path, anchor, before, json.dumps(doc, indent=2) + "\n")


def _write_text(path: Path, anchor: Path, before: str | None, text: str, *, field: str = "settings") -> Written:
    """Write ``text`` to ``path`` atomically, the previous content kept beside it first (see
    ``_safe_files.replace``: no link followed, modes kept, backups at most 0600)."""
    if text == before:
        return Written(path, False, None)
    try:
        done = _safe_files.replace(anchor, path, text.encode("utf-8"), field, backup_suffix=BACKUP_SUFFIX)
    except OSError as exc:
        raise InvalidInput(field, f"cannot write {path}: {exc.strerror or exc}") from None
    return Written(path, True, done.backup)
