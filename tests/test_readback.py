"""One readback under every surface: the simulation, holds, unreadable rows, the host policy."""

from __future__ import annotations

from datetime import timedelta
from typing import get_args

import pytest
from basics import T0, raw_sql

from floorgate.admission import (
    AutomationState,
    Automations,
    FixedClock,
    HoldKind,
    HostPolicies,
    HostPolicy,
    RevisionConflict,
    Tick,
    TickLog,
    WakeState,
)
from floorgate.admission.decide.checks import READBACK
from floorgate.admission.decisions import EligibilityStatus
from floorgate.hosts import Schedule
from floorgate.scheduler.app.preview import FloorMeeting, PlanInputs, first_run, first_run_at, simulate
from floorgate.scheduler.app.readback import Readback, ReadbackState
from floorgate.scheduler.app.root import Floorgate, Settings

from helpers import add_automation, floor, host_running

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
HOURLY_AT_49 = "DTSTART:20261201T084900Z RRULE:FREQ=HOURLY"
H = timedelta(hours=1)
M = timedelta(minutes=1)


# -- the simulation: one table of how each kind of host meets a floor ------------------------------
CASES = [
    # id, meeting, wait, floor, next eligible (offset from T0), expected (fire offset -> runs offset or None)
    ("coalesce-no-floor", FloorMeeting.COALESCE, timedelta(0), None, None, [(15, 15), (30, 30), (45, 45)]),
    ("coalesce-hourly-floor", FloorMeeting.COALESCE, timedelta(0), H, 20 * M, [(15, 20), (30, None), (45, None), (60, None), (75, 80)]),
    ("wait-2m-catches-a-close-floor", FloorMeeting.WAIT, 2 * M, H, 16 * M, [(15, 16), (30, None), (45, None), (60, None), (75, 76)]),
    (
        "wait-2m-loses-a-far-floor",
        FloorMeeting.WAIT,
        2 * M,
        H,
        20 * M,
        [(15, None), (30, 30), (45, None), (60, None), (75, None), (90, 90)],
    ),
    (
        "deny-inside-the-floor",
        FloorMeeting.DENY,
        timedelta(0),
        H,
        16 * M,
        [(15, None), (30, 30), (45, None), (60, None), (75, None), (90, 90)],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_each_host_meets_the_floor_its_own_way(case) -> None:  # type: ignore[no-untyped-def]
    _, meeting, wait, floor_, eligible, expected = case
    plan = PlanInputs(
        schedule=Schedule.parse(EVERY_15M),
        meeting=meeting,
        floor=floor_,
        next_eligible_at=T0 + eligible if eligible is not None else None,
        wait=wait,
        catch_up=timedelta(0),
    )
    rows = simulate(plan, count=len(expected), now=T0 + M)
    got = [(int((r.fire_at - T0) / M), int((r.runs_at - T0) / M) if r.runs_at else None) for r in rows]
    assert got == expected


# status asks when each automation's next turn starts: answered from a few schedule queries, it
# must be what the full simulation of every coming fire says.
_SCHEDULES = {
    "15m": EVERY_15M,
    "daily": "DTSTART:20261130T093000Z RRULE:FREQ=DAILY",
    "ended": "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;COUNT=2",
}
_NEXT_ELIGIBLE = {"none": None, "elapsed": -5 * M, "in-20m": 20 * M, "in-26h": 26 * H, "in-3d": 72 * H}
_WAKES = {"no-backoff": None, "backoff-in-5m": 5 * M, "backoff-in-30h": 30 * H}
_CATCH_UP = {"no-catch-up": (timedelta(0), None), "catch-up": (2 * H, None), "caught-up": (2 * H, T0)}
_MEETINGS = {
    "coalesce": (FloorMeeting.COALESCE, timedelta(0)),
    "wait": (FloorMeeting.WAIT, 10 * M),
    "deny": (FloorMeeting.DENY, timedelta(0)),
}
FIRST_RUN_CASES = [
    (f"{m}-{sk}-eligible-{ek}-{wk}-{ck}", m, sk, ek, wk, ck)
    for m in _MEETINGS
    for sk in _SCHEDULES
    for ek in _NEXT_ELIGIBLE
    for wk in _WAKES
    for ck in _CATCH_UP
    if m == "coalesce" or (wk == "no-backoff" and ck == "no-catch-up")  # the others read neither
]


@pytest.mark.parametrize("case", FIRST_RUN_CASES, ids=[c[0] for c in FIRST_RUN_CASES])
def test_the_first_run_status_shows_is_the_simulations_over_every_coming_fire(case) -> None:  # type: ignore[no-untyped-def]
    _, meeting_key, schedule_key, eligible_key, wake_key, catch_up_key = case
    now = T0 + 7 * M
    meeting, wait = _MEETINGS[meeting_key]
    eligible, backoff = _NEXT_ELIGIBLE[eligible_key], _WAKES[wake_key]
    catch_up, last_ticked = _CATCH_UP[catch_up_key]
    plan = PlanInputs(
        schedule=Schedule.parse(_SCHEDULES[schedule_key]),
        meeting=meeting,
        floor=26 * H,
        next_eligible_at=now + eligible if eligible is not None else None,
        wait=wait,
        wake=WakeState(automation_id="a", backoff_step=1, backoff_wake_at=now + backoff) if backoff is not None else None,
        last_ticked=last_ticked,
        catch_up=catch_up,
    )
    simulated = first_run(simulate(plan, count=400, now=now))  # 400 fires: 100 hours of the 15m schedule
    assert first_run_at(plan, now=now) == simulated


def test_a_due_fire_inside_the_catch_up_window_runs_at_once() -> None:
    plan = PlanInputs(schedule=Schedule.parse(EVERY_15M), meeting=FloorMeeting.COALESCE, floor=None, next_eligible_at=None, catch_up=H)
    now = T0 + 20 * M
    first = simulate(plan, count=2, now=now)[0]
    assert first.fire_at == T0 + 15 * M and first.runs_at == now
    already = PlanInputs(**{**plan.__dict__, "last_ticked": T0 + 15 * M})
    assert simulate(already, count=1, now=now)[0].fire_at == T0 + 30 * M
    none = PlanInputs(**{**plan.__dict__, "catch_up": timedelta(0)})
    assert simulate(none, count=1, now=now)[0].fire_at == T0 + 30 * M


def test_a_missed_fire_coalesced_under_the_floor_is_not_listed_as_a_next_fire() -> None:
    # 09:15 was missed; the floor opens at 10:10, after the 09:30 .. 10:00 fires: the host wakes
    # once, at 10:10, for the 10:00 fire. Nothing fires for 09:15: listing it under "next fires"
    # (at 09:20) showed a time already past.
    now = T0 + 20 * M
    plan = PlanInputs(schedule=Schedule.parse(EVERY_15M), meeting=FloorMeeting.COALESCE, floor=H, next_eligible_at=T0 + 70 * M, catch_up=H)
    rows = simulate(plan, count=4, now=now)
    assert [r.fire_at for r in rows] == [T0 + 30 * M, T0 + 45 * M, T0 + 60 * M, T0 + 75 * M]
    assert [r.admitted for r in rows] == [False, False, True, False] and rows[2].runs_at == T0 + 70 * M
    assert first_run_at(plan, now=now) == first_run(rows) == T0 + 70 * M


# -- readback over the store ------------------------------------------------------------------------
def test_status_next_fire_uses_the_stored_catch_up(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock, schedule=EVERY_15M)
    clock.set(T0 + 20 * M)  # the 09:15 fire was missed (no host then)
    host_running(store, clock)
    readback = Readback(store, clock)
    assert readback.automation("x").next_fire_at == clock.now()  # the 09:15 fire is due: catch-up
    HostPolicies(store, clock).set(HostPolicy(catch_up=timedelta(0)), expected_revision=0, owner_ref="o")
    assert readback.automation("x").next_fire_at == T0 + 30 * M


def test_the_crontab_readback_fires_what_the_crontab_holds(store, cron_running) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock, schedule=HOURLY_AT_49)
    raw_sql(store, "UPDATE fg_automations SET timer = 'crontab'")
    readback = Readback(store, clock)
    unapplied = readback.automation("x")
    assert unapplied.next_fire_at is None and "nothing armed" in unapplied.detail
    from floorgate.admission import TimerBindings

    TimerBindings(store).set_desired("x", "crontab", Schedule.parse(HOURLY_AT_49).canonical(), False, None, clock.now())
    rb = readback.automation("x")
    assert rb.next_fire_at == T0 + 49 * M  # :49, the line cron holds
    assert [r.fire_at.minute for r in rb.fires(3, clock.now())] == [49, 49, 49]


def test_a_crontab_line_with_no_cron_daemon_fires_nothing_and_says_so(store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from floorgate.admission import TimerBindings
    from floorgate.hosts.crontab import CrontabHost

    # Whether a daemon runs is the machine's (tested on its own below); here: none runs.
    monkeypatch.setattr(CrontabHost, "firing_problem", classmethod(lambda cls: "no cron daemon is running on this machine"))
    clock = FixedClock(T0)
    add_automation(store, clock, schedule=HOURLY_AT_49)
    raw_sql(store, "UPDATE fg_automations SET timer = 'crontab'")
    TimerBindings(store).set_desired("x", "crontab", Schedule.parse(HOURLY_AT_49).canonical(), False, None, clock.now())
    rb = Readback(store, clock).automation("x")
    assert rb.next_fire_at is None and rb.no_timer_host and "no cron daemon" in rb.detail


@pytest.mark.parametrize(
    "names, running",
    [
        pytest.param(["bash", "sleep"], False, id="none"),
        pytest.param(["bash", "cron"], True, id="debian-cron"),
        pytest.param(["crond"], True, id="cronie-crond"),
        pytest.param(["cronjob"], False, id="only-a-similar-name"),
    ],
)
def test_the_cron_daemon_is_found_by_process_name(tmp_path, names, running) -> None:  # type: ignore[no-untyped-def]
    from floorgate.hosts.crontab import cron_daemon_running

    for pid, name in enumerate(names, start=1):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "comm").write_text(name + "\n")
    (tmp_path / "self").mkdir()  # not a process directory
    assert cron_daemon_running(tmp_path) is running


def test_paused_and_held_automations_fire_nothing_and_say_why(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock, "p", schedule=EVERY_15M)
    add_automation(store, clock, "h", schedule=EVERY_15M)
    repo = Automations(store, clock)
    repo.set_state("p", AutomationState.PAUSED, "holiday")
    repo.set_state("h", AutomationState.HELD, "mission mis-1 is stuck", HoldKind.MISSION_STUCK)
    app = Floorgate(store, clock=clock, settings=Settings())
    paused, held = app.readback.automation("p"), app.readback.automation("h")
    assert (paused.state, paused.next_fire_at, paused.hold) == (ReadbackState.PAUSED, None, None)
    assert (held.state, held.next_fire_at, held.hold) == (ReadbackState.HELD, None, HoldKind.MISSION_STUCK)
    preview = app.automations.preview("h", count=3)
    assert preview.rows == [] and preview.blocked is not None and "stuck" in preview.blocked


def test_a_hold_names_its_kind_in_a_column(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock)
    repo = Automations(store, clock)
    with pytest.raises(ValueError, match="hold_kind"):
        repo.set_state("x", AutomationState.HELD, "why")
    assert repo.set_state("x", AutomationState.HELD, "why", HoldKind.TIMER).hold_kind is HoldKind.TIMER
    assert repo.set_state("x", AutomationState.ACTIVE, None).hold_kind is None


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE fg_automations SET host_spec = '{not json' WHERE automation_id = 'bad'",
        "UPDATE fg_automations SET state = 'sleeping' WHERE automation_id = 'bad'",
        "UPDATE fg_automations SET schedule = 'DTSTART:20261201T090000Z RRULE:FREQ=DAILY;BYSECOND=60' WHERE automation_id = 'bad'",
        "INSERT INTO fg_wake_state (automation_id, backoff_step, backoff_wake_us, updated_at_us) VALUES ('bad', -5, 1, 1)",
    ],
    ids=["host-json", "state", "schedule-bysecond-60", "wake-state"],
)
def test_one_unreadable_automation_is_held_and_hides_nothing(store, damage: str) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock, "bad", schedule=EVERY_15M)
    add_automation(store, clock, "good", schedule=EVERY_15M)
    host_running(store, clock)
    raw_sql(store, damage)
    listed = {rb.automation_id: rb for rb in Readback(store, clock).many()}
    assert set(listed) == {"bad", "good"}
    assert listed["bad"].state is ReadbackState.HELD and listed["bad"].unreadable and listed["bad"].hold is None
    assert listed["bad"].next_fire_at is None and "unreadable" in listed["bad"].detail
    assert listed["good"].state is ReadbackState.ELIGIBLE and listed["good"].next_fire_at is not None


