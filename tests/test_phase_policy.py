"""Phase policy on a fake clock: after a manual start off the schedule's time, ``wait`` drifts back
to the time of day under a floor a little shorter than the period, and ``skip`` keeps it under a
floor equal to the period (one fire skipped). The host's planner (wake.py, through a real runtime
over the store) and ``automation preview`` (preview.py) agree fire by fire."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from test_wake import runtime

from floorgate.admission import Admission, Automations, FixedClock, WhenDenied
from floorgate.hosts import Schedule
from floorgate.scheduler.app.readback import Readback

from helpers import add_automation, floor

DAY0_NOON = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)
DAILY_9 = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY"


def _at(day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 12, 1 + day, hour, minute, tzinfo=timezone.utc)


def _set_policy(store, clock, when_denied: WhenDenied) -> None:  # type: ignore[no-untyped-def]
    automations = Automations(store, clock)
    current = automations.get("x")
    automations.edit("x", current.spec.model_copy(update={"when_denied": when_denied}))


def _lane(store, tmp_path, interval: timedelta, when_denied: WhenDenied, days: int):  # type: ignore[no-untyped-def]
    """Run the host's own timer for ``days`` days after a manual start at noon: (what preview
    said at noon, the times the host's turns started)."""
    clock = FixedClock(DAY0_NOON - timedelta(hours=4))
    floor(store, clock, "g/a", interval)
    add_automation(store, clock, schedule=DAILY_9, script="pass")
    _set_policy(store, clock, when_denied)
    host = runtime(store, clock, tmp_path, catch_up=timedelta(0))
    clock.set(DAY0_NOON)
    automation = Automations(store, clock).get("x")
    manual = host.executor.run(automation, manual_reason="by hand at noon")
    assert manual.verdict.status == "succeeded"
    previewed = [r.runs_at for r in Readback(store, clock).preview("x", 8).rows if r.admitted]
    schedule = Schedule.parse(automation.spec.schedule)
    previous = None
    end = DAY0_NOON + timedelta(days=days)
    while True:
        automation = Automations(store, clock).get("x")
        wake_at = host.plan(automation, schedule, previous, clock.now())
        assert wake_at is not None
        if wake_at > end:
            break
        clock.set(wake_at)
        assert host.tick("x").decision == "admitted"  # the timer never fires into a denial
        previous = wake_at
    started = [s.anchor_at for s in Admission(store, clock).starts() if s.manual_reason is None]
    return previewed, sorted(started)


def test_wait_under_a_floor_shorter_than_the_period_is_back_at_nine_within_three_days(store, tmp_path) -> None:
    previewed, started = _lane(store, tmp_path, timedelta(hours=23), WhenDenied.WAIT, days=5)
    assert started == [_at(1, 11), _at(2, 10), _at(3, 9), _at(4, 9), _at(5, 9)]
    assert previewed[: len(started)] == started


def test_skip_under_a_floor_equal_to_the_period_keeps_nine_and_skips_one_day(store, tmp_path) -> None:
    previewed, started = _lane(store, tmp_path, timedelta(hours=24), WhenDenied.SKIP, days=5)
    assert started == [_at(2, 9), _at(3, 9), _at(4, 9), _at(5, 9)]  # day 1's 09:00 is skipped
    assert previewed[: len(started)] == started


def test_wait_under_a_floor_equal_to_the_period_runs_at_noon_for_good(store, tmp_path) -> None:
    """The defect the phase policy answers: 'wait' under a floor equal to the period never returns."""
    _, started = _lane(store, tmp_path, timedelta(hours=24), WhenDenied.WAIT, days=4)
    assert started == [_at(1, 12), _at(2, 12), _at(3, 12), _at(4, 12)]


@pytest.mark.parametrize("when_denied", list(WhenDenied), ids=lambda w: w.value)
def test_the_policy_is_stored_and_read_back(store, when_denied: WhenDenied) -> None:
    clock = FixedClock(DAY0_NOON)
    add_automation(store, clock, schedule=DAILY_9)
    _set_policy(store, clock, when_denied)
    assert Automations(store, clock).get("x").spec.when_denied is when_denied


# -- the CLI: the option, the save warning, the off-phase readback --------------------------------


