"""Event triggers on a fake clock, on both backends: a burst coalesces into one wake after its
debounce (never later than MAX_WAIT after the first), a trigger id counts once, a trigger that comes
while a turn runs is kept as one pending wake for after it, a floor-denied triggered wake is re-armed
at the floor's end, and ``poke`` is ``trigger``."""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime, timedelta

import pytest
from basics import T0, raw_sql

from floorgate.admission import Admission, AutomationSpec, Automations, Debounce, Events, FixedClock, Store, Triggers, open_store
from floorgate.hosts import Schedule
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.app.wake import next_wake
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from console_kit import console
from helpers import command, floor
from test_cli import cli, one_line_error

DAILY_9 = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY"
AT_10 = T0 + timedelta(hours=1)  # an hour after the day's fire: nothing scheduled until tomorrow
S = timedelta(seconds=1)


def _add(store: Store, clock: FixedClock, debounce: Debounce | None = None) -> None:
    spec = AutomationSpec(goal_id="g", agent_id="a", schedule=DAILY_9, host=command("pass"), debounce=debounce)
    Automations(store, clock).add("x", spec)


def _host(store: Store, clock: FixedClock, tmp_path) -> HostRuntime:  # type: ignore[no-untyped-def]
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    host.load_policy()
    host.scheduler.start(paused=True)
    return host


def _starts(store: Store) -> int:
    """Turns launched (without a floor, admission records no start of its own)."""
    return int(raw_sql(store, "SELECT COUNT(*) FROM fg_turns")[0][0])


@pytest.mark.parametrize(
    ("debounce", "offsets", "due"),
    [
        pytest.param(Debounce(quiet=30 * S), [0, 10, 20], 50, id="burst-wakes-once-at-last-plus-quiet"),
        pytest.param(Debounce(quiet=30 * S, max_wait=60 * S), [0, 20, 40, 60], 60, id="max-wait-caps-a-long-burst"),
        pytest.param(Debounce(quiet=30 * S, max_wait=30 * S), [0], 30, id="max-wait-equal-to-quiet"),
        pytest.param(None, [0, 5], 5, id="no-debounce-wakes-at-once"),
    ],
)
def test_a_burst_coalesces_into_one_wake_at_its_debounce(store, tmp_path, debounce, offsets: list[int], due: int) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(AT_10)
    _add(store, clock, debounce)
    host = _host(store, clock, tmp_path)
    try:
        host.sync()
        triggers = Triggers(store, clock)
        for offset in offsets:
            clock.set(AT_10 + offset * S)
            triggers.trigger("x")
            host.sync()  # a host polling the store between triggers moves its one wake
        assert host.armed()["x"] == AT_10 + due * S
        clock.set(AT_10 + due * S)
        tick = host.tick("x")
        assert tick.decision == "admitted" and tick.nominal_at == AT_10 + due * S
        assert triggers.pending("x") is None  # the start served every trigger of the burst
        assert _starts(store) == 1
        assert host.armed()["x"] == T0 + timedelta(days=1)  # back to the schedule: no second wake
    finally:
        host.scheduler.shutdown(wait=False)


