"""A crontab line floorgate wrote that can no longer run (the interpreter it names was removed, or
is not executable) is never ``enforced``: readback says why, and the line is not acknowledged.
The real ``crontab`` command, a dedicated test account (see ``test_timers.cron_user``)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from basics import T0
from test_timers import EVERY_15, TEST_USER_CAN_RUN, add, cron_user, crontab_text  # noqa: F401 (cron_user is a fixture)

from floorgate.admission import FixedClock, Store
from floorgate.scheduler.app.readback import Readback
from floorgate.scheduler.app.timers import TimerService


def _interpreter(tmp_path: Path, kind: str) -> str:
    """A path to put where the line's interpreter is: gone, or present but not executable."""
    path = tmp_path / "venv" / "bin" / "python"
    if kind == "not-executable":
        path.parent.mkdir(parents=True)
        shutil.copy(sys.executable, path)
        path.chmod(0o644)
    return str(path)


@pytest.mark.parametrize("kind", ["removed", "not-executable"])
def test_a_crontab_line_that_cannot_run_is_not_enforced(store: Store, cron_user: str, cron_running, tmp_path: Path, kind: str) -> None:  # noqa: F811
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    svc.apply(automation)
    readback = Readback(store, clock, timers=svc)
    assert readback.automation("q").guarantee == "enforced"  # the line floorgate wrote, as written
    text = crontab_text(cron_user)
    assert sys.executable in text
    # The installation moved on: the interpreter the line names is gone (or lost its x bit).
    subprocess.run(
        ["crontab", "-u", cron_user, "-"], input=text.replace(sys.executable, _interpreter(tmp_path, kind)), text=True, check=True
    )
    after = readback.automation("q")
    assert after.guarantee == "schedule-only", after
    assert "cannot run" in after.guarantee_why and "venv/bin/python" in after.guarantee_why
    assert after.drift is not None
    result = svc.ack(automation)
    assert not result.accepted and "cannot run" in (result.observation.text or "")
