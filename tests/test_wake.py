"""The wake planner and the host's tick path on a fake clock: the floor outlives every reset."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from basics import DAY, T0

from floorgate.admission import Admission, AutomationState, Automations, FixedClock, WakeState, WhenDenied
from floorgate.hosts import Schedule
from floorgate.scheduler.app.readback import Readback
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.app.wake import BackoffPolicy, next_wake, nominal_time
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from helpers import add_automation, floor, host_running

DAILY_9 = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY"
EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"


def runtime(store, clock, tmp_path, catch_up=timedelta(hours=1)) -> HostRuntime:  # type: ignore[no-untyped-def]
    """A host over ``store`` whose deployment's host policy has this catch-up window."""
    from floorgate.admission import HostPolicies, HostPolicy

    policies = HostPolicies(store, clock)
    stored = policies.get()
    if stored.policy.catch_up != catch_up:
        policies.set(HostPolicy(catch_up=catch_up), expected_revision=stored.revision, owner_ref="test")
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    host.load_policy()  # what start() does with its first sync
    return host


def test_backoff_doubles_to_its_cap() -> None:
    policy = BackoffPolicy()
    assert [policy.delay(n) for n in (1, 2, 3, 4, 5, 6, 7)] == [timedelta(minutes=m) for m in (3, 6, 12, 24, 48, 60, 60)]


def test_backoff_reset_never_wakes_before_the_floor() -> None:
    schedule = Schedule.parse(EVERY_15M)
    failed_at = T0 + timedelta(minutes=5)
    wake = BackoffPolicy().reset("x", failed_at)
    eligible = T0 + DAY
    chosen = next_wake(
        schedule,
        previous=failed_at,
        now=failed_at,
        wake=wake,
        next_eligible_at=eligible,
        last_ticked=None,
        catch_up=timedelta(hours=1),
        since=None,
    )
    assert chosen == eligible
    without_floor = next_wake(
        schedule,
        previous=failed_at,
        now=failed_at,
        wake=wake,
        next_eligible_at=None,
        last_ticked=None,
        catch_up=timedelta(hours=1),
        since=None,
    )
    assert without_floor == failed_at + timedelta(minutes=3)


@pytest.mark.parametrize(
    ("when_denied", "without_streak"),
    [(WhenDenied.WAIT, T0 + timedelta(minutes=20)), (WhenDenied.SKIP, T0 + timedelta(minutes=30))],
    ids=["wait", "skip"],
)
def test_a_failure_streak_holds_back_the_wake_under_either_when_denied(when_denied: WhenDenied, without_streak: datetime) -> None:
    schedule = Schedule.parse(EVERY_15M)
    until = T0 + timedelta(hours=2)
    streak = WakeState(automation_id="x", failures=2, failed_at=T0, failing_until=until)

    def plan(wake: WakeState) -> datetime | None:
        return next_wake(
            schedule,
            previous=T0,
            now=T0 + timedelta(minutes=5),
            wake=wake,
            next_eligible_at=T0 + timedelta(minutes=20),
            last_ticked=None,
            catch_up=timedelta(hours=1),
            since=None,
            when_denied=when_denied,
        )

    assert plan(WakeState(automation_id="x")) == without_streak
    assert plan(streak) == until


def test_nominal_time_is_shared_by_every_host() -> None:
    schedule = Schedule.parse(EVERY_15M)
    idle = WakeState(automation_id="x")
    assert nominal_time(schedule, idle, T0 + timedelta(minutes=22, seconds=7)) == T0 + timedelta(minutes=15)
    backoff = WakeState(automation_id="x", backoff_step=1, backoff_wake_at=T0 + timedelta(minutes=20))
    assert nominal_time(schedule, backoff, T0 + timedelta(minutes=22)) == T0 + timedelta(minutes=20)