def test_host_policy_is_compare_and_set(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    policies = HostPolicies(store, clock)
    assert policies.get().revision == 0 and policies.get().policy == HostPolicy()
    stored = policies.set(HostPolicy(catch_up=2 * H), expected_revision=0, owner_ref="alice")
    assert (stored.revision, stored.policy.catch_up, stored.owner_ref) == (1, 2 * H, "alice")
    with pytest.raises(RevisionConflict) as conflict:
        policies.set(HostPolicy(), expected_revision=0, owner_ref="bob")
    assert conflict.value.current_revision == 1 and policies.get().policy.catch_up == 2 * H
    raw_sql(store, 'UPDATE fg_settings SET value_json = \'{"catch_up": "soon"}\'')
    from floorgate.admission import StoreUnavailable

    with pytest.raises(StoreUnavailable, match="host policy"):
        policies.get()


def test_remove_takes_the_wake_state_and_binding_in_one_commit(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock)
    app = Floorgate(store, clock=clock, settings=Settings())
    app.automations.trigger("x")
    from floorgate.admission import TimerBindings

    TimerBindings(store).set_desired("x", "apscheduler", Schedule.parse(EVERY_15M).canonical(), False, None, clock.now())
    app.automations.remove("x")
    for table in ("fg_automations", "fg_wake_state", "fg_timer_bindings", "fg_triggers"):
        assert raw_sql(store, f"SELECT COUNT(*) FROM {table}") == [(0,)], table


def test_trigger_reports_the_wake_the_host_will_make(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0 + M)
    floor(store, clock, "g/a", 10 * M)
    add_automation(store, clock, schedule="DTSTART:20261201T090000Z RRULE:FREQ=DAILY")
    TickLog(store).append([Tick(automation_id="x", nominal_at=T0, actual_at=T0, decision="admitted", reason="succeeded", host="h")])
    from floorgate.admission import Admission

    assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    host_running(store, clock)
    triggered = Floorgate(store, clock=clock, settings=Settings()).automations.trigger("x")
    assert triggered.wake is not None and triggered.wake.due == clock.now()  # no debounce: due at once
    assert triggered.wake.wake_at == clock.now() + 10 * M  # but never before the floor
    assert triggered.readback.next_fire_at == clock.now() + 10 * M  # status says the same


def test_settings_resolve_flags_over_environment() -> None:
    env = {"FLOORGATE_STATE_DIR": "/from/env", "FLOORGATE_ENVELOPE_MODE": "observe"}
    s = Settings.resolve(env, state_dir="/from/flag", envelope_mode=None, db=None)
    assert str(s.state_dir) == "/from/flag" and s.envelope_mode == "observe" and s.db is None
    assert str(Settings.resolve({}).state_dir) == "floorgate-state"


def test_a_running_host_replans_when_the_host_policy_changes(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from floorgate.scheduler.runtime.host import RuntimeConfig

    clock = FixedClock(T0)
    add_automation(store, clock, schedule=EVERY_15M)
    clock.set(T0 + 20 * M)  # the 09:15 fire was missed (no host then)
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    host.heartbeat.beat()
    host.sync()
    assert host.scheduler.get_job("x").next_run_time == T0 + 15 * M  # the 09:15 fire is due: it fires at once
    HostPolicies(store, clock).set(HostPolicy(catch_up=timedelta(0)), expected_revision=0, owner_ref="o")
    host.sync()
    assert host.scheduler.get_job("x").next_run_time == T0 + 30 * M  # no catch-up now, as the readback says
    assert Readback(store, clock).automation("x").next_fire_at == T0 + 30 * M


def test_run_refuses_a_flag_that_differs_from_the_stored_host_policy(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cli import run_cli

    db = str(tmp_path / "fg.db")
    assert run_cli("init", db=db).returncode == 0  # a host never creates its store
    result = run_cli("run", "--catch-up", "2h", db=db)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--catch-up" in lines[0] and "floorgate settings set --catch-up 2h --revision 0" in lines[0]


def test_an_unreadable_turn_holds_its_automation_in_the_readback(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    add_automation(store, clock, "bad", schedule=EVERY_15M)
    add_automation(store, clock, "good", schedule=EVERY_15M)
    raw_sql(
        store,
        "INSERT INTO fg_turns (turn_id, automation_id, goal_id, agent_id, attempt, kind, runner_host, runner_pid, "
        "started_at_us, deadline_us, phase) VALUES ('t-bad', 'bad', 'g', 'a', 1, 'automatic', 'h:1', 1, 0, 0, 'bogus')",
    )
    listed = {rb.automation_id: rb for rb in Readback(store, clock).many()}
    assert listed["bad"].state is ReadbackState.HELD and "t-bad" in listed["bad"].detail
    assert listed["good"].state is ReadbackState.ELIGIBLE


def test_a_malformed_stored_time_is_corrupt_state_and_holds_only_its_automation(store) -> None:  # type: ignore[no-untyped-def]
    from floorgate.admission import TimerBindings
    from floorgate.admission.errors import CorruptState

    clock = FixedClock(T0)
    add_automation(store, clock, "bad", schedule=EVERY_15M)
    add_automation(store, clock, "good", schedule=EVERY_15M)
    for aid in ("bad", "good"):
        TimerBindings(store).set_desired(aid, "apscheduler", Schedule.parse(EVERY_15M).canonical(), False, None, clock.now())
    raw_sql(store, "UPDATE fg_timer_bindings SET observed_at_us = 9000000000000000000 WHERE automation_id = 'bad'")
    with pytest.raises(CorruptState, match="malformed"):
        TimerBindings(store).get("bad")
    assert set(TimerBindings(store).all()) == {"good"}  # one damaged row hides no other
    listed = {rb.automation_id: rb for rb in Readback(store, clock).many()}
    assert listed["bad"].state is ReadbackState.HELD and listed["bad"].unreadable and listed["bad"].hold is None
    assert listed["good"].state is ReadbackState.ELIGIBLE


@pytest.mark.parametrize(
    ("schedule", "held"),
    [
        ("DTSTART:20261201T090500Z RRULE:FREQ=MINUTELY;INTERVAL=15", False),
        ("DTSTART:20261201T090500Z RRULE:FREQ=MINUTELY;INTERVAL=90", True),
    ],
    ids=["raised-to-hourly", "held"],
)
def test_previewing_an_unsaved_crontab_schedule_shows_what_add_would_arm(store, schedule: str, held: bool) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    floor(store, clock, "g/a", H)
    app = Floorgate(store, clock=clock, settings=Settings())
    preview = app.automations.preview_new("q", goal="g", agent="a", schedule=schedule, timer="crontab", count=3)
    if held:
        assert preview.rows == [] and preview.blocked is not None and "held" in preview.blocked
    else:
        assert [r.fire_at.minute for r in preview.rows] == [5, 5, 5] and all(r.admitted for r in preview.rows)
        assert preview.schedule is not None and "FREQ=HOURLY" in preview.schedule.canonical()


@pytest.mark.parametrize(
    ("argv", "code", "kind"),
    [
        (["automation", "pause", "nope", "--json"], 2, "not_found"),
        (["status", "--bogus", "--json"], 2, "usage"),
        (["settings", "set", "--catch-up", "banana", "--revision", "0", "--owner-ref", "o", "--json"], 2, "invalid_input"),
    ],
    ids=["not-found", "usage", "invalid-input"],
)
def test_json_errors_are_one_json_document_too(tmp_path, argv: list[str], code: int, kind: str) -> None:  # type: ignore[no-untyped-def]
    import json

    from cli import run_cli

    assert run_cli("init", db=str(tmp_path / "fg.db")).returncode == 0  # a store without the automation
    result = run_cli(*argv, db=str(tmp_path / "fg.db"))
    assert result.returncode == code and len(result.stderr.strip().splitlines()) == 1
    assert json.loads(result.stdout)["error"]["kind"] == kind


def test_automation_list_shows_an_unreadable_row(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from cli import run_cli

    clock = FixedClock(T0)
    add_automation(store, clock, "bad")
    add_automation(store, clock, "good")
    raw_sql(store, "UPDATE fg_automations SET host_spec = '{nope' WHERE automation_id = 'bad'")
    result = run_cli("automation", "list", db=store.url)
    assert result.returncode == 0 and "unreadable" in result.stdout and "good" in result.stdout


def test_the_bulk_readback_of_many_equals_each_automations_own(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``status`` reads each table once for all automations; what it shows must be exactly what
    each automation's own readback shows (turns, missions, wake state, ticks, a damaged row)."""
    from floorgate.scheduler.runtime.executor import TurnExecutor

    clock = FixedClock(T0 + 20 * M)
    floor(store, clock, "g/a", 10 * M)
    for name in ("ran", "never", "damaged", "poked", "badturn"):
        add_automation(store, clock, name, schedule=EVERY_15M)
    host_running(store, clock)
    TurnExecutor(store, state_dir=tmp_path / "s", clock=clock).run(Automations(store, clock).get("ran"))
    TickLog(store).append([Tick(automation_id="ran", nominal_at=T0, actual_at=T0, decision="admitted", reason="succeeded", host="h")])
    Floorgate(store, clock=clock, settings=Settings()).automations.trigger("poked")
    raw_sql(store, "INSERT INTO fg_wake_state (automation_id, backoff_step, backoff_wake_us, updated_at_us) "
            "VALUES ('damaged', 1, -5, 0)")  # fmt: skip
    raw_sql(
        store,
        "INSERT INTO fg_turns (turn_id, automation_id, goal_id, agent_id, attempt, kind, runner_host, runner_pid, "
        "started_at_us, deadline_us, phase, status) VALUES ('t-bad', 'badturn', 'g', 'a', 1, 'automatic', 'h:1', 1, 0, 0, "
        "'settled', 'bogus')",  # a settled turn: only the latest-turn read meets it
    )
    readback = Readback(store, clock)
    many = {rb.automation_id: rb for rb in readback.many()}
    assert set(many) == {"ran", "never", "damaged", "poked", "badturn"}
    for name, rb in many.items():
        assert rb == readback.automation(name), name
    assert many["damaged"].unreadable and many["ran"].last_turn is not None


def test_status_tables_show_times_in_the_schedules_zone_and_how_far_away_while_json_stays_utc(store) -> None:
    from floorgate.admission import Admission
    from floorgate.scheduler.views.present import readback_doc
    from floorgate.scheduler.views.present_status import status_text

    start = T0 - 150 * M + timedelta(microseconds=250_000)  # 06:30:00.25Z
    clock = FixedClock(start)
    floor(store, clock, "g/a", H)
    add_automation(store, clock, "x", schedule="DTSTART;TZID=Europe/Berlin:20261201T090000 RRULE:FREQ=DAILY")
    gate = Admission(store, clock)
    assert gate.reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=start).admitted
    gate.confirm("t-1")
    floor(store, clock, "g/b", H)  # a floored lane no automation stands for: UTC, it has no schedule
    assert gate.reserve(goal="g", agent="b", automation=None, turn_id="t-2", trigger_time=start).admitted
    clock.set(T0 - 2 * H)  # 07:00Z, 08:00 in Berlin
    host_running(store, clock)
    view = Readback(store, clock).overview()
    text = status_text(view)
    # The next fire is 09:00 Berlin; the floor opens at 07:30:00.25Z, shown exactly as JSON has it
    # (rounded up, 07:30:01 differed from the JSON; truncated, it would open a moment early).
    row = next(line for line in text.splitlines() if line.startswith("x "))
    # To the second, rounded up (the floor opens at 07:30:00.25Z: shown as :01, never a moment early).
    assert "2026-12-01 09:00:00 CET, in 60 min" in row and "2026-12-01 08:30:01 CET, in 30 min" in row
    lane = next(line for line in text.splitlines() if line.startswith("g/b "))
    assert "t-2 (automatic) 2026-12-01 06:30:01 UTC, 30 min ago" in lane and "2026-12-01 07:30:01 UTC, in 30 min" in lane
    doc = readback_doc(view.readbacks[0])
    assert doc["next_fire_at"] == "2026-12-01T08:00:00Z" and doc["eligibility"]["next_eligible_at"] == "2026-12-01T07:30:00.250000Z"


def test_every_eligibility_status_is_a_readback_state() -> None:
    """A lane's readback state is its eligibility's status (``ReadbackState(eligibility.status)``):
    each status the table's readback rows may give names a state, so a new one is not a crash there."""
    statuses = set(get_args(EligibilityStatus))
    assert {c.readback.status for c in READBACK if c.readback is not None} <= statuses
    assert statuses <= {s.value for s in ReadbackState}


def test_fires_in_a_fall_back_night_s_repeated_hour_run_on_time() -> None:
    """Europe/Berlin's 2026-10-25 02:00-03:00 happens twice: the fires in it run as they fire, never
    labelled late (Python never calls two aware times of different zones equal in that hour)."""
    from datetime import datetime, timezone

    from floorgate.scheduler.views.present_automation import _fire_run

    schedule = Schedule.parse("DTSTART;TZID=Europe/Berlin:20261024T000000 RRULE:FREQ=MINUTELY;INTERVAL=30")
    now = datetime(2026, 10, 24, 23, 10, tzinfo=timezone.utc)  # 01:10 CEST, an hour before the first 02:00
    for meeting in FloorMeeting:
        plan = PlanInputs(schedule=schedule, meeting=meeting, floor=None, next_eligible_at=None, catch_up=timedelta(0))
        rows = simulate(plan, count=8, now=now)
        assert [r.fire_at.hour for r in rows[:3]] == [1, 2, 2]  # wall-clock fires: 02:00 and 02:30 fall in that hour
        assert [_fire_run(r) for r in rows] == ["yes"] * 8, meeting


@pytest.mark.parametrize(
    ("meeting", "floor_opens", "expected"),
    [
        pytest.param(FloorMeeting.DENY, None, ["failing", "failing", "yes", "yes"], id="denied-failure-wait-binds"),
        pytest.param(FloorMeeting.DENY, 50 * M, [None, None, None, "yes"], id="denied-floor-opens-later"),
        # floorgate's own timer: the 09:30 fire, the last before 09:40, runs then (coalesced)
        pytest.param(FloorMeeting.COALESCE, None, ["failing", "yes", "yes", "yes"], id="coalesced-failure-wait-binds"),
    ],
)
def test_fires_inside_a_failure_streak_s_slowdown_name_it(meeting, floor_opens, expected) -> None:  # type: ignore[no-untyped-def]
    """A fire refused because the streak's slowdown (until 09:40) lasts past it says ``failing``,
    not ``floor`` (raising the floor would not help); where a floor opens later, the floor binds."""
    failing_until = T0 + 40 * M
    opens = max(failing_until, T0 + floor_opens) if floor_opens is not None else failing_until
    plan = PlanInputs(
        schedule=Schedule.parse(EVERY_15M),
        meeting=meeting,
        floor=None,
        next_eligible_at=opens,
        failing_until=failing_until,
        catch_up=timedelta(0),
    )
    rows = simulate(plan, count=4, now=T0 + 7 * M)
    assert ["yes" if r.admitted else r.denied_by for r in rows] == expected


def test_the_early_retry_after_a_failure_is_marked_a_retry() -> None:
    """floorgate's own timer wakes once early after a failure (the backoff's retry): that row is
    not a schedule fire, and says so."""
    from floorgate.scheduler.views.present_automation import _fire_run, fire_doc

    now = T0 + 7 * M
    plan = PlanInputs(
        schedule=Schedule.parse(EVERY_15M),
        meeting=FloorMeeting.COALESCE,
        floor=None,
        next_eligible_at=None,
        wake=WakeState(automation_id="a", backoff_step=1, backoff_wake_at=T0 + 10 * M),
        catch_up=timedelta(0),
    )
    rows = simulate(plan, count=3, now=now)
    assert [(r.fire_at - T0, r.retry) for r in rows] == [(10 * M, True), (15 * M, False), (30 * M, False)]
    assert _fire_run(rows[0]) == "yes (a retry after a failure, not a schedule fire)" and _fire_run(rows[1]) == "yes"
    assert fire_doc(rows[0])["retry"] is True
