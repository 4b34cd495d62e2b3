"""A host spawned held: its pid exists before its program runs, and the program runs only once
released (so the turn's confirmation and its pid commit together, before anything can cost)."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from scheduler._process import HELD_EXIT, spawn_held


def _writer(marker: Path) -> list[str]:
    # Records its stdin (as the program sees it) and its argv[0]-independent pid.
    code = f"import os, sys; open({str(marker)!r}, 'a').write(repr(sys.stdin.read()) + ' ' + str(os.getpid()) + '\\n')"
    return [sys.executable, "-c", code]


def test_a_released_host_runs_its_program_once_in_the_held_pid_with_stdin_from_dev_null(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    held = spawn_held(_writer(marker), cwd=None, env=dict(os.environ))
    assert not marker.exists()  # spawned, not run
    held.release()
    held.release()  # a second release is a no-op
    assert held.proc.wait(timeout=30) == 0
    assert marker.read_text().splitlines() == [f"'' {held.proc.pid}"]  # the same pid: exec, not a grandchild


def test_an_abandoned_host_exits_without_running_its_program(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    held = spawn_held(_writer(marker), cwd=None, env=dict(os.environ))
    held.abandon()
    assert held.proc.wait(timeout=30) == HELD_EXIT
    assert not marker.exists()


@pytest.mark.parametrize("kind", ["missing", "not-executable", "a-directory", "not-on-path"])
def test_a_program_that_cannot_run_is_refused_before_anything_is_spawned(tmp_path: Path, kind: str) -> None:
    program = tmp_path / "tool"
    if kind == "not-executable":
        program.write_text("#!/bin/sh\n")
        program.chmod(stat.S_IRUSR | stat.S_IWUSR)
    elif kind == "a-directory":
        program.mkdir()
    argv = ["floorgate-no-such-tool"] if kind == "not-on-path" else [str(program)]
    expected = FileNotFoundError if kind in ("missing", "not-on-path") else PermissionError
    with pytest.raises(expected):
        spawn_held(argv, cwd=None, env={"PATH": str(tmp_path)})


def test_a_bare_name_is_found_on_the_environments_path_like_exec_does(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    tool = tmp_path / "bin" / "tool"
    tool.parent.mkdir()
    tool.write_text(f"#!/bin/sh\necho ran > {marker}\n")
    tool.chmod(0o700)
    held = spawn_held(["tool"], cwd=None, env={"PATH": str(tool.parent)})
    held.release()
    assert held.proc.wait(timeout=30) == 0
    assert marker.read_text() == "ran\n"