@pytest.mark.parametrize("reset", ["failure", "poke", "restart", "edit-command", "edit-model"])
def test_floor_survives_every_reset(store, tmp_path, reset: str) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", DAY)
    add_automation(store, clock, schedule=EVERY_15M, script="pass")
    host = runtime(store, clock, tmp_path)
    first = host.tick("x")
    assert first.decision == "admitted"
    clock.advance(timedelta(minutes=20))
    automations = Automations(store, clock)
    if reset in ("failure", "poke"):
        automations.save_wake_state(BackoffPolicy().reset("x", clock.now()))
    elif reset == "restart":
        host = runtime(store, clock, tmp_path)
    else:
        current = automations.get("x")
        change = (
            {"host": current.spec.host.model_copy(update={"argv": (*current.spec.host.argv, "--again")})}
            if reset == "edit-command"
            else {"model": "other-model"}
        )
        automations.edit("x", current.spec.model_copy(update=change))
    automation = automations.get("x")
    schedule = Schedule.parse(automation.spec.schedule)
    wake_at = host.plan(automation, schedule, None, clock.now())
    assert wake_at == T0 + DAY  # the next wake waits for the floor, whatever was reset
    clock.advance(timedelta(minutes=3))
    denied = host.tick("x")  # even a tick that fires early anyway is refused by admission
    assert denied.decision == "denied" and denied.reason == "interval_wait"
    assert len(Admission(store, clock).starts()) == 1


def test_three_day_outage_gives_exactly_one_catch_up_start(store, tmp_path) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=20))
    add_automation(store, clock, schedule=DAILY_9)
    host = runtime(store, clock, tmp_path, catch_up=DAY)
    assert host.tick("x").decision == "admitted"
    host.flush()
    clock.set(T0 + 3 * DAY + timedelta(hours=3))  # back after three missed mornings
    host = runtime(store, clock, tmp_path, catch_up=DAY)
    automation = Automations(store, clock).get("x")
    schedule = Schedule.parse(automation.spec.schedule)
    first = host.plan(automation, schedule, None, clock.now())
    assert first == T0 + 3 * DAY  # only the latest missed morning, once
    tick = host.tick("x")
    assert tick.decision == "admitted" and tick.nominal_at == T0 + 3 * DAY
    host.flush()
    again = runtime(store, clock, tmp_path, catch_up=DAY)  # another restart at once: nothing more to catch up
    assert again.plan(automation, schedule, None, clock.now()) == T0 + 4 * DAY
    assert host.plan(automation, schedule, first, clock.now()) == T0 + 4 * DAY
    assert len(Admission(store, clock).starts()) == 2


def test_catch_up_window_bounds_how_old_a_missed_tick_may_be(store, tmp_path) -> None:
    clock = FixedClock(T0 + timedelta(hours=2))
    add_automation(store, clock, schedule=DAILY_9)
    host = runtime(store, clock, tmp_path, catch_up=timedelta(hours=1))
    automation = Automations(store, clock).get("x")
    assert host.plan(automation, Schedule.parse(automation.spec.schedule), None, clock.now()) == T0 + DAY


@pytest.mark.parametrize(
    "change",
    [
        pytest.param("created", id="added-after-the-occurrence"),
        pytest.param("resumed", id="resumed-after-a-paused-occurrence"),
        pytest.param("rescheduled", id="schedule-changed-to-a-past-time"),
    ],
)
def test_catch_up_never_fires_an_occurrence_from_before_the_last_change(store, tmp_path, change: str) -> None:
    # 'automation add past --schedule "daily at 09:00 UTC"' at 09:10:42: the 09:00 fire is not a
    # missed fire (the automation did not exist), nor is one missed while paused or on another schedule.
    late = T0 + timedelta(minutes=10, seconds=42)
    clock = FixedClock(late if change == "created" else T0 - timedelta(hours=2))
    add_automation(store, clock, schedule=DAILY_9 if change != "rescheduled" else "DTSTART:20261201T120000Z RRULE:FREQ=DAILY")
    automations = Automations(store, clock)
    if change == "resumed":
        automations.set_state("x", AutomationState.PAUSED, "holiday")
        clock.set(late)
        automations.set_state("x", AutomationState.ACTIVE, None)
    elif change == "rescheduled":
        clock.set(late)
        current = automations.get("x")
        automations.edit("x", current.spec.model_copy(update={"schedule": Schedule.parse(DAILY_9).canonical()}))
    host = runtime(store, clock, tmp_path, catch_up=timedelta(hours=1))
    automation = automations.get("x")
    schedule = Schedule.parse(automation.spec.schedule)
    assert host.plan(automation, schedule, None, clock.now()) == T0 + DAY  # tomorrow, not at once
    host_running(store, clock)
    readback = Readback(store, clock)
    rb = readback.automation("x")
    assert rb.next_fire_at == T0 + DAY  # status says what the host does
    assert [r.fire_at for r in readback.preview("x", 1).rows] == [T0 + DAY]  # and so does preview


