"""Host liveness and the hook's answers: surfaces never claim what nothing will do.

A running ``floorgate run`` records a heartbeat; without a live one, floorgate's own timer fires
nothing, and ``status``/``automation show`` say so instead of a next fire. ``automation observed``
exits non-zero when no host answered, instead of printing an old readback as fresh.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from basics import T0

from floorgate.admission import FixedClock
from floorgate.admission.liveness import HostBeat, HostBeats
from floorgate.scheduler.app.readback import Readback

from cli import run_cli
from helpers import add_automation, host_running, start_host, stop, wait_for

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
M = timedelta(minutes=1)


def beat(host_id: str, at, *, poll: timedelta = timedelta(seconds=5), stopped=None) -> HostBeat:  # type: ignore[no-untyped-def]
    return HostBeat(host_id=host_id, hostname="h", pid=1, version="0", started_at=at, beat_at=at, poll=poll, stopped_at=stopped)


@pytest.mark.parametrize(
    "age, stopped, alive",
    [
        pytest.param(timedelta(seconds=2), False, True, id="fresh-beat"),
        pytest.param(timedelta(seconds=24), False, True, id="missed-two-polls"),
        pytest.param(timedelta(seconds=26), False, False, id="silent-past-three-polls-and-slack"),
        pytest.param(timedelta(seconds=2), True, False, id="stopped"),
    ],
)
def test_a_host_is_alive_while_it_beats(age: timedelta, stopped: bool, alive: bool) -> None:
    b = beat("h:1:a", T0, stopped=T0 if stopped else None)
    assert b.alive(T0 + age) is alive


def test_without_a_live_host_nothing_on_floorgates_timer_fires(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock, schedule=EVERY_15M)
    HostBeats(store).started(beat("gone:7:x", T0 - timedelta(hours=1)))  # a host that went silent
    rb = Readback(store, clock).automation("x")
    assert rb.next_fire_at is None and rb.no_timer_host
    assert "no floorgate host is running" in rb.detail and "gone:7:x" in rb.detail
    host_running(store, clock)
    rb = Readback(store, clock).automation("x")
    assert rb.next_fire_at == T0 and not rb.no_timer_host  # its 09:00 fire is due now


def test_status_and_observed_follow_a_real_host(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "fg.db")
    add = run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "/bin/true", db=db)
    assert add.returncode == 0, add.stderr
    before = run_cli("status", db=db)
    assert "hosts: none running" in before.stdout and "none (no host)" in before.stdout
    assert "NO (its timer host is not running)" in before.stdout  # an old ACK is not an armed timer
    observed = run_cli("automation", "observed", "x", "--wait", "1s", db=db)
    assert observed.returncode == 1 and "no floorgate host is running" in observed.stdout
    host = start_host(f"sqlite:///{db}", tmp_path / "state")
    try:
        doc = wait_for(
            lambda: (d := json.loads(run_cli("status", "--json", db=db).stdout))["hosts"] and d["hosts"][0]["alive"] and d,
            what="the host's heartbeat",
        )
        assert doc["hosts"][0]["pid"] == host.pid
        assert doc["automations"][0]["next_fire_at"] is not None and not doc["automations"][0]["no_timer_host"]
        fresh = run_cli("automation", "observed", "x", "--wait", "20s", db=db)
        assert fresh.returncode == 0, fresh.stdout + fresh.stderr
        assert "read now:  present" in fresh.stdout
    finally:
        code, log = stop(host)
    assert code == 0, log
    assert "armed 1 timer(s), held 0 automation(s)" in log and "  x: next fire 20" in log  # what it armed, at start
    after = json.loads(run_cli("status", "--json", db=db).stdout)
    assert after["hosts"][0]["alive"] is False and after["hosts"][0]["stopped_at"] is not None
    assert after["automations"][0]["next_fire_at"] is None and after["automations"][0]["no_timer_host"]


def test_run_log_level_warning_keeps_the_start_quiet(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = str(tmp_path / "fg.db")
    assert (
        run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "/bin/true", db=db).returncode == 0
    )
    host = start_host(f"sqlite:///{db}", tmp_path / "state", "--log-level", "warning")
    wait_for(lambda: json.loads(run_cli("status", "--json", db=db).stdout)["hosts"], what="the host's heartbeat")
    code, log = stop(host)
    assert code == 0 and "armed" not in log and "running on" not in log, log
