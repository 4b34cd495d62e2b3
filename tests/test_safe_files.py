"""Files floorgate writes outside its store (hook settings, their backups, Codex's config.toml,
turn logs) never go through a link someone planted, never leave a secret readable by another
local user, and are refused in a directory another user could tamper with.

The second-user cases run as root with a real account (``fgother``) and skip otherwise.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from floorgate.admission import Automations, FixedClock, Store
from floorgate.scheduler.runtime.executor import LogUnwritable, TurnExecutor

from cli import run_cli
from helpers import add_automation

OTHER = "fgother"
LANE = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
# Valid JSON (like ~/.docker/config.json): a settings link to it would be merged, not refused as bad JSON.
VICTIM_TEXT = '{"auths": {"registry": "the victim\'s own file"}}\n'
SECRET = {"env": {"ANTHROPIC_API_KEY": "sk-ant-secret"}}
CONFIG = 'model = "gpt-5"\n\n[features]\nplugins = false\n'


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def other_user() -> str:
    """A real second local account; skips when this process may not make or use one."""
    if os.geteuid() != 0:
        pytest.skip("reading as a second local user needs root (runuser)")
    if shutil.which("runuser") is None or shutil.which("useradd") is None:
        pytest.skip("runuser/useradd are not installed")
    if subprocess.run(["id", OTHER], capture_output=True).returncode != 0:
        made = subprocess.run(["useradd", "-m", OTHER], capture_output=True, text=True)
        if made.returncode != 0 and subprocess.run(["id", OTHER], capture_output=True).returncode != 0:
            pytest.skip(f"cannot create the user {OTHER}: {made.stderr.strip()}")
    return OTHER


def as_other(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", OTHER, "--", *argv], capture_output=True, text=True, timeout=60)


@pytest.fixture
def shared() -> Iterator[Path]:
    """A directory another local user can reach (pytest's own is private to its user)."""
    path = Path(tempfile.mkdtemp(prefix="fg-safe-", dir="/tmp"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@dataclass
class World:
    root: Path

    @property
    def project(self) -> Path:
        return self.root / "agent"

    @property
    def codex_home(self) -> Path:
        return self.root / "home" / ".codex"

    @property
    def victim(self) -> Path:
        return self.root / "victim" / ".bashrc"

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.root / "home"), "CODEX_HOME": str(self.codex_home), "PATH": "/usr/bin:/bin"}

    def fg(self, *args: str) -> Any:
        return run_cli("--db", str(self.root / "fg.db"), *args, cwd=self.root, env=self.env())

    def install(self, client: str, *extra: str) -> Any:
        return self.fg("hook", "install", client, "--project", str(self.project), *LANE, *extra)

    def uninstall(self, client: str) -> Any:
        return self.fg("hook", "uninstall", client, "--project", str(self.project))

    def settings(self, client: str) -> Path:
        return self.project / (".claude/settings.json" if client == "claude" else ".codex/hooks.json")


def make_world(root: Path) -> World:
    world = World(root)
    for d in (world.project / ".claude", world.project / ".codex", world.codex_home, world.victim.parent):
        d.mkdir(parents=True, exist_ok=True)
    world.victim.write_text(VICTIM_TEXT)
    for client in ("claude", "codex"):
        world.settings(client).write_text(json.dumps({"hooks": {}}))
    (world.codex_home / "config.toml").write_text(CONFIG)
    return world


@pytest.fixture
def world(tmp_path: Path) -> World:
    return make_world(tmp_path)


def _plant(link: Path, target: Path) -> None:
    link.unlink(missing_ok=True)
    link.symlink_to(target)


def claude_install(w: World) -> Any:
    _plant(w.settings("claude").with_name("settings.json.floorgate-backup"), w.victim)
    return w.install("claude")


def claude_uninstall(w: World) -> Any:
    assert w.install("claude").returncode == 0
    _plant(w.settings("claude").with_name("settings.json.floorgate-backup"), w.victim)
    return w.uninstall("claude")


def codex_install(w: World) -> Any:
    _plant(w.settings("codex").with_name("hooks.json.floorgate-backup"), w.victim)
    return w.install("codex")


def codex_uninstall(w: World) -> Any:
    assert w.install("codex").returncode == 0
    _plant(w.settings("codex").with_name("hooks.json.floorgate-backup"), w.victim)
    return w.uninstall("codex")


def codex_trust(w: World) -> Any:
    _plant(w.codex_home / "config.toml.floorgate-backup", w.victim)
    return w.install("codex", "--trust")


def linked_settings(w: World) -> Any:
    _plant(w.settings("claude"), w.victim)
    return w.install("claude")


def linked_claude_dir(w: World) -> Any:
    shutil.rmtree(w.project / ".claude")
    (w.project / ".claude").symlink_to(w.victim.parent)  # a repository commits .claude -> ~
    return w.install("claude")


PLANTED: dict[str, Callable[[World], Any]] = {
    "claude-install-backup": claude_install,
    "claude-uninstall-backup": claude_uninstall,
    "codex-install-backup": codex_install,
    "codex-uninstall-backup": codex_uninstall,
    "codex-trust-config-backup": codex_trust,
    "claude-settings-is-a-link": linked_settings,
    "claude-dir-is-a-link": linked_claude_dir,
}


@pytest.mark.parametrize("attack", PLANTED.values(), ids=PLANTED.keys())
def test_a_planted_link_is_refused_and_its_target_is_untouched(world: World, attack: Callable[[World], Any]) -> None:
    before = world.victim.read_text()
    victim_dir = sorted(p.name for p in world.victim.parent.iterdir())
    result = attack(world)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "symbolic link" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert world.victim.read_text() == before
    assert sorted(p.name for p in world.victim.parent.iterdir()) == victim_dir  # nothing created beside it either


MODES = [
    pytest.param(0o600, 0o600, 0o600, id="private-settings-stay-private"),
    pytest.param(0o644, 0o644, 0o600, id="readable-settings-keep-their-mode-backup-private"),
    pytest.param(0o400, 0o400, 0o400, id="read-only-backup-stays-stricter"),
    pytest.param(None, 0o600, None, id="new-settings-are-0600"),
]


@pytest.mark.parametrize(("before", "after", "backup"), MODES)
def test_a_settings_file_keeps_its_mode_and_its_backup_is_at_most_0600(
    world: World, before: int | None, after: int, backup: int | None
) -> None:
    settings = world.settings("claude")
    if before is None:
        settings.unlink()
    else:
        settings.chmod(before)
    result = world.install("claude")
    assert result.returncode == 0, result.stderr
    assert mode(settings) == after
    kept = settings.with_name("settings.json.floorgate-backup")
    assert (mode(kept) if kept.exists() else None) == backup


def test_codex_trust_keeps_a_private_config_toml_private(world: World) -> None:
    config = world.codex_home / "config.toml"
    config.chmod(0o600)
    result = world.install("codex", "--trust")
    assert result.returncode == 0, result.stderr
    assert mode(config) == 0o600 and mode(config.with_name("config.toml.floorgate-backup")) == 0o600


@pytest.mark.parametrize("client", ["claude", "codex"])
def test_another_local_user_cannot_read_the_backup_of_a_private_settings_file(shared: Path, client: str) -> None:
    other_user()
    world = make_world(shared)
    for d in (world.project, *[p for p in world.project.rglob("*") if p.is_dir()], world.root / "home", world.codex_home):
        d.chmod(0o755)  # a project others may look into: only the files' own modes protect them
    secret = world.settings("claude") if client == "claude" else world.codex_home / "config.toml"
    secret.write_text(json.dumps(SECRET) if client == "claude" else CONFIG + '\n[env]\nOPENAI_API_KEY = "sk-secret"\n')
    secret.chmod(0o600)
    result = world.install(client, *(["--trust"] if client == "codex" else []))
    assert result.returncode == 0, result.stderr
    backup = secret.with_name(secret.name + ".floorgate-backup")
    assert backup.is_file() and "secret" in backup.read_text()
    assert as_other("test", "-r", str(backup.parent)).returncode == 0  # the directory is readable to them...
    for path in (backup, secret):
        read = as_other("cat", str(path))
        assert read.returncode != 0 and "secret" not in read.stdout, path  # ...the secret is not


def test_a_directory_another_user_may_write_to_is_refused(world: World) -> None:
    (world.project / ".claude").chmod(0o777)
    result = world.install("claude")
    assert result.returncode == 2 and "writable by other users" in result.stderr, result.stderr
    assert json.loads(world.settings("claude").read_text()) == {"hooks": {}}
    assert not world.settings("claude").with_name("settings.json.floorgate-backup").exists()


def test_a_group_writable_directory_is_refused_unless_the_group_is_its_owners_alone(shared: Path) -> None:
    other_user()
    import grp
    import pwd

    world = make_world(shared)
    claude = world.project / ".claude"
    claude.chmod(0o770)
    mine = pwd.getpwuid(os.geteuid())
    if any(m != mine.pw_name for m in grp.getgrgid(mine.pw_gid).gr_mem):
        pytest.skip("this user's primary group has other members")
    os.chown(claude, -1, mine.pw_gid)  # a user private group (umask 002 setups): only its owner writes
    assert world.install("claude").returncode == 0
    os.chown(claude, -1, grp.getgrnam(OTHER).gr_gid)  # fgother's group: fgother may plant names in it
    refused = world.install("claude", "--wait-eligible", "10s")
    assert refused.returncode == 2 and "writable by its group" in refused.stderr, refused.stderr


def test_a_directory_another_user_owns_is_refused(shared: Path) -> None:
    other_user()
    world = make_world(shared)
    import pwd

    who = pwd.getpwnam(OTHER)
    os.chown(world.project / ".codex", who.pw_uid, who.pw_gid)  # they could swap any name in it
    result = world.install("codex")
    assert result.returncode == 2 and "owned by another user" in result.stderr, result.stderr
    assert json.loads(world.settings("codex").read_text()) == {"hooks": {}}


# -- turn logs ---------------------------------------------------------------------------------


def _executor(store: Store, clock: FixedClock, state: Path) -> tuple[TurnExecutor, Any]:
    add_automation(store, clock, schedule="DTSTART:20261201T090000Z RRULE:FREQ=HOURLY", script="print('turn output')")
    return TurnExecutor(store, state_dir=state, clock=clock), Automations(store, clock).get("x")


def test_a_linked_logs_directory_in_a_shared_state_dir_is_refused(store: Store, clock: FixedClock, shared: Path) -> None:
    state, elsewhere = shared / "state", shared / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    state.chmod(0o1777)  # shared like /tmp: anyone may add a name, nobody may remove ours
    plant = ["ln", "-s", str(elsewhere), str(state / "logs")]
    with contextlib.suppress(pytest.skip.Exception):
        other_user()
        plant = ["runuser", "-u", OTHER, "--", *plant]  # planted by a real other user where possible
    subprocess.run(plant, check=True)
    executor, automation = _executor(store, clock, state)
    with pytest.raises(LogUnwritable, match="symbolic link"):
        executor.run(automation)
    assert list(elsewhere.iterdir()) == []


def test_a_state_dir_anyone_may_rename_in_is_refused(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)  # no sticky bit: anyone may replace logs/ after it was checked
    executor, automation = _executor(store, clock, state)
    with pytest.raises(LogUnwritable, match="writable by other users"):
        executor.run(automation)
    assert list(state.iterdir()) == []


def test_logs_in_a_sticky_shared_dir_are_made_private(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    executor, automation = _executor(store, clock, shared / "state")
    assert executor.run(automation).verdict.status == "succeeded"
    for d in (shared / "state", shared / "state" / "logs", shared / "state" / "logs" / "x"):
        assert mode(d) == 0o700, d
    (log,) = (shared / "state" / "logs" / "x").iterdir()
    assert mode(log) == 0o600 and "turn output" in log.read_text()