def test_catch_up_still_fires_an_occurrence_missed_after_the_last_change(store, tmp_path) -> None:
    clock = FixedClock(T0 - timedelta(hours=2))
    add_automation(store, clock, schedule=DAILY_9)
    clock.set(T0 + timedelta(minutes=10))  # the host was down at 09:00
    host = runtime(store, clock, tmp_path, catch_up=timedelta(hours=1))
    automation = Automations(store, clock).get("x")
    assert host.plan(automation, Schedule.parse(automation.spec.schedule), None, clock.now()) == T0
    host_running(store, clock)
    assert Readback(store, clock).automation("x").next_fire_at == T0 + timedelta(minutes=10)  # at once


@pytest.mark.parametrize(
    "rule, day, expected_local",
    [
        pytest.param(
            "DTSTART;TZID=America/New_York:20260301T023000 RRULE:FREQ=DAILY",
            datetime(2026, 3, 8),
            ["03:30"],
            id="spring-forward-0230-fires-once-at-0330",
        ),
        pytest.param(
            "DTSTART;TZID=America/New_York:20260301T013000 RRULE:FREQ=DAILY",
            datetime(2026, 11, 1),
            ["01:30"],
            id="fall-back-0130-fires-once",
        ),
        pytest.param("DTSTART;TZID=Europe/Berlin:20260301T023000 RRULE:FREQ=DAILY", datetime(2026, 3, 29), ["03:30"], id="berlin-gap"),
    ],
)
def test_dst_days_fire_once(rule: str, day: datetime, expected_local: list[str]) -> None:
    schedule = Schedule.parse(rule)
    zone = schedule.zone
    start = datetime(day.year, day.month, day.day, tzinfo=zone)
    fires = [f for f in schedule.occurrences(5, after=start - timedelta(seconds=1)) if f.astimezone(zone).date() == day.date()]
    assert [f.astimezone(zone).strftime("%H:%M") for f in fires] == expected_local
    # The planner agrees: walking timer fires across the day yields the same single fire.
    walked, previous = [], start - timedelta(seconds=1)
    while True:
        nxt = next_wake(
            schedule,
            previous=previous,
            now=previous,
            wake=WakeState(automation_id="x"),
            next_eligible_at=None,
            last_ticked=None,
            catch_up=timedelta(0),
            since=None,
        )
        if nxt is None or nxt.astimezone(zone).date() != day.date():
            break
        walked.append(nxt)
        previous = nxt
    assert walked == fires


def test_after_an_admitted_tick_the_timer_is_rearmed_at_the_floor(store, tmp_path) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=3))
    add_automation(store, clock, schedule="DTSTART:20261201T090000Z RRULE:FREQ=HOURLY")
    host = runtime(store, clock, tmp_path)
    host.scheduler.start(paused=True)
    try:
        host.sync()
        assert host.tick("x").decision == "admitted"
        job = host.scheduler.get_job("x")
        assert job.next_run_time == T0 + timedelta(hours=3)  # not the next hourly fire at +1h
    finally:
        host.scheduler.shutdown(wait=False)


def test_a_tick_while_a_turn_runs_is_skipped_and_counted(store, tmp_path) -> None:
    import os
    import socket

    from floorgate.admission import Journal

    clock = FixedClock(T0)
    add_automation(store, clock)
    Journal(store, clock).begin(
        turn_id="running",
        automation_id="x",
        goal_id="g",
        agent_id="a",
        attempt=1,
        kind="automatic",
        manual_reason=None,
        # Another live runner on this machine (the test's parent process stands in for it).
        runner_host=f"{socket.gethostname()}:{os.getppid()}",
        runner_pid=os.getppid(),
        deadline=T0 + DAY,
        log_path=None,
    )
    host = runtime(store, clock, tmp_path)
    tick = host.tick("x")
    assert tick.decision == "skipped" and tick.reason == "overlap"
    assert Admission(store, clock).starts() == []


