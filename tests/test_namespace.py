"""floorgate installs under one name, ``floorgate``: another distribution's ``scheduler`` cannot shadow it.

The test builds floorgate as a real (non-editable) wheel into a throwaway environment that also
holds PyPI's ``scheduler`` distribution, then runs the console script and the command a crontab
line runs. floorgate's own dependencies come from this test run's environment (a ``.pth`` line), so
nothing but the two packages under test (and the other's own dependencies) is installed.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _site_packages(venv: Path) -> Path:
    found = sorted(venv.glob("lib/python3*/site-packages"))
    assert len(found) == 1, found
    return found[0]


@pytest.fixture(scope="module")
def shadowed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("shadow") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check"]
    other = subprocess.run([*pip[:-2], "--disable-pip-version-check", "scheduler"], capture_output=True, text=True, timeout=300)
    if other.returncode != 0:
        pytest.skip(f"PyPI's scheduler distribution cannot be installed here: {other.stderr.strip().splitlines()[-1:]}")
    # Our dependencies from this environment; the wheel itself is built and installed for real.
    (_site_packages(venv) / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    built = subprocess.run([*pip, str(ROOT)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return venv


def test_the_other_scheduler_is_there_and_intact(shadowed_env: Path) -> None:
    # Without this the tests below could pass in an environment without the other package. With
    # floorgate's folders installed under their bare names, the two distributions shared one
    # site-packages/scheduler/ folder and the later install overwrote the other's __init__.py.
    probe = subprocess.run(
        [
            str(shadowed_env / "bin" / "python"),
            "-c",
            "import scheduler, os; scheduler.Scheduler; print(os.path.dirname(scheduler.__file__))",
        ],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert probe.returncode == 0, probe.stderr
    assert str(ROOT) not in probe.stdout and "site-packages" in probe.stdout


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["bin/floorgate", "--version"], id="console-script"),
        pytest.param(["bin/python", "-m", "floorgate", "--version"], id="python-m-floorgate"),
    ],
)
def test_floorgate_runs_beside_another_scheduler(shadowed_env: Path, argv: list[str]) -> None:
    done = subprocess.run([str(shadowed_env / argv[0]), *argv[1:]], capture_output=True, text=True, cwd="/", timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("floorgate ")


def test_a_crontab_lines_command_reaches_floorgate(shadowed_env: Path, tmp_path: Path) -> None:
    # The command a crontab line runs (python -m floorgate ... turn run ID): floorgate answers, here
    # with its one-line error for an automation the store does not hold.
    db = tmp_path / "fg.db"
    python = str(shadowed_env / "bin" / "python")
    created = subprocess.run([python, "-m", "floorgate", "--db", str(db), "init"], capture_output=True, text=True, cwd="/")
    assert created.returncode == 0, created.stderr
    done = subprocess.run(
        [python, "-m", "floorgate", "--db", str(db), "turn", "run", "nightly", "--wait-eligible", "1s"],
        capture_output=True,
        text=True,
        cwd="/",
        timeout=120,
    )
    assert "Traceback" not in done.stderr and "ModuleNotFoundError" not in done.stderr, done.stderr
    assert done.returncode == 2 and "nightly" in done.stderr, (done.returncode, done.stderr)


def test_every_package_folder_is_installed() -> None:
    # pyproject.toml lists the packages by hand (the folders map to floorgate.*): a new sub-package
    # missing from the list would be left out of a real install.
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {"floorgate"}
    for top in ("admission", "hosts", "scheduler"):
        for init in (ROOT / top).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT)
            if rel.parts[:2] == ("scheduler", "_root"):
                continue
            on_disk.add(".".join(["floorgate", *rel.parts]))
    assert listed == on_disk
