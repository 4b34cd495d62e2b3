"""The readback agrees with what the timer hosts really do: a real `floorgate run`, the real crontab."""

from __future__ import annotations

from datetime import timedelta, timezone
from pathlib import Path

import pytest
from basics import T0
from test_host_processes import start_host, stop, wait_for
from test_timers import TEST_USER_CAN_RUN, add, cron_user, crontab_text  # noqa: F401 (fixture)

from floorgate.admission import AutomationState, Automations, HoldKind, SystemClock, TickLog, TimerBindings, open_store
from floorgate.admission.clock import FixedClock
from floorgate.hosts import Schedule
from floorgate.hosts._cron import parse_cron
from floorgate.hosts.crontab import CrontabHost
from floorgate.scheduler.app.readback import Readback, ReadbackState
from floorgate.scheduler.app.timers import TimerService

from helpers import add_automation, floor

pytestmark = pytest.mark.slow


def _admitted(store, automation_id: str) -> list:  # type: ignore[no-untyped-def]
    return sorted((t for t in TickLog(store).recent(automation_id, 50) if t.decision == "admitted"), key=lambda t: t.nominal_at)


def test_status_show_and_preview_agree_with_a_running_host(db_url: str, tmp_path: Path) -> None:
    clock = SystemClock()
    now = clock.now()
    with open_store(db_url) as store:
        floor(store, clock, "g/f", timedelta(seconds=6))  # type: ignore[arg-type]
        # Every 4 s under a 6 s floor: the host waits for the floor and runs the fire due then
        # (the floor opens 2 s from either neighbouring fire: the nominal time is unambiguous).
        add_automation(store, clock, "floored", schedule="every 4s", agent="f")  # type: ignore[arg-type]
        # A fire 10 minutes ago, never ticked, inside the 1 h catch-up window, of an automation
        # added before it (no host was running then): it runs at once.
        past = (now - timedelta(minutes=10)).replace(microsecond=0)
        earlier = FixedClock(now - timedelta(minutes=20))
        add_automation(store, earlier, "catchup", schedule=f"DTSTART:{past:%Y%m%dT%H%M%SZ} RRULE:FREQ=HOURLY", agent="c")
        add_automation(store, clock, "paused", schedule="every 10s", agent="p")  # type: ignore[arg-type]
        add_automation(store, clock, "held", schedule="every 10s", agent="h")  # type: ignore[arg-type]
        repo = Automations(store, clock)  # type: ignore[arg-type]
        repo.set_state("paused", AutomationState.PAUSED, "holiday")
        repo.set_state("held", AutomationState.HELD, "mission mis-x is stuck", HoldKind.MISSION_STUCK)
        readback = Readback(store, clock)  # type: ignore[arg-type]
        before = {rb.automation_id: rb for rb in readback.many()}
        catchup_row = before["catchup"].fires(1, clock.now())[0]
        assert catchup_row.fire_at == past and catchup_row.admitted
        for blocked in ("paused", "held"):
            assert before[blocked].next_fire_at is None and readback.preview(blocked, 3).rows == []
        assert before["paused"].state is ReadbackState.PAUSED and before["held"].state is ReadbackState.HELD

    host = start_host(db_url, tmp_path / "state")
    try:
        with open_store(db_url) as store:
            caught = wait_for(lambda: _admitted(store, "catchup"), what="the catch-up tick")
            assert caught[0].nominal_at == past  # the fire the readback said would run at once
            first = wait_for(lambda: _admitted(store, "floored"), what="a first floored turn")[0]
            # Between two turns: what does the readback say the host does next?
            rb = Readback(store, clock).automation("floored")  # type: ignore[arg-type]
            expected = next(r for r in rb.fires(5, clock.now()) if r.admitted)
            assert rb.eligibility is not None and rb.next_fire_at == expected.runs_at == rb.eligibility.next_eligible_at
            second = wait_for(
                lambda: [t for t in _admitted(store, "floored") if t.nominal_at > first.nominal_at], what="the next floored turn"
            )[0]
            assert second.nominal_at == expected.fire_at  # the fire the readback named ...
            assert second.actual_at >= rb.next_fire_at  # ... started no earlier than it said
            for blocked in ("paused", "held"):
                assert TickLog(store).recent(blocked, 5) == []  # nothing fired, as the readback said
    finally:
        code, err = stop(host)
    assert code == 0, err