def test_paused_automation_ticks_are_skipped_and_recorded(store, tmp_path) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock)
    Automations(store, clock).set_state("x", "paused", "holiday")
    host = runtime(store, clock, tmp_path)
    tick = host.tick("x")
    assert tick.decision == "skipped" and tick.reason == "paused"
    host.flush()
    from floorgate.admission import TickLog

    assert TickLog(store).counters("x") == {"skipped": {"paused": 1}}


def test_preview_counts_the_floor_in_elapsed_time_across_dst(store) -> None:

    from floorgate.scheduler.app.readback import Readback

    clock = FixedClock(datetime(2027, 3, 25, tzinfo=timezone.utc))
    floor(store, clock, "g/a", timedelta(hours=24))
    schedule = Schedule.parse("DTSTART;TZID=Europe/Berlin:20261101T090000 RRULE:FREQ=DAILY")
    readback = Readback(store, clock)
    # An app's timer asks the hook at each fire: 2027-03-28 09:00 CEST is 23 hours after
    # 2027-03-27 09:00 CET, inside a 24-hour floor, so that fire is denied.
    rows = readback.preview_schedule(goal="g", agent="a", automation_id="x", schedule=schedule, timer="external", count=5).rows
    by_day = {r.fire_at.date().isoformat(): r.admitted for r in rows}
    assert by_day == {"2027-03-25": True, "2027-03-26": True, "2027-03-27": True, "2027-03-28": False, "2027-03-29": True}
    # floorgate's own timer waits for the floor instead: that fire runs an hour late, at 24 h.
    rows = readback.preview_schedule(goal="g", agent="a", automation_id="x", schedule=schedule, timer="apscheduler", count=5).rows
    late = {r.fire_at.date().isoformat(): r.runs_at for r in rows}
    assert all(r.admitted for r in rows)
    assert late["2027-03-28"] == datetime(2027, 3, 28, 8, 0, tzinfo=timezone.utc)  # 10:00 CEST, 24 h after 09:00 CET


# -- the pure trigger and the runtime's fault handling (in-process) -------------------------------

from floorgate.scheduler.runtime._plan import Episode, PlanInputs, Snapshot, WakeTrigger  # noqa: E402

from helpers import CORRUPTIONS, corrupt  # noqa: E402


def snapshot(schedule: str = EVERY_15M, *, floor_at=None, wake=None, last_ticked=None, catch_up=timedelta(hours=1)) -> Snapshot:  # type: ignore[no-untyped-def]
    inputs = PlanInputs(revision=1, wake=wake or WakeState(automation_id="x"), next_eligible_at=floor_at)
    return Snapshot("x", Schedule.parse(schedule), inputs, last_ticked, catch_up, None)


def test_the_trigger_plans_from_its_snapshot_alone() -> None:
    now = T0 + timedelta(minutes=20)
    assert WakeTrigger(snapshot()).get_next_fire_time(None, now) == T0 + timedelta(minutes=15)  # one catch-up fire
    assert WakeTrigger(snapshot(last_ticked=T0 + timedelta(minutes=15))).get_next_fire_time(None, now) == T0 + timedelta(minutes=30)
    assert WakeTrigger(snapshot()).get_next_fire_time(T0 + timedelta(minutes=15), now) == T0 + timedelta(minutes=30)
    floored = WakeTrigger(snapshot(floor_at=T0 + timedelta(minutes=50)))
    assert floored.get_next_fire_time(T0 + timedelta(minutes=15), now) == T0 + timedelta(minutes=50)
    backoff = WakeState(automation_id="x", backoff_step=1, backoff_wake_at=T0 + timedelta(minutes=23))
    assert WakeTrigger(snapshot(wake=backoff)).get_next_fire_time(T0 + timedelta(minutes=15), now) == T0 + timedelta(minutes=23)