def _cli_lane(db: str, floor_text: str, *options: str):  # type: ignore[no-untyped-def]
    import sys

    from test_cli import cli

    assert cli("policy", "set", "g/a", "--min-interval", floor_text, "--revision", "0", "--owner-ref", "o", db=db).returncode == 0
    return cli(
        "automation", "add", "nightly", "--goal", "g", "--agent", "a", "--schedule", "daily at 23:40 UTC", *options,
        "--", sys.executable, "-c", "pass", db=db,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("floor_text", "options", "warned"),
    [
        ("24h", (), True),
        ("25h", ("--when-denied", "wait"), True),
        ("23h", (), False),
        ("24h", ("--when-denied", "skip"), False),
    ],
    ids=["floor-equals-period", "floor-above-period", "floor-a-little-shorter", "skip"],
)
def test_saving_warns_in_one_line_when_the_floor_would_move_the_time_of_day(sqlite_db: str, floor_text, options, warned) -> None:  # type: ignore[no-untyped-def]
    added = _cli_lane(sqlite_db, floor_text, *options)
    assert added.returncode == 0, added.stderr
    warnings = [line for line in added.stderr.splitlines() if "time of day" in line]
    if warned:
        assert len(warnings) == 1 and "e.g. 23h" in warnings[0] and "--when-denied skip" in warnings[0]
    else:
        assert warnings == []


@pytest.mark.parametrize("bad", ["sometimes", "", "WAIT"])
def test_a_bad_when_denied_is_one_line_exit_2_and_nothing_saved(sqlite_db: str, bad: str) -> None:
    from test_cli import cli, one_line_error

    added = _cli_lane(sqlite_db, "1h", "--when-denied", bad)
    assert added.returncode == 2 and "--when-denied" in one_line_error(added)
    assert cli("automation", "show", "nightly", db=sqlite_db).returncode == 2  # nothing half written


def test_status_and_preview_say_since_which_start_a_lane_runs_off_its_phase(sqlite_db: str) -> None:
    import json

    from test_cli import cli

    assert _cli_lane(sqlite_db, "24h").returncode == 0
    ran = cli("turn", "run", "nightly", "--manual-reason", "by hand", "--json", db=sqlite_db)
    assert ran.returncode == 0, ran.stderr
    preview = json.loads(cli("automation", "preview", "nightly", "--json", db=sqlite_db).stdout)
    detail = json.loads(cli("status", "--json", db=sqlite_db).stdout)["automations"][0]["detail"]
    for said in (preview["off_phase"], detail):
        assert " UTC instead of 23:40 since the manual start of " in said
    assert cli("automation", "edit", "nightly", "--when-denied", "skip", db=sqlite_db).returncode == 0
    preview = json.loads(cli("automation", "preview", "nightly", "--json", db=sqlite_db).stdout)
    assert preview["off_phase"] is None and [f["admitted"] for f in preview["fires"][:2]] == [False, True]


def test_preview_of_an_unsaved_schedule_takes_the_phase_policy(sqlite_db: str) -> None:
    import json

    from test_cli import cli, one_line_error

    assert _cli_lane(sqlite_db, "24h").returncode == 0
    assert cli("turn", "run", "nightly", "--manual-reason", "by hand", db=sqlite_db).returncode == 0  # the agent's floor runs

    def runs(*options: str) -> list[bool]:
        r = cli(
            "automation", "preview", "other", "--goal", "g", "--agent", "a", "--schedule", "daily at 23:40 UTC", *options,
            "--next", "2", "--json", db=sqlite_db,
        )  # fmt: skip
        assert r.returncode == 0, r.stderr
        return [f["waited_for_floor"] for f in json.loads(r.stdout)["fires"] if f["admitted"]]

    assert runs() == [True, True]  # wait: every run at the floor's end, off the 23:40 phase
    assert runs("--when-denied", "skip") == [False]  # skip: one fire skipped, the next at 23:40
    saved = cli("automation", "preview", "nightly", "--when-denied", "skip", db=sqlite_db)
    assert saved.returncode == 2 and "--when-denied" in one_line_error(saved)


@pytest.mark.parametrize(
    ("read_at", "runs"),
    [(_at(2, 13), "2026-12-04 12:00 UTC"), (_at(3, 0, 30), "12:00 UTC")],
    ids=["next-run-tomorrow-dated", "next-run-today-bare"],
)
def test_the_readback_names_the_start_that_moved_the_phase_not_its_latest_consequence(store, tmp_path, read_at, runs) -> None:  # type: ignore[no-untyped-def]
    _, started = _lane(store, tmp_path, timedelta(hours=24), WhenDenied.WAIT, days=2)
    assert started == [_at(1, 12), _at(2, 12)]  # automatic, each waiting for the floor the manual start set
    readback = Readback(store, FixedClock(read_at))
    moved = f"runs at {runs} instead of 09:00 since the manual start of 2026-12-01T12:00:00Z"
    assert moved in readback.automation("x").detail
    assert readback.preview("x", 3).off_phase == moved


