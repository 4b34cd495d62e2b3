"""``floorgate service install|uninstall``: a systemd unit for ``floorgate run`` (and ``serve``)
that restarts on failure and names the store, written privately and checked by systemd-analyze
where it is installed; a unit floorgate did not write is never overwritten or removed."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from floorgate.scheduler.app.service_unit import MARK

from cli import run_cli


def _install(db: str, tmp_path: Path, *extra: str):  # type: ignore[no-untyped-def]
    return run_cli("service", "install", "--user", "--unit-dir", str(tmp_path / "units"), *extra, db=db, cwd=tmp_path)


def test_install_writes_a_unit_that_restarts_names_the_store_and_says_how_to_enable_it(sqlite_db: str, tmp_path: Path) -> None:
    r = _install(sqlite_db, tmp_path, "--serve")
    assert r.returncode == 0, r.stderr
    run_unit, serve_unit = tmp_path / "units" / "floorgate-run.service", tmp_path / "units" / "floorgate-serve.service"
    text = run_unit.read_text()
    assert text.startswith(MARK + "\n") and "Restart=on-failure" in text and "WantedBy=default.target" in text
    assert f'Environment="FLOORGATE_DB={sqlite_db}"' in text
    assert f'ExecStart="{sys.executable}" "-m" "floorgate" "run" "--state-dir" "{tmp_path / "floorgate-state"}"' in text
    assert '"-m" "floorgate" "serve"' in serve_unit.read_text()
    assert run_unit.stat().st_mode & 0o777 == 0o600
    assert "systemctl --user enable --now floorgate-run.service floorgate-serve.service" in r.stdout
    again = _install(sqlite_db, tmp_path, "--serve")
    assert again.returncode == 0 and "unchanged" in again.stdout and run_unit.read_text() == text


def test_install_hooks_writes_a_unit_for_the_hook_server_that_always_restarts(sqlite_db: str, tmp_path: Path) -> None:
    r = _install(sqlite_db, tmp_path, "--hooks")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "units" / "floorgate-hooks.service").read_text()
    assert f'ExecStart="{sys.executable}" "-m" "floorgate" "hook" "serve"' in text
    assert "Restart=always" in text  # it exits when its code changes on disk: the new code starts
    assert "floorgate-run.service floorgate-hooks.service" in r.stdout
    removed = run_cli("service", "uninstall", "--user", "--hooks", "--unit-dir", str(tmp_path / "units"), db=sqlite_db, cwd=tmp_path)
    assert removed.returncode == 0 and not (tmp_path / "units" / "floorgate-hooks.service").exists()


def test_the_unit_passes_systemd_analyze_verify(sqlite_db: str, tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed on this machine (apt-get install systemd)")
    assert _install(sqlite_db, tmp_path, "--serve", "--hooks").returncode == 0
    units = sorted(str(p) for p in (tmp_path / "units").glob("*.service"))
    done = subprocess.run([analyze, "verify", *units], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
    broken = tmp_path / "units" / "floorgate-run.service"
    broken.write_text(broken.read_text().replace("Restart=on-failure", "Restart=sometimes"))  # the check can fail
    bad = subprocess.run([analyze, "verify", str(broken)], capture_output=True, text=True, timeout=60)
    assert "restart specifier" in bad.stderr, bad.stderr  # the check reads what is written


def test_a_unit_floorgate_did_not_write_is_never_overwritten_or_removed(sqlite_db: str, tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    theirs = "[Service]\nExecStart=/usr/local/bin/their-own\n"
    (units / "floorgate-serve.service").write_text(theirs)
    r = _install(sqlite_db, tmp_path, "--serve")
    assert r.returncode == 2 and "was not written by floorgate" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert (units / "floorgate-serve.service").read_text() == theirs
    assert not (units / "floorgate-run.service").exists()  # nothing half written
    removed = run_cli("service", "uninstall", "--user", "--serve", "--unit-dir", str(units), db=sqlite_db, cwd=tmp_path)
    assert removed.returncode == 2 and (units / "floorgate-serve.service").read_text() == theirs


def test_uninstall_removes_only_what_install_wrote(sqlite_db: str, tmp_path: Path) -> None:
    assert _install(sqlite_db, tmp_path).returncode == 0
    r = run_cli("service", "uninstall", "--user", "--unit-dir", str(tmp_path / "units"), db=sqlite_db, cwd=tmp_path)
    assert r.returncode == 0 and "removed" in r.stdout and "disable --now floorgate-run.service" in r.stdout
    assert list((tmp_path / "units").iterdir()) == []


def test_a_link_in_the_units_place_is_refused(sqlite_db: str, tmp_path: Path) -> None:
    units = tmp_path / "units"
    units.mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("x")
    (units / "floorgate-run.service").symlink_to(target)
    r = _install(sqlite_db, tmp_path)
    assert r.returncode == 2 and target.read_text() == "x"


def test_install_for_a_store_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    r = _install(str(tmp_path / "typo.db"), tmp_path)
    assert r.returncode == 1 and "no floorgate store" in r.stderr and not (tmp_path / "units").exists()