class _Exploding:
    def next_after(self, _after):  # type: ignore[no-untyped-def]
        raise OverflowError("date value out of range")

    last_at_or_before = next_after


def test_the_trigger_cannot_raise_into_apschedulers_main_loop() -> None:
    inputs = PlanInputs(revision=1, wake=WakeState(automation_id="x"), next_eligible_at=None)
    trigger = WakeTrigger(Snapshot("x", _Exploding(), inputs, None, timedelta(hours=1), None))  # type: ignore[arg-type]
    assert trigger.get_next_fire_time(T0, T0) is None  # APScheduler drops the job; sync holds it
    assert isinstance(trigger.failure, OverflowError)


def _break(store) -> list[str]:  # type: ignore[no-untyped-def]
    """Make every store access raise, and record that it was attempted."""
    from floorgate.admission import StoreUnavailable

    calls: list[str] = []

    def refuse(name):  # type: ignore[no-untyped-def]
        def call(*_a, **_k):  # type: ignore[no-untyped-def]
            calls.append(name)
            raise StoreUnavailable(f"store down ({name})")

        return call

    for name in ("read", "write", "driver"):
        setattr(store, name, refuse(name))
    return calls


def test_an_armed_trigger_never_reads_the_store(store, tmp_path) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=3))
    add_automation(store, clock, schedule="DTSTART:20261201T090000Z RRULE:FREQ=HOURLY")
    host = runtime(store, clock, tmp_path)
    host.sync()
    assert host.tick("x").decision == "admitted"  # the floor now counts from T0
    job = host.scheduler.get_job("x")
    calls = _break(store)
    assert job.trigger.get_next_fire_time(None, T0 + timedelta(minutes=1)) == T0 + timedelta(hours=3)
    assert job.trigger.get_next_fire_time(T0 + timedelta(hours=3), T0 + timedelta(hours=3)) == T0 + timedelta(hours=4)
    assert calls == []


def test_a_tick_that_cannot_read_the_store_records_an_error_and_stays_armed(store, tmp_path) -> None:
    import time

    add_automation(store, FixedClock(T0), schedule="every 1s")
    host = Floorgate(store).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))
    host.sync()
    _break(store)
    host.scheduler.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sum(t.decision == "error" for t in host.records.buffered()) < 3:
            time.sleep(0.05)
        assert host.scheduler.get_job("x") is not None
    finally:
        host.scheduler.shutdown(wait=True)
    errors = [t for t in host.records.buffered() if t.decision == "error"]
    assert len(errors) >= 3, host.records.buffered()  # fire after fire: the timer stayed armed


def test_store_failures_are_logged_once_per_episode(caplog) -> None:
    import logging

    from floorgate.admission import StoreUnavailable

    episode = Episode("sync with the store", logging.getLogger("floorgate.test"))
    with caplog.at_level(logging.INFO, logger="floorgate.test"):
        for _ in range(3):
            episode.failed(StoreUnavailable("connection terminated"))
        episode.ok()
        episode.ok()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "connection terminated" in lines[0]
    assert lines[1] == "sync with the store recovered after 3 failures"


@pytest.mark.parametrize("direction", ["lower", "raise"])
def test_sync_replans_when_the_floor_changes(store, tmp_path, direction: str) -> None:
    from floorgate.admission import Policies, Scope

    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    add_automation(store, clock, schedule=EVERY_15M)
    host = runtime(store, clock, tmp_path)
    host.sync()
    assert host.tick("x").decision == "admitted"
    assert host.scheduler.get_job("x").next_run_time == T0 + timedelta(hours=1)
    after = timedelta(minutes=1) if direction == "lower" else timedelta(hours=5)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=after, expected_revision=1, owner_ref="owner", allow_reduction=True)
    host.sync()
    expected = T0 + timedelta(minutes=15) if direction == "lower" else T0 + timedelta(hours=5)
    assert host.scheduler.get_job("x").next_run_time == expected