def test_the_run_off_phase_is_shown_rounded_up_to_the_second(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(DAY0_NOON - timedelta(hours=4))
    floor(store, clock, "g/a", timedelta(hours=24))
    add_automation(store, clock, schedule=DAILY_9)
    manual = DAY0_NOON + timedelta(microseconds=250_000)
    clock.set(manual)
    assert (
        Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="m", trigger_time=manual, manual_reason="r").admitted
    )
    clock.set(_at(0, 13))
    detail = Readback(store, clock).automation("x").detail
    assert "runs at 2026-12-02 12:00:01 UTC instead of 09:00" in detail, detail  # as next eligible: never early


@pytest.mark.parametrize(
    ("gap", "suggested"),
    [("24h", "23h"), ("23h", "22h"), ("7d", "6d12h"), ("1h", "55m"), ("15m", "14m"), ("1m", "55s"), ("10s", "9s")],
)
def test_the_suggested_floor_is_a_value_an_owner_would_write_and_keeps_the_phase(gap: str, suggested: str) -> None:
    from floorgate.admission.intervals import format_interval, parse_interval
    from floorgate.scheduler.app.phase import phase_keeping_floor

    kept = phase_keeping_floor(parse_interval(gap, "gap"))
    assert kept is not None and format_interval(kept) == suggested and kept < parse_interval(gap, "gap")


@pytest.mark.parametrize(
    ("floor", "gap", "says", "never"),
    [
        ("1d", "1d", ["or set the floor a little shorter (e.g. 23h"], ["fire runs"]),
        ("2m", "1m", ["every 2nd fire runs", "a little under 2 gaps (e.g. 1m55s); to run every fire instead", "(e.g. 55s)"], []),
        ("1d", "1h", ["every 24th fire runs", "a little under 24 gaps (e.g. 23h55m); to run every fire instead"], []),
        ("1h30m", "1h", ["every 2nd fire runs); to run every fire instead"], ["a little under"]),  # skip alone keeps it
        ("2s", "1s", ["every 2nd fire runs"], ["a little under", "instead"]),  # no whole second shorter than one gap or two
    ],
    ids=["one-gap", "two-gaps-exactly", "a-day-of-hourly-fires", "between-gaps", "no-floor-between"],
)
def test_a_floor_over_several_gaps_is_first_told_how_to_keep_it(floor: str, gap: str, says: list[str], never: list[str]) -> None:
    from floorgate.admission.intervals import parse_interval
    from floorgate.scheduler.app.phase import phase_warning

    line = phase_warning(parse_interval(floor, "floor"), parse_interval(gap, "gap"))
    assert all(s in line for s in says) and not any(n in line for n in never), line


def test_the_zone_is_named_by_its_iana_key() -> None:
    from zoneinfo import ZoneInfo

    from floorgate.scheduler.app.phase import zone_name

    assert zone_name(datetime(2026, 7, 1, tzinfo=ZoneInfo("Europe/Berlin"))) == "Europe/Berlin"
    assert zone_name(_at(0, 9)) == "UTC"


def test_policy_set_warns_for_each_lane_the_new_floor_puts_off_its_phase(sqlite_db: str) -> None:
    from test_cli import cli

    assert _cli_lane(sqlite_db, "23h").returncode == 0  # on phase: no warning at add
    raised = cli("policy", "set", "g/a", "--min-interval", "24h", "--revision", "1", "--owner-ref", "o", db=sqlite_db)
    assert raised.returncode == 0, raised.stderr
    warnings = [line for line in raised.stderr.splitlines() if "time of day" in line]
    assert len(warnings) == 1 and warnings[0].startswith("floorgate: warning: nightly: the floor (1d)"), raised.stderr
    assert "e.g. 23h" in warnings[0] and "--when-denied skip" in warnings[0]
    # The advice that keeps the owner's floor comes before the one that shortens it.
    assert warnings[0].index("--when-denied skip") < warnings[0].index("e.g. 23h")
    other = cli("policy", "set", "h/a", "--min-interval", "48h", "--revision", "0", "--owner-ref", "o", db=sqlite_db)
    assert other.returncode == 0 and "time of day" not in other.stderr  # another goal's lanes: nothing to say


@pytest.mark.parametrize("damage", ["schedule", "bysecond"])
def test_a_damaged_schedule_under_the_scope_does_not_fail_the_written_floor(store, damage: str) -> None:  # type: ignore[no-untyped-def]
    from floorgate.admission import Scope
    from floorgate.scheduler.app.root import Floorgate

    from helpers import corrupt

    clock = FixedClock(DAY0_NOON)
    floor(store, clock, "g/a", timedelta(hours=24))
    add_automation(store, clock, schedule=DAILY_9)
    app = Floorgate(store, clock=clock)
    assert [w.split(":")[0] for w in app.automations.phase_warnings(Scope.goal("g"))] == ["x"]
    corrupt(store, damage, "x")
    assert app.automations.phase_warnings(Scope.goal("g")) == ()
