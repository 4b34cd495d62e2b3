"""max_wall_seconds with pause_ask: the mission's wall clock is its turns' run time, an approval
grants a step a turn can run on, and the turn it authorizes consumes it (seed 000, 003)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from basics import T0, raw_sql
from test_envelope import automation, envelope, run
from test_executor import crashed, dead_owner

from floorgate.admission import Approvals, FixedClock, Journal, Missions
from floorgate.scheduler.runtime.recovery import recover

from cli import run_cli

HOUR_US = 3_600_000_000


def test_waiting_for_the_owner_is_not_running_and_each_approved_step_lets_a_longer_turn_run(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_wall_seconds": 1, "on_exhausted": "pause_ask"}')
    runs = tmp_path / "runs"  # the third run finishes at once; the first two would sleep on
    script = (
        f"import pathlib, sys, time; p = pathlib.Path({str(runs)!r}); n = int(p.read_text()) if p.exists() else 0; "
        "p.write_text(str(n + 1)); sys.exit(0) if n >= 2 else time.sleep(30)"
    )
    auto = automation(store, clock, script, timeout=3)
    approvals, missions = Approvals(store, clock), Missions(store, clock)
    proposals = []
    for cut_at in (1, 3):  # cut off after 1 s, then after the 2 s the first approval granted
        cut = run(store, clock, tmp_path, auto)
        assert cut.record is not None and Journal(store, clock).get(cut.turn_id) is not None  # it launched
        assert cut.verdict.status == "stuck" and cut.verdict.bound == "max_wall_seconds", cut.verdict
        (ask,) = approvals.pending()
        assert missions.get(ask.mission_id).wall_seconds == cut_at  # its turns' run time, to the cap
        proposals.append(ask.proposal["max_wall_seconds"])
        clock.advance(timedelta(hours=5))  # the owner answers hours later: waiting is not running
        approvals.decide(ask.approval_id, True, scope_now="g/a/x")
    assert proposals == [2, 3]  # twice what the cut-off turn ran, never past one turn's timeout (3 s)
    done = run(store, clock, tmp_path, auto)
    assert done.verdict.status == "succeeded", done.verdict
    mission = missions.get(ask.mission_id)
    assert mission.status == "succeeded" and mission.extra_wall_seconds == 5 and mission.wall_seconds == 3


def test_a_lost_turn_counts_the_longest_it_can_have_run(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    automation(store, clock)
    mission = Missions(store, clock).open("x", "g", "a")
    crashed(store, clock, "t-lost", dead_owner(), phase="launched")  # its deadline: 5 minutes after its start
    raw_sql(store, "UPDATE fg_turns SET mission_id = :m WHERE turn_id = 't-lost'", {"m": mission.mission_id})
    clock.advance(timedelta(minutes=2))
    assert [r.turn_id for r in recover(store, clock).settled] == ["t-lost"]
    assert Missions(store, clock).get(mission.mission_id).wall_seconds == 120  # unknown is never free
    clock.advance(timedelta(hours=1))
    assert recover(store, clock).settled == [] and Missions(store, clock).get(mission.mission_id).wall_seconds == 120


def fg(db: str, cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The real ``floorgate`` as a process, as the walkthrough ran it."""
    return subprocess.run([sys.executable, "-m", "floorgate", "--db", db, *argv], capture_output=True, text=True, cwd=cwd, timeout=120)


def test_turn_run_after_approving_a_wall_ask_launches_and_mission_show_reads_the_wall(store, db_url, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    envelope(store, clock, '{"max_wall_seconds": 1, "on_exhausted": "pause_ask"}')
    automation(store, clock, "import time; time.sleep(30)", timeout=60)
    first = fg(db_url, tmp_path, "turn", "run", "x", "--manual-reason", "x", "--json")
    assert "max_wall_seconds=1" in first.stdout, first.stdout + first.stderr
    (ask,) = Approvals(store, clock).pending()
    # The owner answers an hour after the mission opened: calendar time, not run time.
    raw_sql(store, "UPDATE fg_missions SET started_at_us = started_at_us - :h", {"h": HOUR_US})
    assert fg(db_url, tmp_path, "approve", ask.approval_id).returncode == 0
    status = fg(db_url, tmp_path, "status").stdout
    assert f"owner ask {ask.approval_id} (since approved: the mission is open again)" in status, status  # not a live ask
    assert re.search(r"wall 1(\.\d+)?s/3s", status), status  # it ran its second (and the kill), of three granted
    shown = json.loads(fg(db_url, tmp_path, "automation", "show", "x", "--json").stdout)
    assert shown["last_turn_since"] == "since approved: the mission is open again" and 1 < shown["mission"]["left"]["wall_seconds"] <= 2
    second = fg(db_url, tmp_path, "turn", "run", "x", "--manual-reason", "x", "--json")
    doc = json.loads(second.stdout)
    assert "max_wall_seconds=3" in second.stdout, second.stdout  # it ran the granted 2 s, then asked again
    shown = fg(db_url, tmp_path, "turn", "show", doc["turn_id"])
    assert shown.returncode == 0 and "no journal record" not in shown.stdout + shown.stderr, shown.stdout + shown.stderr
    mission = json.loads(fg(db_url, tmp_path, "mission", "show", ask.mission_id, "--json").stdout)
    assert mission["wall_seconds"] >= 3 and mission["left"]["wall_seconds"] == 0, mission
    (again,) = mission["pending_asks"]
    assert again["proposal"] == {"max_wall_seconds": 4} and again["approval_id"] != ask.approval_id  # twice the 2 s it ran
    waiting = fg(db_url, tmp_path, "turn", "run", "x", "--manual-reason", "x").stdout
    assert f"approve {again['approval_id']}" in waiting and "nothing launched or journaled" in waiting, waiting  # no phantom turn id
    text = fg(db_url, tmp_path, "mission", "show", ask.mission_id).stdout
    assert "wall " in text and "left: " in text and "wall_seconds 0" in text, text
    assert "max_tokens inert" not in text, text  # no max_tokens set: nothing is inert


@pytest.mark.parametrize(
    "block, inert",
    [
        pytest.param('{"max_tokens": 1000}', True, id="max-tokens-set-nothing-reported"),
        pytest.param('{"max_wall_seconds": 60}', False, id="no-max-tokens-nothing-inert"),
    ],
)
def test_mission_show_calls_max_tokens_inert_only_when_it_is_set(store, db_url, tmp_path, block: str, inert: bool) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    envelope(store, clock, block)
    automation(store, clock)
    mission = Missions(store, clock).open("x", "g", "a")
    shown = run_cli("mission", "show", mission.mission_id, db=db_url, cwd=tmp_path)
    assert shown.returncode == 0 and "tokens not reported" in shown.stdout, shown.stdout + shown.stderr
    assert ("max_tokens inert" in shown.stdout) is inert, shown.stdout