def test_sync_replans_when_another_host_starts_the_lane(store, tmp_path) -> None:
    from floorgate.admission import Admission

    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    add_automation(store, clock, schedule=EVERY_15M)
    host = runtime(store, clock, tmp_path)
    clock.advance(timedelta(minutes=20))
    host.sync()
    assert host.scheduler.get_job("x").next_run_time == T0 + timedelta(minutes=15)  # the catch-up fire
    Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="elsewhere", trigger_time=T0 + timedelta(minutes=15))
    host.sync()
    assert host.scheduler.get_job("x").next_run_time == T0 + timedelta(minutes=80)


@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_one_bad_row_holds_only_its_automation(store, tmp_path, kind: str) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock, automation_id="good", schedule=EVERY_15M)
    add_automation(store, clock, automation_id="bad", schedule=EVERY_15M, agent="b")
    floor(store, clock, "g/b", timedelta(hours=1))
    corrupt(store, kind, "bad")
    host = runtime(store, clock, tmp_path)
    host.sync()
    holds = host.holds()
    assert list(holds) == ["bad"], holds
    assert "'bad'" in holds["bad"] or "g/b/bad" in holds["bad"], holds
    assert host.scheduler.get_job("bad") is None
    assert host.scheduler.get_job("good") is not None
    host.sync()  # stays held, without a second log line or a re-arm
    assert host.holds() == holds and host.scheduler.get_job("bad") is None


def test_a_held_automation_is_armed_again_once_its_row_reads(store, tmp_path) -> None:
    from basics import raw_sql

    clock = FixedClock(T0)
    add_automation(store, clock, automation_id="bad", schedule=EVERY_15M)
    corrupt(store, "wake", "bad")
    host = runtime(store, clock, tmp_path)
    host.sync()
    assert "wake state" in host.holds()["bad"]
    raw_sql(store, "DELETE FROM fg_wake_state WHERE automation_id = 'bad'")
    host.sync()
    assert host.holds() == {}
    assert host.scheduler.get_job("bad") is not None


def test_a_turn_this_host_abandoned_after_a_store_error_is_settled_not_an_overlap_forever(store, tmp_path) -> None:
    from floorgate.admission import Journal

    clock = FixedClock(T0)
    add_automation(store, clock, schedule=EVERY_15M)
    host = runtime(store, clock, tmp_path)
    # What an executor leaves behind when the store fails before its settlement is written.
    Journal(store, clock).begin(
        turn_id="lost",
        automation_id="x",
        goal_id="g",
        agent_id="a",
        attempt=1,
        kind="automatic",
        manual_reason=None,
        runner_host=host.host,
        runner_pid=0,
        deadline=T0 + DAY,
        log_path=None,
        owner_id=host.executor.owner,  # this host's executor holds the claim (its lease runs on)
        lease_expires=T0 + DAY,
    )
    tick = host.tick("x")
    assert tick.decision == "admitted", tick
    lost = Journal(store, clock).get("lost")
    assert lost.verdict is not None and lost.verdict.stop_reason == "unknown_outcome"


def test_a_trigger_that_fails_in_apschedulers_loop_holds_its_automation_and_the_others_keep_firing(store, tmp_path) -> None:
    import time
    from dataclasses import replace

    for automation_id in ("x", "y"):
        add_automation(store, FixedClock(T0), automation_id=automation_id, schedule="every 1s")
    host = Floorgate(store).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))
    host.ticking.tick = lambda automation_id: host.records.record(automation_id, T0, T0, "skipped", "test")  # type: ignore[method-assign]
    host.sync()
    trigger = host.scheduler.get_job("x").trigger
    trigger.snapshot = replace(trigger.snapshot, schedule=_Exploding())  # its next plan raises inside APScheduler
    host.scheduler.start()
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and sum(t.automation_id == "y" for t in host.records.buffered()) < 3:
            time.sleep(0.05)
        assert sum(t.automation_id == "y" for t in host.records.buffered()) >= 3  # APScheduler's loop is alive
        assert host.scheduler.get_job("x") is None  # the failing trigger's job was dropped, not raised
        host.sync()
        assert "cannot be computed" in host.holds()["x"] and "date value out of range" in host.holds()["x"]
        assert host.scheduler.get_job("y") is not None
    finally:
        host.scheduler.shutdown(wait=True)


