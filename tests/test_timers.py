"""Desired vs observed timers, the ACK rule, holds, and the pre-model hook."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from basics import T0, worker_suffix

from floorgate.admission import AutomationSpec, Automations, FixedClock, InvalidInput, TimerBindings, open_store
from floorgate.admission.liveness import HookAnswers
from floorgate.hosts import Schedule
from floorgate.hosts.contract import Held
from floorgate.hosts.crontab import CrontabHost
from floorgate.hosts.errors import UnsupportedSchedule
from floorgate.scheduler.app.timers import TimerService

from helpers import command, floor

CRON_USER = f"fgcron-test{worker_suffix()}"


def TEST_USER_CAN_RUN(user: str | None) -> None:
    """The test account cannot read this interpreter under /root; the lines it gets are only read
    back, never executed, so the runnability probe is replaced here (and tested on its own)."""


EVERY_15 = "DTSTART:20261101T000500Z RRULE:FREQ=MINUTELY;INTERVAL=15"


@pytest.fixture
def cron_user() -> str:
    if shutil.which("crontab") is None:
        pytest.skip("the crontab command is not installed (Debian package 'cron')")
    if os.geteuid() != 0:
        pytest.skip("managing a dedicated test user's crontab needs root")
    if subprocess.run(["id", CRON_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", CRON_USER], check=True)
    subprocess.run(["crontab", "-u", CRON_USER, "-r"], capture_output=True)
    yield CRON_USER
    subprocess.run(["crontab", "-u", CRON_USER, "-r"], capture_output=True)


def crontab_text(user: str) -> str:
    result = subprocess.run(["crontab", "-u", user, "-l"], capture_output=True, text=True)
    return result.stdout if result.returncode == 0 else ""


def add(store, clock, automation_id: str, schedule: str, timer: str, agent: str = "a"):  # type: ignore[no-untyped-def]
    spec = AutomationSpec(
        goal_id="g",
        agent_id=agent,
        schedule=Schedule.parse(schedule).canonical(),
        host=command("pass") if timer != "external" else None,
        timer=timer,  # type: ignore[arg-type]
    )
    return Automations(store, clock).add(automation_id, spec)


def test_crontab_apply_reads_back_acks_and_reapply_changes_nothing(store, cron_user) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    binding = svc.apply(automation)
    assert binding.ack_state == "acked" and binding.observed == "CRON 5-59/15 * * * * (" + CrontabHost(str).zone.key + ")"
    before = crontab_text(cron_user)
    assert before.count("# floorgate:q") == 1 and "turn run q" in before
    spool = Path("/var/spool/cron/crontabs") / cron_user
    written = spool.stat().st_mtime_ns
    svc.apply(automation)  # unchanged: a no-op, not even a rewrite
    assert crontab_text(cron_user) == before and spool.stat().st_mtime_ns == written
    assert svc.ack(automation).accepted
    assert svc.guarantee(automation, TimerBindings(store).get("q")).guarantee == "enforced"  # floorgate launches every turn


def test_ack_rejects_a_mismatched_host_schedule_and_persists_nothing(store, cron_user) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    svc.apply(automation)
    edited = crontab_text(cron_user).replace("5-59/15 * * * *", "*/5 * * * *")  # someone edited the host
    subprocess.run(["crontab", "-u", cron_user, "-"], input=edited, text=True, check=True)
    before = TimerBindings(store).get("q")
    clock.advance(timedelta(minutes=1))
    result = svc.ack(automation)
    assert not result.accepted and "not the desired schedule" in result.reason
    assert TimerBindings(store).get("q") == before


def test_ack_rejects_an_unavailable_host(store, cron_user) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    svc.apply(automation)
    from basics import raw_sql

    raw_sql(store, "UPDATE fg_timer_bindings SET host_user = 'no-such-user-fg'")  # the account is gone
    before = TimerBindings(store).get("q")
    result = svc.ack(automation)
    assert not result.accepted and result.observation is not None and result.observation.state == "unavailable"
    assert TimerBindings(store).get("q") == before  # a rejected ACK persists nothing


def test_a_cron_line_that_no_longer_runs_floorgate_is_not_acknowledged(store, cron_user) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    svc.apply(automation)
    text = crontab_text(cron_user)
    line = next(x for x in text.splitlines() if x.endswith("# floorgate:q"))
    hijacked = text.replace(line, "5-59/15 * * * * claude -p wake-up # floorgate:q")
    subprocess.run(["crontab", "-u", cron_user, "-"], input=hijacked, text=True, check=True)
    result = svc.ack(automation)
    assert not result.accepted and "does not run floorgate" in result.observation.text


@pytest.mark.parametrize(
    "schedule, zone, why",
    [
        pytest.param("DTSTART:20261101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=90", "UTC", "90 minutes", id="every-90-minutes"),
        pytest.param("DTSTART:20261102T080000Z RRULE:FREQ=WEEKLY;INTERVAL=2", "UTC", "INTERVAL=2", id="every-other-week"),
        pytest.param("DTSTART;TZID=Europe/Berlin:20261101T023000 RRULE:FREQ=DAILY", "Europe/Berlin", "DST", id="dst-sensitive-local-time"),
        pytest.param(
            "DTSTART;TZID=Europe/Berlin:20261101T090000 RRULE:FREQ=DAILY",
            "UTC",
            "would not fire at exactly the schedule's instants (first difference near 2026-12-02T09:00:00+00:00) "
            "(the schedule is in Europe/Berlin: write it in UTC, cron's zone)",
            id="other-zone",
        ),
    ],
)
def test_crontab_refuses_what_cron_cannot_fire_exactly(schedule: str, zone: str, why: str) -> None:
    host = CrontabHost(str, zone=ZoneInfo(zone))
    form = host.express(Schedule.parse(schedule), T0)
    assert isinstance(form, Held) and why in form.reason
    with pytest.raises(UnsupportedSchedule):  # and apply refuses it rather than arm an approximation
        host.apply("q", Schedule.parse(schedule), T0)


def test_ninety_minute_schedule_on_crontab_is_held_not_shortened(store, cron_user) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    automation = add(store, clock, "n", "DTSTART:20261101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=90", "crontab")
    binding = svc.apply(automation)
    assert binding.desired is None and "90 minutes" in binding.hold_reason
    held = Automations(store, clock).get("n")
    assert held.state == "held" and "never shortened" in held.state_note
    # The hold names the fix that always works, for this automation: floorgate's own timer.
    assert held.state_note.endswith("'floorgate automation edit n --timer apscheduler' (with 'floorgate run' running)")
    assert "floorgate:n" not in crontab_text(cron_user)


def test_a_schedule_closer_than_the_floor_is_raised_when_the_host_can_express_it(store, cron_user) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    svc = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN)
    binding = svc.apply(add(store, clock, "q", EVERY_15, "crontab"))
    assert binding.desired_raised and binding.desired.endswith("RRULE:FREQ=HOURLY")
    assert "5 * * * *" in crontab_text(cron_user) and binding.ack_state == "acked"


def test_external_ack_needs_a_fresh_readback_and_unavailable_clears_facts(store) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock)
    automation = add(store, clock, "ext", EVERY_15, "external")
    svc.apply(automation)
    desired = TimerBindings(store).get("ext").desired
    clock.advance(-timedelta(seconds=1))  # a readback taken before the apply cannot certify it
    before = TimerBindings(store).get("ext")
    stale = svc.ack(automation, current_rrule=desired)
    assert not stale.accepted and "not newer" in stale.reason
    assert TimerBindings(store).get("ext") == before  # rejected: nothing persisted
    clock.advance(timedelta(seconds=5))
    assert not svc.ack(automation).accepted  # no observation supplied: nothing to certify from
    assert svc.ack(automation, current_rrule=desired).accepted
    kept = svc.observe(automation).binding  # an absent observation keeps earlier facts
    assert kept.ack_state == "acked" and kept.observed == desired
    cleared = svc.observe(automation, unavailable=True).binding
    assert cleared.ack_state == "none" and cleared.observed is None and cleared.observed_state == "unavailable"


def test_guarantee_readback(store, tmp_path) -> None:
    clock = FixedClock(T0)
    svc = TimerService(store, clock=clock)
    add(store, clock, "own", EVERY_15, "apscheduler")
    add(store, clock, "ext", EVERY_15, "external", agent="b")
    db = store.url
    for name in ("own", "ext"):
        svc.apply(Automations(store, clock).get(name))

    def promise(name: str):  # type: ignore[no-untyped-def]
        return svc.guarantee(Automations(store, clock).get(name), TimerBindings(store).get(name))

    assert promise("own").guarantee == "enforced"
    assert promise("ext").guarantee == "schedule-only" and "no pre-model hook has answered" in promise("ext").why
    hook = run_hook(
        db, {"session_id": "s1", "prompt": "triage"}, "--goal", "g", "--agent", "b", "--automation", "ext", "--wake", "automatic"
    )
    assert hook.returncode == 0, hook.stderr
    # The hook ran on the real clock; what it recorded is read back at that time.
    answered = HookAnswers(store).get("ext")
    assert answered is not None and answered.admitted and answered.answers == 1
    clock.set(answered.answered_at)
    assert promise("ext").guarantee == "pre-model hook"


@pytest.mark.parametrize(
    "answered_after, expected",
    [
        pytest.param(timedelta(minutes=0), "pre-model hook", id="answered-the-latest-fire"),
        pytest.param(timedelta(minutes=-4), "pre-model hook", id="a-little-early-for-the-app-clock"),
        pytest.param(timedelta(minutes=-16), "schedule-only", id="missed-the-latest-fire"),
        pytest.param(timedelta(hours=-5), "schedule-only", id="silent-for-hours"),
    ],
)
def test_the_pre_model_hook_is_claimed_only_while_it_answers_the_apps_fires(store, answered_after, expected) -> None:
    from floorgate.admission.liveness import HookAnswer
    from floorgate.scheduler.app.guarantee import guarantee_of

    clock = FixedClock(T0)
    ext = add(store, clock, "ext", EVERY_15, "external", agent="b")  # fires :05, :20, :35, :50
    now = T0 + timedelta(hours=6, minutes=12)  # the latest fire (with the grace) is 06:05
    latest = T0 + timedelta(hours=6, minutes=5)
    answer = HookAnswer(automation_id="ext", answered_at=latest + answered_after, admitted=False, answers=3)
    got = guarantee_of(ext, None, answer, now)
    assert got.guarantee == expected
    if expected == "schedule-only":
        assert "2026-12-01T15:05:00Z" in got.why and "not trusted" in got.why


def run_hook(db: str, payload, *args: str) -> subprocess.CompletedProcess[str]:  # type: ignore[no-untyped-def]
    stdin = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        [sys.executable, "-m", "floorgate", "hook", "user-prompt-submit", "--db", db, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_hook_admits_then_blocks_with_the_exact_next_time(db_url: str) -> None:
    with open_store(db_url) as store:
        floor(store, FixedClock(T0), "g/a", timedelta(hours=6))
    lane = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    payload = {"session_id": "abc", "transcript_path": "/tmp/t.jsonl", "cwd": "/w", "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    first = run_hook(db_url, payload, *lane)
    assert first.returncode == 0 and first.stderr == ""
    second = run_hook(db_url, payload, *lane)
    assert second.returncode == 2
    with open_store(db_url) as store:
        from floorgate.admission import Admission

        anchor = Admission(store).starts()[0].anchor_at
    from floorgate.admission.clock import iso

    assert f"before {iso(anchor + timedelta(hours=6))}" in second.stderr and "interval_wait" in second.stderr
    assert "go" not in second.stderr  # the prompt is not echoed or stored
    manual = run_hook(
        db_url, payload, "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "manual", "--manual-reason", "owner at keyboard"
    )
    assert manual.returncode == 0


@pytest.mark.parametrize(
    "payload, extra, needle",
    [
        pytest.param("not json", (), "JSON", id="unparseable-payload"),
        pytest.param({"prompt": "x"}, ("--wake", "manual"), "--manual-reason", id="manual-without-reason"),
    ],
)
def test_hook_fails_closed_on_bad_input(db_url: str, payload, extra, needle: str) -> None:  # type: ignore[no-untyped-def]
    args = ["--goal", "g", "--agent", "a", "--automation", "x", *extra]
    if "--wake" not in extra:
        args += ["--wake", "automatic"]
    result = run_hook(db_url, payload, *args)
    assert result.returncode == 2 and needle in result.stderr


def test_hook_fails_closed_on_an_unreadable_store(tmp_path: Path) -> None:
    db = tmp_path / "bad.db"
    db.write_bytes(b"this is not a sqlite database" * 100)
    result = run_hook(str(db), {"prompt": "x"}, "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    assert result.returncode == 2 and "fail closed" in result.stderr
    newer = tmp_path / "newer.db"
    with open_store(str(newer)) as store:
        from basics import raw_sql

        raw_sql(store, "UPDATE fg_alembic_version SET version_num = '0099'")
    result = run_hook(str(newer), {"prompt": "x"}, "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    assert result.returncode == 2 and "newer" in result.stderr


def test_running_host_answers_an_apscheduler_ack(db_url: str, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    with open_store(db_url) as store:
        add(store, clock, "own", "every 1h", "apscheduler")
        svc = TimerService(store)
        assert not svc.ack(Automations(store).get("own"), wait=0.5).accepted  # nobody is running
    host = subprocess.Popen(
        [sys.executable, "-m", "floorgate", "run", "--db", db_url, "--state-dir", str(tmp_path / "s"), "--poll", "1s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with open_store(db_url) as store:
            svc = TimerService(store)
            result = svc.ack(Automations(store).get("own"), wait=20)
            assert result.accepted, result.reason
            assert result.observation.text == Automations(store).get("own").spec.schedule
    finally:
        host.send_signal(signal.SIGTERM)
        host.communicate(timeout=60)


@pytest.mark.parametrize("outside", ["", "MAILTO=owner@example.org\n0 3 * * * /usr/bin/true\n"], ids=["only-floorgate", "owner-lines"])
def test_removing_uses_the_account_the_line_was_applied_to(store, cron_user, outside: str) -> None:  # type: ignore[no-untyped-def]
    if outside:
        subprocess.run(["crontab", "-u", cron_user, "-"], input=outside, text=True, check=True)
    clock = FixedClock(T0)
    TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN).apply(add(store, clock, "q", EVERY_15, "crontab"))
    assert "# floorgate:q" in crontab_text(cron_user)
    TimerService(store, clock=clock).crontab("q").remove("q")  # no --crontab-user given this time
    assert crontab_text(cron_user) == outside  # the owner's lines as they were; no blank line left behind


def test_a_crontab_user_who_cannot_run_floorgate_is_an_apply_failure(store, cron_user) -> None:
    clock = FixedClock(T0)
    if not os.path.realpath(sys.executable).startswith("/root/"):
        pytest.skip("this interpreter is readable by every user here")
    binding = TimerService(store, clock=clock, crontab_user=cron_user).apply(add(store, clock, "q", EVERY_15, "crontab"))
    assert binding.apply_error is not None and "cannot run" in binding.apply_error and binding.ack_state == "none"
    assert "# floorgate:q" not in crontab_text(cron_user)


@pytest.mark.parametrize("where", ["before", "after"])
def test_hook_db_means_the_same_before_and_after_the_subcommand(db_url: str, tmp_path, where: str) -> None:  # type: ignore[no-untyped-def]
    with open_store(db_url) as store:
        floor(store, FixedClock(T0), "g/a", timedelta(hours=6))
    lane = ["--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic"]
    db_args = ["--db", db_url]
    argv = [*db_args, "hook", "user-prompt-submit", *lane] if where == "before" else ["hook", "user-prompt-submit", *lane, *db_args]
    payload = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "go"})

    project = tmp_path / "agent-project"
    project.mkdir()

    def hook() -> subprocess.CompletedProcess[str]:
        # Run in the agent's project: a hook that ignored --db would open ./floorgate.db there.
        return subprocess.run(
            [sys.executable, "-m", "floorgate", *argv], input=payload, capture_output=True, text=True, timeout=60, cwd=project
        )

    assert hook().returncode == 0
    assert hook().returncode == 2  # the floor of the store named by --db holds
    assert not (project / "floorgate.db").exists()


def test_hook_blocks_on_an_unexpected_error(db_url: str) -> None:
    deep = "[" * 100_000 + "]" * 100_000  # json's RecursionError, not a ValueError
    lane = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    result = run_hook(db_url, deep, *lane)
    assert result.returncode == 2 and "Traceback" not in result.stderr and "fail closed" in result.stderr


def test_a_self_reading_host_refuses_an_owner_report(store, tmp_path) -> None:
    clock = FixedClock(T0)
    own = add(store, clock, "own", EVERY_15, "apscheduler")
    svc = TimerService(store, clock=clock)
    before = TimerBindings(store).get("own")
    with pytest.raises(InvalidInput, match="--current-rrule: apscheduler timers are read back from the host itself"):
        svc.ack(own, current_rrule=EVERY_15, wait=0.1)
    with pytest.raises(InvalidInput, match="--unavailable"):
        svc.observe(own, unavailable=True, wait=0.1)
    assert TimerBindings(store).get("own") == before  # refused before anything was asked or written
    from test_cli import cli, one_line_error

    db = str(tmp_path / "cli.db")
    assert cli("automation", "add", "c", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "/bin/true", db=db).returncode == 0
    result = cli("automation", "ack", "c", "--current-rrule", EVERY_15, db=db)
    assert result.returncode == 2 and "--current-rrule" in one_line_error(result)


def test_a_non_ascii_session_is_admitted_and_a_denied_prompt_writes_nothing(db_url: str) -> None:
    clock = FixedClock(T0)
    with open_store(db_url) as store:
        floor(store, clock, "g/a", timedelta(hours=6))
        automation = add(store, clock, "x", EVERY_15, "external")
        TimerService(store, clock=clock).apply(automation)
    lane = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    payload = {"session_id": "sitzung-äöü-✓-\u202e", "hook_event_name": "UserPromptSubmit", "prompt": "go"}
    first = run_hook(db_url, payload, *lane)
    assert first.returncode == 0, first.stderr  # the id is a digest of the session: always a valid id
    with open_store(db_url) as store:
        from basics import raw_sql

        dump = {t: raw_sql(store, f"SELECT * FROM {t} ORDER BY 1") for t in ("fg_starts", "fg_timer_bindings", "fg_turns")}
    second = run_hook(db_url, payload, *lane)
    assert second.returncode == 2 and "may not wake the model before" in second.stderr
    with open_store(db_url) as store:
        after = {t: raw_sql(store, f"SELECT * FROM {t} ORDER BY 1") for t in dump}
    assert after == dump  # a denial writes nothing, not even when the hook was seen


def test_an_apply_after_a_failed_one_goes_to_the_account_it_was_meant_for(store, cron_user) -> None:
    """A failed apply for another user's crontab must not make the next plain apply write the
    caller's own crontab."""
    from floorgate.hosts.errors import HostUnavailable

    def cannot_run(user: str | None) -> None:
        raise HostUnavailable(f"crontab: user {user} cannot run floorgate")

    clock = FixedClock(T0)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    failed = TimerService(store, clock=clock, crontab_user=cron_user, can_run=cannot_run).apply(automation)
    assert failed.apply_error is not None and failed.host_user == cron_user
    own_before = subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout
    TimerService(store, clock=clock, can_run=TEST_USER_CAN_RUN).apply(automation)  # no --crontab-user this time
    assert "# floorgate:q" in crontab_text(cron_user)
    assert subprocess.run(["crontab", "-l"], capture_output=True, text=True).stdout == own_before  # the caller's is untouched
