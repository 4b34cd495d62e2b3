"""A real ``floorgate run`` under faults: lost database connections, a floor lowered under it,
corrupt rows, a crashed ``turn run`` next to it. The host must keep ticking through all of them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from basics import PG_URL, psycopg_dsn, raw_sql

from floorgate.admission import AutomationSpec, Automations, CommandHost, Journal, Policies, Scope, SystemClock, TurnRecord, open_store

from helpers import CORRUPTIONS, add_automation, corrupt, floor, lines, marker_script, start_host, stop, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("db_url", ["postgresql"], indirect=True)
def test_terminating_every_connection_of_the_host_three_times_does_not_stop_its_timers(db_url: str, tmp_path: Path) -> None:
    import psycopg

    marker = tmp_path / "launches"
    with open_store(db_url) as store:
        floor(store, SystemClock(), "g/a", timedelta(seconds=1))  # type: ignore[arg-type]
        add_automation(store, SystemClock(), schedule="every 1s", script=marker_script(marker))  # type: ignore[arg-type]
    name = f"fg-host-{uuid.uuid4().hex[:12]}"
    host = start_host(f"{db_url}&application_name={name}", tmp_path / "state")
    try:
        wait_for(lambda: lines(marker) >= 2, timeout=20, what="the first turns")
        for round_ in range(3):
            with psycopg.connect(psycopg_dsn(PG_URL), autocommit=True) as conn:  # type: ignore[arg-type]
                killed = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s", (name,)
                ).fetchall()
            assert killed, "the host had no connection to terminate"
            before = lines(marker)
            wait_for(lambda before=before: lines(marker) >= before + 2, timeout=15, what=f"turns after termination {round_ + 1}")
        assert host.poll() is None
    finally:
        code, log = stop(host)
    assert code == 0, log[-3000:]


def test_lowering_the_floor_under_a_running_host_is_picked_up_within_poll(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    marker = tmp_path / "launches"
    with open_store(db_url) as store:
        floor(store, clock, "g/a", timedelta(hours=1))  # type: ignore[arg-type]
        add_automation(store, clock, schedule="every 1s", script=marker_script(marker))  # type: ignore[arg-type]
    host = start_host(db_url, tmp_path / "state")
    try:
        wait_for(lambda: lines(marker) == 1, timeout=20, what="the first turn")
        with open_store(db_url) as store:
            Policies(store, clock).configure(
                Scope.parse("g/a"), min_interval=timedelta(seconds=1), expected_revision=1, owner_ref="owner", allow_reduction=True
            )
        # --poll is 1s: the next turn is due at once, so a few seconds bound sync plus a launch.
        wait_for(lambda: lines(marker) >= 2, timeout=6, what="a turn under the lowered floor")
    finally:
        code, log = stop(host)
    assert code == 0, log[-3000:]


def _corrupt_turn(store, automation_id: str) -> None:  # type: ignore[no-untyped-def]
    raw_sql(
        store,
        "INSERT INTO fg_turns (turn_id, automation_id, goal_id, agent_id, attempt, kind, manual_reason, runner_host, runner_pid, "
        "child_pid, started_at_us, deadline_us, phase) VALUES ('corrupt-turn', :x, 'g', 'bt', 1, 'bogus', NULL, 'elsewhere:1', 1, "
        "NULL, 0, 0, 'bogus')",
        {"x": automation_id},
    )


def test_corrupt_rows_hold_their_automations_and_the_host_runs_the_others(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    good, bad = tmp_path / "good", tmp_path / "bad"
    with open_store(db_url) as store:
        add_automation(store, clock, automation_id="good", schedule="every 1s", script=marker_script(good))  # type: ignore[arg-type]
        for i, kind in enumerate(CORRUPTIONS):
            floor(store, clock, f"g/b{i}", timedelta(hours=1))  # type: ignore[arg-type]
            add_automation(store, clock, automation_id=f"bad{i}", agent=f"b{i}", schedule="every 1s", script=marker_script(bad))  # type: ignore[arg-type]
            corrupt(store, kind, f"bad{i}")
        add_automation(store, clock, automation_id="badturn", agent="bt", schedule="every 1s", script=marker_script(bad))  # type: ignore[arg-type]
        _corrupt_turn(store, "badturn")
    host = start_host(db_url, tmp_path / "state")
    try:
        wait_for(lambda: lines(good) >= 3, timeout=20, what="the good automation's turns")
        assert host.poll() is None
    finally:
        code, log = stop(host)
    assert code == 0, log[-3000:]
    assert not bad.exists(), [line for line in log.splitlines() if "admitted" in line and "bad" in line][
        :5
    ]  # no corrupt automation ever launched
    for i, kind in enumerate(CORRUPTIONS):
        held = [line for line in log.splitlines() if f"automation bad{i} is held by this host" in line]
        assert len(held) == 1, (kind, log[-3000:])  # logged once, with the reason


def test_a_running_host_recovers_a_crashed_turn_run_and_ticks_again(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    marker, child = tmp_path / "launches", tmp_path / "child.pid"
    # Only the manual `turn run` below passes FG_TEST_SLEEP: its command sleeps, the host's do not.
    script = (
        "import os, time; "
        f"open({str(marker)!r}, 'a').write('launch\\n'); "
        f"s = float(os.environ.get('FG_TEST_SLEEP', '0')); s and open({str(child)!r}, 'w').write(str(os.getpid())); "
        "time.sleep(s)"
    )
    spec = AutomationSpec(
        goal_id="g",
        agent_id="a",
        schedule="every 1s",
        host=CommandHost(argv=(sys.executable, "-c", script), env_allow=("FG_TEST_SLEEP",), timeout_seconds=120),
    )
    from floorgate.hosts import Schedule

    with open_store(db_url) as store:
        Automations(store, clock).add("x", spec.model_copy(update={"schedule": Schedule.parse("every 1s").canonical()}))
    host = start_host(db_url, tmp_path / "state")
    runner = None
    try:
        wait_for(lambda: lines(marker) >= 1, timeout=20, what="the host's first turn")
        manual = [sys.executable, "-m", "floorgate", "turn", "run", "x", "--db", db_url, "--state-dir", str(tmp_path / "manual")]
        manual += ["--manual-reason", "crash test"]
        with open_store(db_url) as store:
            journal = Journal(store)

            def manual_turn() -> TurnRecord | None:
                # A manual run that meets one of the host's own turns is skipped (overlap): run it again.
                nonlocal runner
                if runner is None or runner.poll() is not None:
                    runner = subprocess.Popen(
                        manual, env={**os.environ, "FG_TEST_SLEEP": "60"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                return next((r for r in journal.unsettled("x") if r.child_pid and r.kind == "manual"), None)

            crashed = wait_for(manual_turn, timeout=60, what="the manual turn")
            wait_for(child.exists, timeout=40, what="the manual turn's command")
            assert runner is not None
            runner.send_signal(signal.SIGKILL)
            runner.wait(timeout=30)
            killed_at = lines(marker)
            # Recovery runs every 5 polls (5 s here): bounded, without restarting the host (the wait
            # allows for a loaded CI machine running two test workers beside the host).
            settled = wait_for(
                lambda: (r := journal.get(crashed.turn_id)) is not None and r.verdict is not None and r, timeout=30, what="recovery"
            )
            assert settled.verdict.stop_reason == "unknown_outcome"
            wait_for(lambda: lines(marker) > killed_at, timeout=20, what="a turn after recovery (no overlap skip forever)")
        assert host.poll() is None
    finally:
        if runner is not None and runner.poll() is None:
            runner.kill()
        code, log = stop(host)
    assert code == 0, log[-3000:]