def test_a_fire_apscheduler_drops_as_missed_is_recorded_as_a_skipped_tick(store, tmp_path) -> None:
    from apscheduler.events import EVENT_JOB_MISSED, JobExecutionEvent

    from floorgate.admission import TickLog

    clock = FixedClock(T0 + timedelta(hours=3))
    add_automation(store, clock)
    host = runtime(store, clock, tmp_path)
    # What APScheduler's executor dispatches when a fire waited longer than the misfire grace.
    host.scheduler._dispatch_event(JobExecutionEvent(EVENT_JOB_MISSED, "x", "default", T0 + timedelta(hours=1)))
    host.flush()
    (tick,) = TickLog(store).recent("x")
    assert (tick.decision, tick.reason, tick.nominal_at) == ("skipped", "missed", T0 + timedelta(hours=1))


# Arming at host start: a grid of floors, backoffs and catch-up states, against the plain reading
# of next_wake's rule (walked over the schedule's occurrences one by one), and a count of queries.
_ARM_NOW = T0 + timedelta(minutes=20)  # the fire at T0 + 15m was missed
_ARM_EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
_ARM_DAILY = "DTSTART:20261130T093000Z RRULE:FREQ=DAILY"
ARM_CASES = [
    (f"{sk}-eligible-{ek}-{bk}-{tk}", sk, ek, bk, tk)
    for sk in ("15m", "daily")
    for ek in ("none", "elapsed", "in-5m", "in-20h", "in-30h")
    for bk in ("no-backoff", "backoff-in-2m", "backoff-in-25h")
    for tk in ("missed", "ticked")
]


def _plain_next_wake(schedule: Schedule, eligible, backoff, ticked, catch_up):  # type: ignore[no-untyped-def]
    walk = schedule.occurrences(400, after=_ARM_NOW - timedelta(days=2))
    due = [o for o in walk if _ARM_NOW - catch_up <= o <= _ARM_NOW and (ticked is None or o > ticked)]
    after = [o for o in walk if o > _ARM_NOW]
    candidates = ([due[-1]] if due else after[:1]) + ([backoff] if backoff is not None else [])
    if not candidates:
        return None
    wake = min(candidates)
    return eligible if eligible is not None and wake < eligible else wake


@pytest.mark.parametrize("case", ARM_CASES, ids=[c[0] for c in ARM_CASES])
def test_arming_equals_the_plain_rule_and_skips_the_catch_up_search_inside_the_floor(case, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _, schedule_key, eligible_key, backoff_key, ticked_key = case
    schedule = Schedule.parse(_ARM_EVERY_15M if schedule_key == "15m" else _ARM_DAILY)
    offsets = {"none": None, "elapsed": -timedelta(minutes=1), "in-5m": timedelta(minutes=5), "in-20h": timedelta(hours=20)}
    offsets["in-30h"] = timedelta(hours=30)
    eligible = _ARM_NOW + offsets[eligible_key] if offsets[eligible_key] is not None else None
    backoff = {"no-backoff": None, "backoff-in-2m": timedelta(minutes=2), "backoff-in-25h": timedelta(hours=25)}[backoff_key]
    wake = (
        WakeState(automation_id="x", backoff_step=1, backoff_wake_at=_ARM_NOW + backoff)
        if backoff is not None
        else WakeState(automation_id="x")
    )
    ticked = _ARM_NOW if ticked_key == "ticked" else None
    searches: list[datetime] = []
    original = Schedule.last_at_or_before
    monkeypatch.setattr(Schedule, "last_at_or_before", lambda self, at: searches.append(at) or original(self, at))
    got = next_wake(
        schedule,
        previous=None,
        now=_ARM_NOW,
        wake=wake,
        next_eligible_at=eligible,
        last_ticked=ticked,
        catch_up=timedelta(hours=1),
        since=None,
    )
    backoff_at = wake.backoff_wake_at
    assert got == _plain_next_wake(schedule, eligible, backoff_at, ticked, timedelta(hours=1))
    soonest = min(t for t in (schedule.next_after(_ARM_NOW), backoff_at) if t is not None)
    if eligible is not None and eligible > _ARM_NOW and soonest <= eligible:
        assert searches == []  # the floor has not elapsed and a fire comes before it opens
