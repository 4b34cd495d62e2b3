"""The console as an owner acts from it, on both backends: pause, resume and release a hold from the
page; a turn's page with its verdict and the escaped, capped tail of its log; times in the zone
the owner picked (remembered per owner, never microseconds); troubled automations first; lost
hosts named; a timeline that zooms and counts dense ticks in the store."""

from __future__ import annotations

import os
import re
from datetime import timedelta

import pytest
from basics import DAY, T0, raw_sql

from floorgate.admission import FixedClock, Store
from floorgate.admission.automations import AutomationState, Automations, HoldKind
from floorgate.admission.tallies import Tallies
from floorgate.admission.ticks import Tick, TickDecision, TickLog
from floorgate.scheduler.console.timeline import SLOTS, Zoom, slot_width, timeline

from console_kit import console, post_form, sign_in
from helpers import add_automation, floor


def visible(page: str) -> str:
    """The text a person reads: tags and their attributes removed."""
    return re.sub(r"<[^>]+>", " ", page)


def test_pause_with_a_note_then_resume_from_the_page(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    csrf = sign_in(c)
    first, page = post_form(c, "/automations/x/pause", {"csrf": csrf, "note": "vendor outage", "back": "/automations/x"})
    assert first.headers["location"] == "/automations/x"
    assert 'data-status="200"' in page.text and "paused x" in page.text
    assert raw_sql(store, "SELECT state, state_note FROM fg_automations") == [
        ("paused", "vendor outage from the console (by ops, authenticated)")
    ]
    assert 'data-testid="state">paused<' in page.text and ">Resume</button>" in page.text
    _, page = post_form(c, "/automations/x/resume", {"csrf": csrf, "note": "", "back": "/dashboard"})
    assert "resumed x" in page.text and raw_sql(store, "SELECT state FROM fg_automations") == [("active",)]


def test_a_held_automation_offers_release_and_releasing_it_clears_the_hold(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    Automations(store, clock).set_state("x", AutomationState.HELD, "the host cannot express it", HoldKind.TIMER)
    csrf = sign_in(c)
    page = c.client.get("/dashboard").text
    assert ">Release hold</button>" in page and 'class="trouble"' in page
    _, page = post_form(c, "/automations/x/resume", {"csrf": csrf, "note": "fixed the schedule"})
    assert raw_sql(store, "SELECT state, hold_kind FROM fg_automations") == [("active", None)]


def test_a_viewer_sees_no_act_forms_and_a_posted_one_is_refused(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    csrf = sign_in(c, c.viewer)
    assert "/automations/x/pause" not in c.client.get("/dashboard").text
    _, page = post_form(c, "/automations/x/pause", {"csrf": csrf, "note": "n"})
    assert 'data-status="403"' in page.text and raw_sql(store, "SELECT state FROM fg_automations") == [("active",)]


def test_troubled_automations_are_listed_first(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    for name in ("a-fine", "b-paused", "c-fine"):
        add_automation(store, clock, name)
    Automations(store, clock).set_state("b-paused", AutomationState.PAUSED, "n")
    sign_in(c)
    page = c.client.get("/dashboard").text
    order = re.findall(r'<tr id="automation-([\w-]+)"', page)
    assert order == ["b-paused", "a-fine", "c-fine"]


def test_times_show_in_the_owners_zone_to_the_second_rounded_up(store: Store, clock: FixedClock) -> None:
    from floorgate.admission import Admission

    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    add_automation(store, clock, "x")
    clock.advance(timedelta(microseconds=400_000))  # a start at 09:00:00.4: the floor opens at 09:00:00.4 the next day
    Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=T0)
    csrf = sign_in(c)
    page = c.client.get("/dashboard").text
    assert "2026-12-02 09:00:01 UTC" in visible(page), "09:00:00.4 is shown as the next whole second, never earlier"
    assert not re.search(r"\d\d:\d\d:\d\d\.\d", visible(page)), "no microseconds on a page"
    assert 'datetime="2026-12-02T09:00:00.400000Z"' in page  # the exact instant stays in the markup
    _, page = post_form(c, "/preferences", {"csrf": csrf, "zone": "Europe/Berlin", "back": "/dashboard"})
    assert "2026-12-02 10:00:01 CET" in visible(page.text)
    assert raw_sql(store, "SELECT name, zone FROM fg_principals WHERE name = 'ops'") == [("ops", "Europe/Berlin")]
    c.client.cookies.clear()  # another browser, same owner: the zone is remembered per owner
    sign_in(c)
    assert "10:00:01 CET" in visible(c.client.get("/dashboard").text)


def test_an_unknown_zone_is_one_line_and_nothing_is_written(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    csrf = sign_in(c)
    _, page = post_form(c, "/preferences", {"csrf": csrf, "zone": "Mars/Olympus"})
    assert 'data-status="422"' in page.text and "is not an IANA time zone" in page.text
    assert raw_sql(store, "SELECT zone FROM fg_principals WHERE name = 'ops'") == [(None,)]


def test_a_turn_page_shows_the_verdict_and_the_escaped_capped_tail_of_its_log(store: Store, clock: FixedClock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from floorgate.scheduler.console.lanes import LOG_TAIL

    c = console(store, clock)
    c.fg.settings = c.fg.settings.model_copy(update={"state_dir": tmp_path / "state"})
    script = "import sys; sys.stdout.write('x' * 70000 + '<script>alert(1)</script>\\x1b[31m'); sys.exit(3)"
    add_automation(store, clock, "x", script=script)
    csrf = sign_in(c)
    _, page = post_form(c, "/automations/x/run", {"csrf": csrf, "reason": "look at the log"})
    turn_id = re.search(r'href="/turns/([^"]+)">turn page', page.text)
    assert turn_id is not None, page.text
    turn = c.client.get(f"/turns/{turn_id.group(1)}").text
    assert 'class="verdict-failed">failed<' in turn and "exit 3" in turn
    log = re.search(r'<pre class="log" id="log">(.*?)</pre>', turn, re.S)
    assert log is not None
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in log.group(1) and "<script>alert" not in turn
    assert "\x1b" not in turn
    assert f"the last {LOG_TAIL:,} of" in turn and len(log.group(1)) < LOG_TAIL + 200
    assert c.client.get("/turns/no-such-turn").status_code == 404


def test_a_turn_log_that_is_a_link_is_not_followed(store: Store, clock: FixedClock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from floorgate.scheduler.console.lanes import log_tail

    secret = tmp_path / "secret"
    secret.write_text("password=hunter2")
    link = tmp_path / "turn.log"
    os.symlink(secret, link)
    text, note = log_tail(str(link))
    assert text is None and note is not None and "cannot be read" in note


def test_lost_and_stopped_hosts_are_named(store: Store, clock: FixedClock) -> None:
    from floorgate.scheduler.runtime._heartbeat import Heartbeat

    c = console(store, clock)
    Heartbeat(store, clock, "h1:1", timedelta(seconds=5)).beat()
    stopped = Heartbeat(store, clock, "h2:2", timedelta(seconds=5))
    stopped.beat()
    stopped.stopped()
    clock.advance(timedelta(minutes=3))
    sign_in(c)
    page = visible(c.client.get("/dashboard").text)
    assert re.search(r"host h1:1\S* lost 3 min ago", page) and re.search(r"host h2:2\S* stopped 3 min ago", page), page


def _minute_ticks(store: Store, automation_id: str, start, count: int, denied_every: int = 0) -> None:  # type: ignore[no-untyped-def]
    ticks = []
    for i in range(count):
        at = start + timedelta(minutes=i)
        denied = denied_every and i % denied_every == 0
        decision = TickDecision.DENIED if denied else TickDecision.ADMITTED
        ticks.append(Tick(automation_id=automation_id, nominal_at=at, actual_at=at, decision=decision, reason="r", host="h"))
    TickLog(store).append(ticks)


@pytest.mark.parametrize("zoom", list(Zoom), ids=[z.value for z in Zoom])
def test_dense_ticks_are_counted_per_slot_never_more_marks_than_slots(store: Store, clock: FixedClock, zoom: Zoom) -> None:
    now = T0 + timedelta(days=8)
    add_automation(store, clock, "x")
    _minute_ticks(store, "x", now - timedelta(days=8), 8 * 1440, denied_every=10)
    since = now - zoom.span
    counts = Tallies(store).slot_counts("x", since, slot_width(zoom), SLOTS)
    strip = timeline(counts, [], now, zoom)
    minutes = int(zoom.span.total_seconds() // 60)
    fires = [m for m in strip.marks if m.row == "scheduled"]
    assert len(fires) <= SLOTS and strip.count("scheduled") == minutes
    assert strip.count("denied") == minutes // 10
    assert all(0 <= m.x <= 600 for m in strip.marks)
    if zoom is not Zoom.HOUR:
        assert max(m.count for m in fires) > 1 and " x fire due, " in fires[0].title


def test_the_dashboard_zooms(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    sign_in(c)
    for zoom, label in (("hour", "last hour"), ("day", "last day"), ("week", "last week")):
        page = c.client.get(f"/dashboard?zoom={zoom}").text
        assert f'aria-label="{label} of x:' in page
        assert re.search(rf'<a href="/dashboard\?zoom={zoom}" aria-current="page" id="zoom-{zoom}">', page)
    assert 'aria-label="last day of x:' in c.client.get("/dashboard?zoom=nonsense").text


def test_a_failing_automation_is_red_and_listed_before_a_paused_one_and_run_now_on_a_paused_one_flashes_its_refusal(
    store: Store, clock: FixedClock, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    from floorgate.scheduler.runtime.executor import TurnExecutor

    c = console(store, clock)
    c.fg.settings = c.fg.settings.model_copy(update={"state_dir": tmp_path / "state"})
    add_automation(store, clock, "a-paused")
    add_automation(store, clock, "b-failing", script="import sys; sys.exit(7)")
    Automations(store, clock).set_state("a-paused", AutomationState.PAUSED, "investigating")
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
    try:
        failing = Automations(store, clock).get("b-failing")
        for _ in range(2):  # the second consecutive failure: its automatic starts slow down
            assert executor.run(failing).verdict.status == "failed"
    finally:
        executor.close()
    csrf = sign_in(c)
    page = c.client.get("/dashboard").text
    assert re.findall(r'<tr id="automation-([\w-]+)"', page) == ["b-failing", "a-paused"]
    assert '<td class="state-failing" data-testid="state">failing</td>' in page
    first, page = post_form(c, "/automations/a-paused/run", {"csrf": csrf, "reason": "try it", "back": "/dashboard"})
    assert first.headers["location"] == "/dashboard"
    flash = re.search(r'id="flash"[^>]*>(.*?)</', page.text, re.S)
    assert flash is not None, page.text
    refusal = flash.group(1).strip()  # the refusal's one line is the flash, nothing around it
    assert refusal.startswith("a-paused is paused: investigating; a manual run bypasses only the interval"), refusal
    assert refusal.endswith("resume it with &#39;floorgate automation resume a-paused&#39;"), refusal  # no turn page: none ran
    assert raw_sql(store, "SELECT count(*) FROM fg_starts WHERE automation_id = 'a-paused'") == [(0,)]


def test_a_time_shown_rounded_up_still_reads_as_past_when_it_is() -> None:
    from datetime import datetime, timezone

    from floorgate.scheduler.console.shown import Shown
    from floorgate.scheduler.views.present import when

    now = datetime(2026, 12, 2, 9, 0, 0, 500_000, tzinfo=timezone.utc)
    just_past = now - timedelta(microseconds=300_000)  # 09:00:00.2, shown as 09:00:01 (rounded up)
    assert when(just_past, now) == "2026-12-02 09:00:01 UTC, 0 s ago"
    assert Shown("UTC", now).rel(just_past) == "0 s ago"