def test_the_same_trigger_id_twice_is_one_trigger(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(AT_10)
    _add(store, clock, Debounce(quiet=30 * S))
    triggers = Triggers(store, clock)
    first = triggers.trigger("x", key="repo/main", trigger_id="build-41")
    clock.advance(10 * S)
    again = triggers.trigger("x", key="repo/other", trigger_id="build-41")
    assert first.new and not again.new
    assert again.at == first.at and again.key == "repo/main"  # what was recorded, not the repeat
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_triggers") == [(1,)]
    events = [e for e in Events(store).list() if e.kind.value == "automation_triggered"]
    assert len(events) == 1 and events[0].subject == "x"
    assert triggers.pending("x") is not None and triggers.pending("x").count == 1  # type: ignore[union-attr]


def test_a_trigger_during_a_running_turn_is_one_pending_wake_after_it(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(AT_10)
    _add(store, clock)
    host = _host(store, clock, tmp_path)
    triggers = Triggers(store, clock)
    try:
        triggers.trigger("x")
        host.sync()
        running = host.ticking._admit(host.ticking._tick_once("x"))  # the turn has started; it runs until _run_pending
        assert triggers.pending("x") is None
        for _ in range(3):  # new work while it runs
            clock.advance(S)
            triggers.trigger("x")
        host.sync()
        assert host.tick("x").reason == "overlap"  # the wake fires while the turn runs: skipped
        fired = clock.now()
        job = host.scheduler.get_job("x")
        after = job.trigger.get_next_fire_time(fired, fired)
        assert after == T0 + timedelta(days=1)  # as APScheduler plans on from that fire: the trigger's wake is spent
        host.scheduler.modify_job("x", next_run_time=after)
        clock.advance(S)
        host.ticking._run_pending(running)  # type: ignore[arg-type]
        pending = triggers.pending("x")
        assert pending is not None and pending.count == 3  # kept: the settlement does not clear it
        assert host.armed()["x"] == clock.now() - S  # one wake, at the last trigger's due time: already past, it fires at once
        assert host.tick("x").decision == "admitted"
        assert triggers.pending("x") is None and _starts(store) == 2
        assert host.armed()["x"] == T0 + timedelta(days=1)
    finally:
        host.scheduler.shutdown(wait=False)


def test_a_floor_denied_triggered_wake_is_re_armed_at_the_floor_s_end(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(AT_10)
    floor(store, clock, "g/a", timedelta(hours=1))
    _add(store, clock)
    host = _host(store, clock, tmp_path)
    triggers = Triggers(store, clock)
    try:
        triggers.trigger("x")
        host.sync()
        assert host.armed()["x"] == AT_10
        # Another host's start lands first: this wake is denied by the floor.
        assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="other", trigger_time=AT_10 - S).admitted
        denied = host.tick("x")
        assert denied.decision == "denied" and denied.reason == "interval_wait"
        assert triggers.pending("x") is not None  # not dropped
        assert host.armed()["x"] == AT_10 + timedelta(hours=1)  # re-armed when the floor opens
        clock.set(AT_10 + timedelta(hours=1))
        assert host.tick("x").decision == "admitted"
        assert triggers.pending("x") is None
    finally:
        host.scheduler.shutdown(wait=False)


@pytest.mark.parametrize(
    ("previous", "floor_end", "expected"),
    [
        pytest.param(None, None, AT_10, id="armed-fires-at-its-due"),
        pytest.param(AT_10, None, T0 + timedelta(days=1), id="fired-and-not-denied-is-not-fired-again"),
        pytest.param(AT_10, AT_10 + timedelta(hours=1), AT_10 + timedelta(hours=1), id="fired-and-floor-denied-waits-for-the-floor"),
        pytest.param(None, AT_10 + timedelta(hours=1), AT_10 + timedelta(hours=1), id="never-before-the-floor"),
    ],
)
def test_the_planner_s_triggered_wake(previous: datetime | None, floor_end: datetime | None, expected: datetime) -> None:
    from floorgate.admission import WakeState

    chosen = next_wake(
        Schedule.parse(DAILY_9),
        previous=previous,
        now=AT_10,
        wake=WakeState(automation_id="x"),
        next_eligible_at=floor_end,
        last_ticked=None,
        catch_up=timedelta(0),
        since=None,
        trigger_at=AT_10,
    )
    assert chosen == expected


# -- surfaces ------------------------------------------------------------------------------------


@pytest.fixture
def db(sqlite_db: str) -> str:
    return sqlite_db


def _cli_add(db: str, *options: str):  # type: ignore[no-untyped-def]
    return cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "daily at 09:00 UTC", *options, "--",
               sys.executable, "-c", "pass", db=db)  # fmt: skip


def _count(db: str, table: str) -> int:
    with open_store(db) as store:
        return int(raw_sql(store, f"SELECT COUNT(*) FROM {table}")[0][0])


def test_trigger_and_poke_from_the_cli_say_what_they_did(db: str) -> None:
    assert _cli_add(db, "--debounce", "30s,5m").returncode == 0
    shown = json.loads(cli("automation", "show", "x", "--json", db=db).stdout)
    assert shown["spec"]["debounce"] == {"quiet_seconds": 30.0, "max_wait_seconds": 300.0} and shown["trigger"] is None
    first = cli("automation", "trigger", "x", "--key", "repo/main", "--id", "build-41", db=db)
    assert first.returncode == 0 and first.stdout.startswith("triggered x (trigger build-41); 1 pending since"), first.stdout
    again = cli("automation", "trigger", "x", "--id", "build-41", db=db)
    assert again.returncode == 0 and "already recorded" in again.stdout and "nothing new" in again.stdout
    instants = re.findall(r"\d{4}-\d\d-\d\dT[0-9:.]+Z", first.stdout + again.stdout)
    assert instants and all("." not in i for i in instants), instants  # whole seconds in text, as elsewhere
    poked = json.loads(cli("automation", "poke", "x", "--json", db=db).stdout)  # the old name: a trigger
    assert poked["repeated"] is False and poked["wake"]["pending"] == 2
    shown = json.loads(cli("automation", "show", "x", "--json", db=db).stdout)
    assert shown["trigger"]["pending"] == 2 and shown["trigger"]["wake_at"] is not None
    status = json.loads(cli("status", "--json", db=db).stdout)["automations"][0]
    assert "triggered: new work pending, due " in status["detail"]
    assert _count(db, "fg_triggers") == 2
    edited = cli("automation", "edit", "x", "--debounce", "none", "--json", db=db)
    assert edited.returncode == 0 and json.loads(edited.stdout)["debounce"] is None


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        pytest.param(["automation", "edit", "x", "--debounce", "5m,30s"], "--debounce", id="max-wait-below-quiet"),
        pytest.param(["automation", "edit", "x", "--debounce", "soon"], "--debounce", id="not-a-duration"),
        pytest.param(["automation", "edit", "x", "--debounce", "2d"], "--debounce", id="longer-than-a-day"),
        pytest.param(["automation", "edit", "x", "--debounce", "1s,2s,3s"], "--debounce", id="three-parts"),
        pytest.param(["automation", "trigger", "nope"], "does not exist", id="unknown-automation"),
        pytest.param(["automation", "trigger", "x", "--key", "a\x1b[2Jb"], "--key", id="control-in-key"),
        pytest.param(["automation", "trigger", "x", "--id", "a\nb"], "--id", id="control-in-id"),
    ],
)
def test_bad_trigger_input_is_one_line_exit_2_and_writes_nothing(db: str, argv: list[str], field: str) -> None:
    assert _cli_add(db).returncode == 0
    with open_store(db) as store:
        before = raw_sql(store, "SELECT * FROM fg_automations")
    r = cli(*argv, db=db)
    assert r.returncode == 2 and field in one_line_error(r)
    with open_store(db) as store:
        assert raw_sql(store, "SELECT * FROM fg_automations") == before
    assert _count(db, "fg_triggers") == 0 and _count(db, "fg_events") == 0


def test_the_api_triggers_idempotently_with_an_owner_token(store, clock) -> None:  # type: ignore[no-untyped-def]
    _add(store, clock, Debounce(quiet=30 * S))
    c = console(store, clock)
    assert c.post("/api/automations/x/trigger", {"id": "b1"}, token=c.viewer).status_code == 403
    r = c.post("/api/automations/x/trigger", {"id": "b1", "key": "repo/main"})
    assert r.status_code == 200 and r.json()["repeated"] is False and r.json()["wake"]["pending"] == 1
    again = c.post("/api/automations/x/trigger", {"id": "b1"})
    assert again.status_code == 200 and again.json()["repeated"] is True
    for body in ({"key": "a\x1bb"}, {"id": 7}, {"when": "now"}):
        bad = c.post("/api/automations/x/trigger", body)
        assert bad.status_code == 422, body
    assert c.post("/api/automations/nope/trigger", {}).status_code == 404
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_triggers") == [(1,)]
