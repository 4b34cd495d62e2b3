"""A managed turn's host cannot read its runner's environment through /proc (issue 18, finding 8).

The host is the runner's child, of the same OS user; the runner's environment may hold an owner's
token or the store's URL with its password. A process with CAP_SYS_PTRACE reads any /proc entry,
so when the tests run as root the runner runs with no capabilities at all (``setpriv``): toward its
own processes it is then what an ordinary user is toward theirs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MARKER = "fgo_alice.marker-the-host-must-never-read"


def test_a_turns_host_cannot_read_its_runners_environment_through_proc(tmp_path: Path) -> None:
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running the runner without capabilities needs setpriv (util-linux)")
        prefix = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"]
    floorgate = Path(sys.executable).parent / "floorgate"
    script, out = tmp_path / "host.sh", tmp_path / "read"
    script.write_text(
        f"#!/bin/sh\nif cat /proc/$PPID/environ > {out} 2>/dev/null; then echo read >> {out}; else echo refused > {out}; fi\n"
    )
    script.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "FLOORGATE_TOKEN": MARKER, "FLOORGATE_DB": str(tmp_path / "fg.db")}

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*prefix, str(floorgate), *argv], capture_output=True, text=True, timeout=120, env=env)

    added = run("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", str(script))
    assert added.returncode == 0, added.stderr
    ran = run("turn", "run", "x", "--state-dir", str(tmp_path / "state"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    seen = out.read_bytes()
    assert MARKER.encode() not in seen and b"fg.db" not in seen
    assert seen.strip() == b"refused", seen[-200:]
