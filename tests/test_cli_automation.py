"""The timer-host CLI as a user runs it (in-process through the entry function; hosts are real processes)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from test_cli import cli, one_line_error


@pytest.fixture
def db(sqlite_db: str) -> str:
    return sqlite_db


def add(db: str, name: str, *options: str, script: str = "print('hi')") -> None:
    r = cli("automation", "add", name, "--goal", "g", "--agent", "a", *options, "--", sys.executable, "-c", script, db=db)
    assert r.returncode == 0, r.stderr


def test_add_list_show_edit_pause_resume_remove(db: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    add(db, "morning", "--schedule", "daily at 09:00 Europe/Berlin", "--timeout", "30s")
    listed = json.loads(cli("automation", "list", "--json", db=db).stdout)["automations"]
    assert [a["automation"] for a in listed] == ["morning"]
    assert listed[0]["schedule"].startswith("DTSTART;TZID=Europe/Berlin:") and listed[0]["schedule"].endswith("RRULE:FREQ=DAILY")
    edited = cli("automation", "edit", "morning", "--schedule", "weekdays at 08:30 Europe/Berlin", "--json", db=db)
    assert json.loads(edited.stdout)["revision"] == 2
    paused = cli("automation", "pause", "morning", "--note", "on holiday", "--json", db=db)
    assert json.loads(paused.stdout)["state"] == "paused"
    status = json.loads(cli("status", "--json", db=db).stdout)["automations"][0]
    assert status["state"] == "paused" and "on holiday" in status["detail"] and status["next_fire_at"] is None
    assert json.loads(cli("automation", "resume", "morning", "--json", db=db).stdout)["state"] == "active"
    shown = json.loads(cli("automation", "show", "morning", "--json", "--next", "3", db=db).stdout)
    assert len(shown["next_fire_times"]) == 3 and shown["state"] == "eligible"
    assert cli("automation", "remove", "morning", db=db).returncode == 0
    gone = cli("automation", "show", "morning", db=db)
    assert gone.returncode == 2 and "does not exist" in one_line_error(gone)


def test_preview_shows_the_floor_before_saving(db: str) -> None:
    assert cli("policy", "set", "g/a", "--min-interval", "1d", "--revision", "0", "--owner-ref", "o", db=db).returncode == 0
    r = cli(
        "automation",
        "preview",
        "check-ci",
        "--goal",
        "g",
        "--agent",
        "a",
        "--schedule",
        "DTSTART:20260101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=15",
        "--next",
        "200",
        "--json",
        db=db,
    )
    fires = json.loads(r.stdout)["fires"]
    runs = [f for f in fires if f["admitted"]]
    assert len(fires) == 200 and len(runs) in (2, 3)  # 200 quarter hours = 50 hours: a daily floor runs it 2-3 times
    assert all(f["eligible_at"] for f in fires if not f["admitted"])
    assert cli("automation", "list", "--json", db=db).stdout.count("check-ci") == 0  # nothing saved


def test_turn_run_exit_codes(db: str) -> None:
    assert cli("policy", "set", "g/a", "--min-interval", "1d", "--revision", "0", "--owner-ref", "o", db=db).returncode == 0
    add(db, "ok", "--schedule", "every 1h", script="print('hi')")
    add(db, "bad", "--schedule", "every 1h", script="import sys; sys.exit(2)")
    first = cli("turn", "run", "ok", "--json", db=db)
    assert first.returncode == 0 and json.loads(first.stdout)["verdict"]["status"] == "succeeded"
    denied = cli("turn", "run", "bad", "--json", db=db)  # same agent: inside the floor
    assert denied.returncode == 3 and json.loads(denied.stdout)["verdict"]["status"] == "denied"
    failed = cli("turn", "run", "bad", "--manual-reason", "debugging", "--json", db=db)
    doc = json.loads(failed.stdout)
    assert failed.returncode == 5 and doc["verdict"]["failure_category"] == "task"
    replay = cli("turn", "run", "bad", "--turn", doc["turn_id"], "--json", db=db)
    assert replay.returncode == 5 and json.loads(replay.stdout)["replayed"] is True
    empty = cli("turn", "run", "ok", "--manual-reason", " ", db=db)
    assert empty.returncode == 2 and "--manual-reason" in one_line_error(empty)


def test_bad_schedules_and_commands_are_one_line_errors(db: str) -> None:
    cases = [
        (["--schedule", "DTSTART:20261201T090000 RRULE:FREQ=DAILY"], "time zone"),
        (["--schedule", "DTSTART;TZID=Mars/Olympus:20261201T090000 RRULE:FREQ=DAILY"], "IANA"),
        (["--schedule", "DTSTART:20261201T090000Z RRULE:FREQ=DAILY;INTERVAL=0"], "INTERVAL"),
        (["--schedule", "sometimes"], "friendly form"),
        (["--schedule", "every 1h", "--timeout", "0"], "--timeout: '0' is no time at all; give a duration above 0"),
        (["--schedule", "every 1h", "--timeout", "soon"], "--timeout: 'soon' is not an interval; give a duration above 0"),
        (["--schedule", "daily at 09:00"], "has no time zone; add a zone, e.g. 'daily at 09:00 UTC' or 'daily at 09:00 Europe/Berlin'"),
        (["--schedule", "weekdays at 08:30"], "add a zone, e.g. 'weekdays at 08:30 UTC'"),
        (["--schedule", "weekly on MO at 07:00"], "add a zone, e.g. 'weekly on MO at 07:00 UTC'"),
    ]
    for options, needle in cases:
        r = cli("automation", "add", "x", "--goal", "g", "--agent", "a", *options, "--", "true", db=db)
        assert r.returncode == 2 and needle in one_line_error(r), (options, r.stderr)
    missing = cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", db=db)
    assert missing.returncode == 2 and "argv" in one_line_error(missing)
    assert json.loads(cli("automation", "list", "--json", db=db).stdout)["automations"] == []


@pytest.mark.parametrize(
    "argv, needle",
    [
        pytest.param(["./does-not-exist.sh"], "does not exist in", id="relative-missing"),
        pytest.param(["/no/such/program"], "does not exist", id="absolute-missing"),
        pytest.param(["./notes.txt"], "is not executable", id="not-executable"),
        pytest.param(["./"], "is not executable", id="a-directory"),
    ],
)
def test_add_refuses_a_program_that_cannot_run_from_its_directory(tmp_path: Path, argv: list[str], needle: str) -> None:
    (tmp_path / "notes.txt").write_text("not a program\n")
    db = str(tmp_path / "fg.db")
    result = cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", *argv, db=db, cwd=tmp_path)
    line = one_line_error(result)
    assert result.returncode == 2 and line.startswith("floorgate: error: argv: program") and needle in line
    assert str(tmp_path) in line or argv[0].startswith("/")  # named relative to the directory the automation records
    listed = cli("automation", "list", "--json", db=db)
    assert listed.returncode == 1 or json.loads(listed.stdout)["automations"] == []  # nothing saved


def test_a_bare_program_name_off_this_path_is_a_warning(tmp_path: Path) -> None:
    db = str(tmp_path / "fg.db")
    result = cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "no-such-prog-zz", db=db)
    assert result.returncode == 0 and "warning: argv: 'no-such-prog-zz' is not on this shell's PATH" in result.stderr


def test_status_states_are_distinct(db: str, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert cli("policy", "set", "g", "--min-interval", "1d", "--revision", "0", "--owner-ref", "o", db=db).returncode == 0
    add(db, "ready", "--schedule", "every 1h")
    gone = tmp_path / "gone-cli"  # a program that existed when it was added, removed since
    gone.write_text("#!/bin/sh\n")
    gone.chmod(0o755)
    r = cli("automation", "add", "nohost", "--goal", "g", "--agent", "b", "--schedule", "every 1h", "--", str(gone), db=db)
    assert r.returncode == 0
    gone.unlink()
    r = cli(
        "automation", "add", "waiting", "--goal", "g", "--agent", "c", "--schedule", "every 1h", "--", sys.executable, "-c", "pass", db=db
    )
    assert cli("turn", "run", "waiting", db=db).returncode == 0
    r = cli("automation", "add", "off", "--goal", "g", "--agent", "d", "--schedule", "every 1h", "--", "true", db=db)
    assert cli("automation", "pause", "off", db=db).returncode == 0
    states = {s["automation"]: s["state"] for s in json.loads(cli("status", "--json", db=db).stdout)["automations"]}
    assert states == {"ready": "eligible", "nohost": "host_unavailable", "waiting": "interval_wait", "off": "paused"}


@pytest.mark.parametrize("program", ["removed-since", "no-such-program-on-path"], ids=["path", "on-path"])
def test_turn_run_of_a_missing_program_names_it_and_its_log_says_so(tmp_path: Path, program: str) -> None:
    db = str(tmp_path / "fg.db")
    if program == "removed-since":  # a path that existed at add (a missing one is refused there)
        program = str(tmp_path / "prog")
        Path(program).write_text("#!/bin/sh\n")
        Path(program).chmod(0o755)
    assert cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", program, db=db).returncode == 0
    Path(program).unlink(missing_ok=True)
    result = cli("turn", "run", "x", db=db)
    assert result.returncode == 5 and f"could not start {program!r}" in result.stdout
    log = next(line.split(": ", 1)[1] for line in result.stdout.splitlines() if line.startswith("log: "))
    path = Path(log) if os.path.isabs(log) else tmp_path / log
    assert program in path.read_text()  # the log it points to was written, and says why


@pytest.mark.parametrize(
    "schedule, code, needle",
    [
        pytest.param(
            "DTSTART:20261201T090000Z RRULE:FREQ=DAILY;UNTIL=20261210T090000", 2, "DTSTART is in UTC", id="utc-dtstart-local-until"
        ),
        pytest.param("DTSTART:20201201T090000Z RRULE:FREQ=DAILY;COUNT=3", 2, "no fire after now", id="ended-by-count"),
        pytest.param("DTSTART:20201201T090000Z", 2, "no fire after now", id="one-shot-in-the-past"),
        pytest.param("DTSTART:20261201T090000Z RRULE:FREQ=SECONDLY;INTERVAL=10", 0, "more than once a minute", id="sub-minute-warned"),
        pytest.param(
            "DTSTART:20260910T090000Z RRULE:FREQ=SECONDLY;BYMINUTE=22,47,20;BYHOUR=11;BYMONTHDAY=-18,16,-29;BYMONTH=10",
            2,
            "write it as FREQ=MINUTELY with BYSECOND",
            id="sparse-secondly-refused",  # 20 s per catch-up query before
        ),
    ],
)
def test_schedules_are_vetted_at_save(tmp_path: Path, schedule: str, code: int, needle: str) -> None:
    db = str(tmp_path / "fg.db")
    result = cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", schedule, "--", "/bin/true", db=db)
    if code == 0:  # the warning, then the note that this first write created the store
        warned, created = result.stderr.strip().splitlines()
        assert result.returncode == 0 and created.startswith(f"floorgate: created a new store at {db};") and needle in warned
    else:
        assert result.returncode == code and needle in one_line_error(result)
        assert not Path(db).exists()  # a refused schedule creates no store
    listed = cli("automation", "list", "--json", db=db)
    stored = json.loads(listed.stdout)["automations"] if listed.returncode == 0 else []
    assert len(stored) == (1 if code == 0 else 0)  # a refused schedule writes nothing


def test_add_says_when_its_timer_could_not_be_armed(db: str, tmp_path: Path) -> None:
    """`add` applies at once; when the apply fails (no crontab command here) it says so, not just 'added'."""
    cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", db=db)
    empty = tmp_path / "no-crontab-here"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_")} | {"PATH": str(empty)}
    args = ("--goal", "g", "--agent", "a", "--timer", "crontab", "--schedule", "every 15m", "--", sys.executable, "-c", "pass")
    added = cli("automation", "add", "q", *args, db=db, env=env)
    assert added.returncode == 0, added.stderr
    assert "NOT ARMED: crontab: cannot run 'crontab'" in added.stdout and "'floorgate automation apply q'" in added.stdout
    edited = cli("automation", "edit", "q", "--schedule", "every 30m", db=db, env=env)
    assert "NOT ARMED: crontab: cannot run 'crontab'" in edited.stdout


def test_show_and_preview_print_whole_seconds_rounded_up_and_json_keeps_the_exact_instant(db: str) -> None:
    import re
    from datetime import datetime

    from floorgate.admission.clock import iso
    from floorgate.scheduler.views.present import ceil_second

    assert cli("policy", "set", "g/a", "--min-interval", "2d", "--revision", "0", "--owner-ref", "o", db=db).returncode == 0
    add(db, "x", "--schedule", "daily at 09:00 UTC")
    assert cli("turn", "run", "x", "--manual-reason", "now", db=db).returncode == 0  # a start with microseconds
    exact = json.loads(cli("automation", "show", "x", "--json", db=db).stdout)["next_eligible_at"]
    runs = [f["runs_at"] for f in json.loads(cli("automation", "preview", "x", "--json", db=db).stdout)["fires"] if f["admitted"]]
    assert exact == runs[0]
    at = datetime.fromisoformat(exact)
    if at.microsecond == 0:  # one start in a million lands on a whole second: nothing to round
        pytest.skip("the manual start fell on a whole second")
    assert "." in exact  # --json: the exact instant
    shown = iso(ceil_second(at))
    assert shown is not None and shown > exact[:19]
    for command in ("show", "preview"):
        text = cli("automation", command, "x", db=db).stdout
        assert not re.search(r"\d\d:\d\d:\d\d\.\d", text), text
        assert shown in text, text


def test_removing_an_automation_names_its_turn_still_running(store) -> None:  # type: ignore[no-untyped-def]
    """Removing stops no running turn: the answer says which still run (text and JSON), on both
    backends; an automation with none says nothing of it."""
    from datetime import timedelta

    from floorgate.admission import AutomationSpec, Automations, Journal, SystemClock

    clock = SystemClock()
    for name in ("busy", "idle"):
        spec = AutomationSpec(goal_id="g", agent_id="a", schedule="DTSTART:20261201T090000Z RRULE:FREQ=DAILY", host=_host())
        Automations(store, clock).add(name, spec)
    Journal(store, clock).begin(
        turn_id="busy-1", automation_id="busy", goal_id="g", agent_id="a", attempt=1, kind="automatic", manual_reason=None,
        runner_host="h", runner_pid=1, deadline=clock.now() + timedelta(hours=1), log_path=None,
    )  # fmt: skip
    removed = cli("automation", "remove", "busy", db=store.url)
    assert removed.returncode == 0, removed.stderr
    assert "STILL RUNNING: turn busy-1; removing stops none" in removed.stdout
    idle = cli("automation", "remove", "idle", "--json", db=store.url)
    assert idle.returncode == 0 and json.loads(idle.stdout)["running"] == []


def _host():  # type: ignore[no-untyped-def]
    from floorgate.admission import CommandHost

    return CommandHost(argv=(sys.executable, "-c", "pass"), timeout_seconds=30.0)
