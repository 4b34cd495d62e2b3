"""Triggers with a real ``floorgate run`` process: a burst of CLI triggers wakes the automation once
after its debounce, and a trigger after that turn wakes it once more."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from basics import raw_sql

from floorgate.admission import AutomationSpec, Automations, Debounce, SystemClock, open_store

from helpers import command, lines, marker_script, start_host, stop, wait_for
from test_cli import cli

pytestmark = pytest.mark.slow


def _served(db_url: str) -> tuple[int, int]:
    """(triggers, of which served)."""
    with open_store(db_url) as store:
        rows = raw_sql(store, "SELECT COUNT(*), COUNT(served_at_us) FROM fg_triggers")
    return int(rows[0][0]), int(rows[0][1])


def test_a_burst_of_cli_triggers_wakes_a_real_host_once(db_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "launches"
    with open_store(db_url) as store:
        spec = AutomationSpec(
            goal_id="g",
            agent_id="a",
            schedule="DTSTART:20260101T090000Z RRULE:FREQ=YEARLY",  # nothing scheduled while the test runs
            host=command(marker_script(marker)),
            debounce=Debounce(quiet=timedelta(seconds=3), max_wait=timedelta(seconds=30)),
        )
        Automations(store, SystemClock()).add("x", spec)
    host = start_host(db_url, tmp_path / "state")
    try:
        for n in range(3):
            r = cli("automation", "trigger", "x", "--id", f"push-{n}", db=db_url)
            assert r.returncode == 0, r.stderr
        assert cli("automation", "trigger", "x", "--id", "push-2", db=db_url).returncode == 0  # a repeat: nothing new
        wait_for(lambda: _served(db_url) == (3, 3), timeout=60, what="one turn serving the burst")
        wait_for(lambda: marker.exists() and lines(marker) == 1, timeout=30, what="the burst's one launch")
        with open_store(db_url) as store:
            wait_for(lambda: raw_sql(store, "SELECT COUNT(*) FROM fg_turns WHERE phase = 'settled'") == [(1,)], what="the turn to settle")
        assert lines(marker) == 1  # three triggers (and a repeat), one launch
        assert cli("automation", "trigger", "x", db=db_url).returncode == 0  # new work after the turn
        wait_for(lambda: lines(marker) == 2, timeout=60, what="a second launch for the new trigger")
        assert _served(db_url) == (4, 4)
    finally:
        code, log = stop(host)
    assert code == 0, log[-2000:]