def test_a_crontab_raised_schedule_reads_back_as_cron_fires_it(store, cron_user: str, cron_running) -> None:  # noqa: F811
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    automation = add(store, clock, "q", "DTSTART:20261101T000500Z RRULE:FREQ=MINUTELY;INTERVAL=15", "crontab")
    binding = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN).apply(automation)
    assert binding.desired_raised and binding.ack_state == "acked"  # every 15 min under 1 h: hourly at :05
    line = next(x for x in crontab_text(cron_user).splitlines() if x.endswith("# floorgate:q"))
    spec = parse_cron(line.split()[:5])
    cron_fires = spec.fires(CrontabHost(str).zone, clock.now(), clock.now() + timedelta(hours=5))
    rb = Readback(store, clock).automation("q")
    rows = rb.fires(5, clock.now())
    assert [r.fire_at.astimezone(timezone.utc) for r in rows] == cron_fires  # what cron will fire
    assert rb.next_fire_at == cron_fires[0] and all(r.admitted for r in rows)
    preview = Readback(store, clock).preview("q", 5)
    assert [r.fire_at for r in preview.rows] == [r.fire_at for r in rows]
    assert Schedule.parse(TimerBindings(store).get("q").desired).occurrences(1, after=clock.now())[0] == rows[0].fire_at  # type: ignore[union-attr]


def test_a_crontab_edited_by_hand_reads_as_drift_in_status(store, cron_user: str, cron_running) -> None:  # noqa: F811
    import subprocess

    from floorgate.scheduler.views.present import agreement_text

    clock = FixedClock(T0)
    automation = add(store, clock, "q", "DTSTART:20261101T000500Z RRULE:FREQ=HOURLY", "crontab")
    binding = TimerService(store, clock=clock, crontab_user=cron_user, can_run=TEST_USER_CAN_RUN).apply(automation)
    assert binding.ack_state == "acked"
    rb = Readback(store, clock).automation("q")
    assert rb.drift is None and agreement_text(rb).startswith("yes (acked")
    edited = crontab_text(cron_user).replace("5 * * * *", "35 * * * *")  # the owner moved it by hand
    subprocess.run(["crontab", "-u", cron_user, "-"], input=edited, text=True, check=True)
    rb = Readback(store, clock).automation("q")
    assert rb.drift is not None and "35 * * * *" in rb.drift
    assert agreement_text(rb).startswith("NO") and rb.next_fire_at is None
    subprocess.run(["crontab", "-u", cron_user, "-r"], capture_output=True)
    gone = Readback(store, clock).automation("q")
    assert gone.drift is not None and "no timer" in gone.drift


def test_status_reads_a_cron_line_as_the_cli_applied_it(store, cron_user: str, cron_running, tmp_path: Path) -> None:  # noqa: F811
    """The CLI's crontab lines carry its state directory; status compares the line with the same
    one (it used to read such a line as not running floorgate: DRIFT, while `diff` said match)."""
    import subprocess

    from floorgate.scheduler.app.root import Floorgate, Settings
    from floorgate.scheduler.views.present import agreement_text

    clock = FixedClock(T0)
    app = Floorgate(store, clock=clock, settings=Settings(state_dir=tmp_path / "state", crontab_user=cron_user))
    app.timers.can_run = TEST_USER_CAN_RUN
    automation = add(store, clock, "q", "DTSTART:20261101T000500Z RRULE:FREQ=HOURLY", "crontab")
    assert app.timers.apply(automation).ack_state == "acked"
    assert "--state-dir" in crontab_text(cron_user)
    rb = app.readback.automation("q")
    assert rb.drift is None and agreement_text(rb).startswith("yes (acked")
    edited = crontab_text(cron_user).replace("5 * * * *", "35 * * * *")
    subprocess.run(["crontab", "-u", cron_user, "-"], input=edited, text=True, check=True)
    assert app.readback.automation("q").drift is not None  # and a real difference still shows
