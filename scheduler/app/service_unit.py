"""systemd units that keep ``floorgate run`` (and, if asked, ``floorgate serve``) running across
reboots and crashes: ``floorgate service install [--user] [--serve]`` and ``service uninstall``.

A unit runs this interpreter's ``-m floorgate`` with the store named in its environment (not on
its command line, where ``ps`` would show a PostgreSQL password), restarts on failure, and starts
at boot (system) or with the user's manager (``--user``; ``loginctl enable-linger`` keeps it
running without a login). Every unit floorgate writes begins with ``MARK``: a unit without it is
someone else's and is never overwritten or removed. Files are written through ``_safe_files``
(atomically, no link followed, 0600 when new).
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from floorgate.admission import InvalidInput
from floorgate.scheduler.agents import _safe_files

MARK = "# Written by 'floorgate service install'; 'floorgate service uninstall' removes it. Edits are overwritten."
SYSTEM_DIR = Path("/etc/systemd/system")


class Role(StrEnum):
    """What a unit runs: the timer host, or the owner console."""

    RUN = "run"
    SERVE = "serve"
    HOOKS = "hooks"  # ``floorgate hook serve``: the resident answerer of the prompt and tool hooks


@dataclass(frozen=True)
class UnitPlan:
    """Where the units go and what they run."""

    directory: Path
    user_mode: bool
    python: str
    db: str  # the store URL or absolute SQLite path the unit's process opens
    state_dir: Path
    working_dir: Path
    roles: tuple[Role, ...]
    prefix: str = "floorgate"

    def path(self, role: Role) -> Path:
        return self.directory / f"{self.prefix}-{role.value}.service"


@dataclass(frozen=True)
class Outcome:
    path: Path
    changed: bool  # False: the same unit was there already (install) / nothing was there (uninstall)


def unit_dir(user_mode: bool, env: Mapping[str, str]) -> Path:
    """Where systemd reads units: the user's ``$XDG_CONFIG_HOME/systemd/user``, or /etc/systemd/system."""
    if not user_mode:
        return SYSTEM_DIR
    config = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(config) / "systemd" / "user"


def _quote(word: str, *, command: bool = True) -> str:
    """One ExecStart word (``command``) or Environment assignment as systemd reads it: quoted,
    with its own escapes and ``%`` (specifiers) doubled; in a command ``$`` (variable expansion) too."""
    if any(ord(c) < 0x20 or c == "\x7f" for c in word):
        raise InvalidInput("service", f"{word!r} holds a control character; a unit cannot carry it")
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{escaped.replace("$", "$$") if command else escaped}"'


def _path(path: Path) -> str:
    """An absolute path as a path setting reads it (unquoted; ``%`` doubled)."""
    _quote(str(path))  # refuses a control character
    return str(path).replace("%", "%%")


def unit_text(plan: UnitPlan, role: Role) -> str:
    """The unit file for ``role``."""
    argv = [plan.python, "-m", "floorgate", *(("hook", "serve") if role is Role.HOOKS else (role.value,))]
    if role is Role.RUN:
        argv += ["--state-dir", str(plan.state_dir)]
    what = {
        Role.RUN: "timer host: fires automations through floorgate admission",
        Role.SERVE: "owner console and JSON API",
        Role.HOOKS: "hook server: answers the prompt and tool hooks; they answer in-process without it",
    }[role]
    lines = [
        MARK,
        "[Unit]",
        f"Description=floorgate {role.value} ({what})",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
        f"WorkingDirectory={_path(plan.working_dir)}",
        f"Environment={_quote('FLOORGATE_DB=' + plan.db, command=False)}",
        f"ExecStart={' '.join(_quote(w) for w in argv)}",
        # The hook server exits when its code changes on disk: always start the new code again.
        f"Restart={'always' if role is Role.HOOKS else 'on-failure'}",
        "RestartSec=5s",
        # floorgate run stops its turns on SIGTERM and records a clean stop; give it the time.
        "TimeoutStopSec=90s",
    ]
    if not plan.user_mode:
        lines.append(f"User={pwd.getpwuid(os.geteuid()).pw_name}")
    lines += ["", "[Install]", f"WantedBy={'default.target' if plan.user_mode else 'multi-user.target'}", ""]
    return "\n".join(lines)


def _ours(path: Path) -> bool | None:
    """Whether ``path`` is a unit floorgate wrote (None: there is none). A link or non-file is refused."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInput("service", f"{path} is not a regular file (a link?); floorgate leaves it alone")
    found = _safe_files.read(path.parent, path, "service")
    return found is not None and found.data.decode("utf-8", "replace").startswith(MARK + "\n")


def install(plan: UnitPlan) -> list[Outcome]:
    """Write each role's unit; refuse (nothing written) where a unit floorgate did not write is in the way."""
    for role in plan.roles:
        if _ours(plan.path(role)) is False:
            raise InvalidInput(
                "service", f"{plan.path(role)} exists and was not written by floorgate; move it away first (floorgate never overwrites it)"
            )
    out = []
    for role in plan.roles:
        path, text = plan.path(role), unit_text(plan, role)
        before = _safe_files.read(path.parent, path, "service") if path.exists() else None
        if before is not None and before.data == text.encode("utf-8"):
            out.append(Outcome(path, False))
            continue
        _safe_files.replace(path.parent, path, text.encode("utf-8"), "service")
        out.append(Outcome(path, True))
    return out


def uninstall(directory: Path, roles: Sequence[Role], prefix: str = "floorgate") -> list[Outcome]:
    """Remove each role's unit that floorgate wrote; refuse (nothing removed) one it did not write."""
    paths = [directory / f"{prefix}-{role.value}.service" for role in roles]
    for path in paths:
        if _ours(path) is False:
            raise InvalidInput("service", f"{path} was not written by floorgate; it is left as it is")
    out = []
    for path in paths:
        if _ours(path):
            path.unlink()
            out.append(Outcome(path, True))
        else:
            out.append(Outcome(path, False))
    return out


def enable_steps(plan_dir: Path, user_mode: bool, names: Sequence[str]) -> list[str]:
    """The commands that load and start the units (printed: installing never starts anything)."""
    ctl = "systemctl --user" if user_mode else "sudo systemctl"
    steps = [f"{ctl} daemon-reload", f"{ctl} enable --now {' '.join(names)}"]
    if user_mode:
        steps.append("loginctl enable-linger  # keep them running while you are logged out, and start them at boot")
    return steps
