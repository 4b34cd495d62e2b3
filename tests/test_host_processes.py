"""``floorgate run`` as real processes: two hosts on one store, SIGKILL mid-turn, clean SIGTERM."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from itertools import pairwise
from pathlib import Path

import pytest
from basics import raw_sql

from floorgate.admission import Admission, Journal, SystemClock, open_store

from helpers import add_automation, floor, start_host, stop, wait_for

pytestmark = pytest.mark.slow


def test_two_hosts_ticking_every_second_respect_a_two_second_floor(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    with open_store(db_url) as store:
        floor(store, clock, "g/a", timedelta(seconds=2))  # type: ignore[arg-type]
        add_automation(store, clock, schedule="every 1s", script="pass")  # type: ignore[arg-type]
    hosts = [start_host(db_url, tmp_path / f"state{i}") for i in range(2)]

    def starts() -> int:
        with open_store(db_url) as store:
            return int(raw_sql(store, "SELECT COUNT(*) FROM fg_starts")[0][0])

    try:
        # Both hosts tick every second for as long as five floor windows take (at least 8 s).
        wait_for(lambda: starts() >= 5, timeout=60, what="five starts")
    finally:
        results = [stop(h) for h in hosts]
    for code, err in results:
        assert code == 0, err[-2000:]
    with open_store(db_url) as store:
        anchors = [row[0] for row in raw_sql(store, "SELECT anchor_us FROM fg_starts ORDER BY anchor_us")]
        hosts_seen = {row[0] for row in raw_sql(store, "SELECT DISTINCT runner_host FROM fg_turns")}
        denied = raw_sql(store, "SELECT COUNT(*) FROM fg_ticks WHERE decision = 'denied'")[0][0]
    gaps = [b - a for a, b in pairwise(anchors)]
    assert len(anchors) >= 5, anchors
    assert min(gaps) >= 2_000_000, gaps
    assert len(hosts_seen) == 2 or denied > 0  # both hosts really competed


def test_sigkill_mid_turn_recovers_as_unknown_outcome(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    child_pid_file = tmp_path / "child.pid"
    script = f"import os, time; open({str(child_pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    with open_store(db_url) as store:
        floor(store, clock, "g/a", timedelta(hours=1))  # type: ignore[arg-type]
        add_automation(store, clock, schedule="every 1s", script=script, timeout=120)  # type: ignore[arg-type]
    host = start_host(db_url, tmp_path / "state")
    try:
        with open_store(db_url) as store:
            journal = Journal(store)
            record = wait_for(lambda: next((r for r in journal.unsettled("x") if r.child_pid), None), what="a launched turn")
        wait_for(child_pid_file.exists, what="the turn's process")
        host.send_signal(signal.SIGKILL)
        host.wait(timeout=30)
        child = int(child_pid_file.read_text())

        def gone() -> bool:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return True
            return False

        wait_for(gone, timeout=10, what="the orphaned turn to die with its host")
        restarted = start_host(db_url, tmp_path / "state")
        with open_store(db_url) as store:
            journal = Journal(store)
            settled = wait_for(lambda: (r := journal.get(record.turn_id)) is not None and r.verdict is not None and r, what="recovery")
            assert settled.verdict.stop_reason == "unknown_outcome" and settled.verdict.failure_category == "infra"
            starts = Admission(store).starts(automation="x")
            assert [s.turn_id for s in starts] == [record.turn_id]  # not refunded: the floor still counts from it
        code, err = stop(restarted)
        assert code == 0, err[-2000:]
    finally:
        if host.poll() is None:
            host.kill()


def test_sigterm_lets_the_running_turn_settle(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    started = tmp_path / "started"
    script = f"import time; open({str(started)!r}, 'w').write('x'); time.sleep(2)"
    with open_store(db_url) as store:
        add_automation(store, clock, schedule="every 1s", script=script, timeout=60)  # type: ignore[arg-type]
    host = start_host(db_url, tmp_path / "state")
    wait_for(started.exists, what="a running turn")
    code, err = stop(host, signal.SIGTERM)
    assert code == 0, err[-2000:]
    with open_store(db_url) as store:
        journal = Journal(store)
        assert journal.unsettled() == []
        statuses = {r.verdict.status for r in journal.recent("x", 10)}
        assert "succeeded" in statuses


def test_changes_are_picked_up_without_a_restart(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    with open_store(db_url) as store:
        add_automation(store, clock, automation_id="late", schedule="every 1s", script="pass")  # type: ignore[arg-type]
        from floorgate.admission import Automations

        Automations(store).set_state("late", "paused", "not yet")
    host = start_host(db_url, tmp_path / "state")
    try:
        with open_store(db_url) as store:
            journal = Journal(store)
            time.sleep(3)
            assert journal.recent("late") == []  # paused: no turns
            Automations(store).set_state("late", "active", None)
            wait_for(lambda: journal.recent("late"), timeout=15, what="the resumed automation to run")
    finally:
        code, err = stop(host)
    assert code == 0, err[-2000:]
