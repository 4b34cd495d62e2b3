"""Backfill: a past range's fires run one after another, each passing admission; the dry run says
which the limits would admit and writes nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from basics import T0, raw_sql

from floorgate.admission import Admission, Automations, FixedClock, InvalidInput, Journal
from floorgate.admission.clock import iso
from floorgate.scheduler.app.backfill import BackfillService
from floorgate.scheduler.runtime.executor import TurnExecutor

from cli import run_cli
from helpers import add_automation, floor, lines, marker_script

HOURLY = "DTSTART:20261201T090000Z RRULE:FREQ=HOURLY"
HOUR = timedelta(hours=1)
NOW = T0 + 5 * HOUR + timedelta(minutes=10)


def _service(store, clock, tmp_path) -> BackfillService:  # type: ignore[no-untyped-def]
    return BackfillService(store, clock, lambda: TurnExecutor(store, state_dir=tmp_path / "state", clock=clock))


def _written(store) -> list[int]:  # type: ignore[no-untyped-def]
    return [raw_sql(store, f"SELECT count(*) FROM {t}")[0][0] for t in ("fg_starts", "fg_turns", "fg_ticks", "fg_events", "fg_missions")]


def _setup(store, tmp_path, floor_of: timedelta | None):  # type: ignore[no-untyped-def]
    clock = FixedClock(T0 - timedelta(days=1))
    marker = tmp_path / "launches"
    if floor_of is not None:
        floor(store, clock, "g/a", floor_of)
    add_automation(store, clock, schedule=HOURLY, script=marker_script(marker))
    clock.set(NOW)
    return clock, marker


@pytest.mark.parametrize(
    ("floor_of", "admitted"),
    [
        pytest.param(None, [True, True, True, True], id="no-floor"),
        pytest.param(timedelta(minutes=30), [True, False, False, False], id="floor-30m"),
    ],
)
def test_the_dry_run_writes_nothing_and_the_run_admits_what_it_said(store, tmp_path, floor_of, admitted) -> None:
    clock, marker = _setup(store, tmp_path, floor_of)
    service = _service(store, clock, tmp_path)
    before = _written(store)
    dry = service.run("x", T0, T0 + 3 * HOUR, dry_run=True)
    assert [r.fire_at for r in dry.rows] == [T0 + n * HOUR for n in range(4)]
    assert [r.admitted for r in dry.rows] == admitted
    assert _written(store) == before and lines(marker) == 0
    real = service.run("x", T0, T0 + 3 * HOUR, dry_run=False)
    assert [r.admitted for r in real.rows] == admitted and lines(marker) == sum(admitted)
    assert all(r.status == "succeeded" for r in real.rows if r.admitted)
    if floor_of is not None:
        starts = Admission(store, clock).starts(automation="x")
        assert [s.trigger_time for s in starts] == [T0] and starts[0].kind.value == "automatic"
        assert {r.reason for r in real.rows if not r.admitted} == {"interval_wait"}
    # Twice: no fire runs again (the floor, if any, still holds the others).
    again = service.run("x", T0, T0 + 3 * HOUR, dry_run=False)
    assert not any(r.admitted for r in again.rows) and lines(marker) == sum(admitted)
    assert [r.reason for r in again.rows if r.fire_at == T0] == ["already_ran"]


def test_backfill_of_a_paused_automation_runs_nothing_and_says_why(store, tmp_path) -> None:
    clock, marker = _setup(store, tmp_path, None)
    Automations(store, clock).set_state("x", "paused", None)
    service = _service(store, clock, tmp_path)
    for dry_run in (True, False):
        report = service.run("x", T0, T0 + HOUR, dry_run=dry_run)
        assert [r.reason for r in report.rows] == ["automation_paused"] * 2
    assert lines(marker) == 0 and Journal(store, clock).recent("x", 5) == []


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        pytest.param(T0 + HOUR, T0, "--to", id="reversed"),
        pytest.param(T0, NOW + HOUR, "--to", id="future"),
    ],
)
def test_a_bad_range_is_one_error_naming_the_flag(store, tmp_path, start, end, field) -> None:
    clock, _ = _setup(store, tmp_path, None)
    with pytest.raises(InvalidInput) as caught:
        _service(store, clock, tmp_path).run("x", start, end, dry_run=False)
    assert caught.value.field == field


def test_a_range_of_more_than_a_thousand_fires_is_refused(store, tmp_path) -> None:
    clock = FixedClock(T0 - timedelta(days=3))
    add_automation(store, clock, schedule="DTSTART:20261128T090000Z RRULE:FREQ=MINUTELY")
    clock.set(NOW)
    with pytest.raises(InvalidInput) as caught:
        _service(store, clock, tmp_path).run("x", T0 - timedelta(days=1), T0, dry_run=True)
    assert caught.value.field == "--from" and "narrow" in str(caught.value)


def test_floorgate_automation_backfill_runs_real_turns(sqlite_db, tmp_path) -> None:
    from floorgate.admission import SystemClock, open_store

    marker = tmp_path / "launches"
    with open_store(sqlite_db) as store:
        clock = SystemClock()
        now = clock.now()
        add_automation(store, FixedClock(now - timedelta(days=1)), schedule="every 1h", script=marker_script(marker))
        floor(store, FixedClock(now), "g/a", timedelta(minutes=30))
    start, end = iso(now - timedelta(hours=3)), iso(now)

    def fg(*argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "floorgate", "--db", sqlite_db, *argv]
        env = {**os.environ, "FLOORGATE_STATE_DIR": str(tmp_path / "state")}
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)

    dry = fg("automation", "backfill", "x", "--from", start, "--to", end, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    said = [f["admitted"] for f in json.loads(dry.stdout)["fires"]]
    assert len(said) == 3 and said == [True, False, False] and lines(marker) == 0
    ran = fg("automation", "backfill", "x", "--from", start, "--to", end)
    assert ran.returncode == 0, ran.stderr
    assert "ran 1 of 3 fires" in ran.stdout and "yes: succeeded" in ran.stdout, ran.stdout
    assert lines(marker) == 1
    bad = run_cli("automation", "backfill", "x", "--from", end, "--to", start, "--db", sqlite_db)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "--to" in bad.stderr, bad.stderr
