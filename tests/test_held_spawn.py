"""A host spawned held: forked, its pid known, but its program exec'd only once the runner has
recorded that pid with the turn's confirmation (so nothing can cost before the point of no return)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from floorgate.scheduler.runtime._process import spawn_held


def _writer(marker: Path) -> list[str]:
    # Records its stdin (as the program sees it), its pid and its environment's names.
    code = (
        f"import os, sys; open({str(marker)!r}, 'a').write("
        "repr(sys.stdin.read()) + ' ' + str(os.getpid()) + ' ' + ','.join(sorted(os.environ)) + '\\n')"
    )
    return [sys.executable, "-c", code]


def test_the_program_runs_only_after_the_confirmation_in_the_held_pid_with_its_own_environment(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    seen: list[tuple[int, bool]] = []
    env = {"PATH": os.environ["PATH"], "FLOORGATE_TURN_ID": "t-1"}
    proc = spawn_held(_writer(marker), cwd=None, env=env, confirm=lambda pid: seen.append((pid, marker.exists())))
    assert proc.wait(timeout=30) == 0
    assert seen == [(proc.pid, False)]  # confirmed with the pid, before the program had run
    stdin, pid, names = marker.read_text().split()
    assert (stdin, int(pid)) == ("''", proc.pid)  # stdin from /dev/null; exec'd in the held pid
    # No shell's PWD or SHLVL added (LC_CTYPE is Python's own locale coercion, PEP 538).
    assert set(names.split(",")) - {"LC_CTYPE"} == set(env), names


def test_a_refused_confirmation_leaves_the_program_unrun_and_is_raised(tmp_path: Path) -> None:
    marker = tmp_path / "ran"

    def refuse(pid: int) -> None:
        raise RuntimeError(f"the claim on {pid} was lost")

    with pytest.raises(RuntimeError, match="the claim on"):
        spawn_held(_writer(marker), cwd=None, env=dict(os.environ), confirm=refuse)
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["missing", "not-executable", "a-directory", "not-on-path"])
def test_a_program_that_cannot_run_is_refused_before_anything_is_confirmed(tmp_path: Path, kind: str) -> None:
    program = tmp_path / "tool"
    if kind == "not-executable":
        program.write_text("#!/bin/sh\n")
        program.chmod(stat.S_IRUSR | stat.S_IWUSR)
    elif kind == "a-directory":
        program.mkdir()
    argv = ["floorgate-no-such-tool"] if kind == "not-on-path" else [str(program)]
    expected = FileNotFoundError if kind in ("missing", "not-on-path") else PermissionError
    confirmed: list[int] = []
    with pytest.raises(expected):
        spawn_held(argv, cwd=None, env={"PATH": str(tmp_path)}, confirm=confirmed.append)
    assert confirmed == []


def test_an_exec_error_after_the_confirmation_is_raised_as_popen_raises_it(tmp_path: Path) -> None:
    script = tmp_path / "no-shebang"  # executable, but no interpreter line: exec refuses it
    script.write_text("echo ran\n")
    script.chmod(0o700)
    confirmed: list[int] = []
    with pytest.raises(OSError):
        spawn_held([str(script)], cwd=None, env={"PATH": str(tmp_path)}, confirm=confirmed.append)
    assert len(confirmed) == 1  # it was confirmed (the start is spent), and nothing ran


def test_a_bare_name_is_found_on_the_environments_path_like_exec_does(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\necho ran > {marker}\n")
    tool.chmod(0o700)
    proc = spawn_held(["tool"], cwd=None, env={"PATH": str(tool.parent)}, confirm=lambda pid: None)
    assert proc.wait(timeout=30) == 0
    assert marker.read_text() == "ran\n"
