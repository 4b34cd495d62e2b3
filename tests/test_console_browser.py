"""The console in a real browser: Debian's chromium driven by Playwright (``executable_path``), against
``floorgate serve``'s app on a real socket. Screenshots go to $FLOORGATE_ARTIFACTS (else the test's
temporary directory); the test prints where."""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from floorgate.admission import Admission, Automations, FixedClock, SystemClock, open_store
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.console import create_app

from cli import run_cli
from console_kit import pending_ask
from helpers import add_automation, floor, host_running, wait_for

CHROMIUM = "/usr/bin/chromium"
pytestmark = pytest.mark.slow


@pytest.fixture
def served(sqlite_db: str) -> Iterator[tuple[str, str, str]]:
    """(base URL, owner token, db path) of a console served by uvicorn on a free loopback port."""
    import uvicorn

    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)")
    store = open_store(sqlite_db)
    fg = Floorgate(store)
    _, token = fg.principals.add("ops", "owner")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(fg), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    wait_for(lambda: server.started, what="the console to listen")
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", token, sqlite_db
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        store.close()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    where = Path(os.environ.get("FLOORGATE_ARTIFACTS") or tmp_path / "artifacts") / "console"
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nconsole screenshots: {where}")  # noqa: T201 - the test says where its artifacts are
    return where


def test_an_owner_sets_lowers_conflicts_approves_and_reads_the_same_next_eligible(served, artifacts: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect, sync_playwright

    base, token, db = served
    with open_store(db) as store:
        clock = FixedClock(SystemClock().now())
        add_automation(store, clock, "x")  # goal g, agent a
        ask = pending_ask(store, clock, "y")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(f"{base}/signin")
        page.fill("#token", token)
        page.click("#signin")
        expect(page).to_have_url(f"{base}/dashboard")

        # A daily floor at the goal, inherited by its agent.
        page.goto(f"{base}/settings?target=g")
        page.fill("#min_interval", "24h")
        expect(page.locator("#change p")).to_have_text("Stored at g: none \u2192 1d")
        expect(page.locator('#effective_change li[data-scope="g/a"]')).to_have_text("g/a inherits none \u2192 1d")
        page.click("#save")
        expect(page.locator("#saved")).to_contain_text("revision 1")
        expect(page.locator('tr[data-scope="g/a"] .effective')).to_have_text("1d")
        page.screenshot(path=str(artifacts / "settings-daily-floor.png"), full_page=True)

        # Lowered: the reduction is shown and authorized for exactly that, Save applies, readback shown.
        page.fill("#min_interval", "12h")
        expect(page.locator("#change p")).to_have_text("Stored at g: 1d \u2192 12h (REDUCTION)")
        expect(page.locator("#authorize")).to_be_visible()
        page.screenshot(path=str(artifacts / "settings-reduction.png"), full_page=True)
        page.check("#authorize_reduction")
        page.click("#save")
        expect(page.locator("#saved")).to_contain_text("revision 2")
        expect(page.locator('tr[data-scope="g/a"] .effective')).to_have_text("12h")

        # A change from the CLI meanwhile: the page's Save is a conflict asking for a refresh.
        changed = run_cli(
            "policy", "set", "g", "--min-interval", "2d", "--revision", "2", db=db, env={**os.environ, "FLOORGATE_TOKEN": token}
        )
        assert changed.returncode == 0, changed.stderr
        page.fill("#min_interval", "36h")
        page.click("#save")
        expect(page.locator("#refresh")).to_be_visible()
        expect(page.locator("#error")).to_contain_text("now revision 3")
        page.screenshot(path=str(artifacts / "settings-conflict.png"), full_page=True)
        page.click("#refresh")
        expect(page.locator("#revision")).to_have_text("3")

        # Automation targeting: the selector lists the goal, its agents and their automations;
        # switching target discards the draft; an override at one automation, with a note.
        page.fill("#min_interval", "5d")  # a draft, never saved
        options = page.locator("#target option").evaluate_all("els => els.map(e => e.value)")
        assert options == ["g", "g/a", "g/a/x", "g/a/y"], options
        page.select_option("#target", "g/a/x")
        expect(page).to_have_url(f"{base}/settings?target=g%2Fa%2Fx")
        expect(page.locator("#min_interval")).to_have_value("")  # the draft is gone
        expect(page.locator('tr[data-scope="g/a/x"] .effective')).to_have_text("2d")  # inherited from the goal
        page.fill("#min_interval", "3d")
        expect(page.locator("#change p")).to_have_text("Stored at g/a/x: none → 3d")
        expect(page.locator('#effective_change li[data-scope="g/a/x"]')).to_have_text("g/a/x inherits 2d → 3d")
        expect(page.locator("#note")).to_be_hidden()  # in a closed disclosure
        page.click("#note_box summary")
        page.fill("#note", "x runs a heavy report")
        page.click("#save")
        expect(page.locator("#saved")).to_contain_text("saved g/a/x at revision 1")
        expect(page.locator('tr[data-scope="g/a/x"] .effective')).to_have_text("3d")
        expect(page.locator("#changes .note").first).to_have_text("x runs a heavy report")
        page.screenshot(path=str(artifacts / "settings-automation.png"), full_page=True)
        history = json.loads(run_cli("policy", "history", "--json", db=db).stdout)["history"]
        assert (history[0]["scope"], history[0]["note"], history[0]["owner_kind"]) == ("g/a/x", "x runs a heavy report", "authenticated")
        lanes = {a["automation"]: a for a in json.loads(run_cli("status", "--json", db=db).stdout)["automations"]}
        assert lanes["y"]["eligibility"]["effective_floor"]["floor"] == "2d"  # the peer and the goal default are untouched
        assert lanes["x"]["eligibility"]["effective_floor"]["floor"] == "3d"

        # Owner asks: the limit in context, then approve.
        page.goto(f"{base}/asks")
        expect(page.locator("h1")).to_have_text("Owner asks")
        expect(page.locator(f"#ask-{ask} .bound")).to_have_text("max_turns")
        page.click(f"#ask-{ask} .approve")
        expect(page.locator("#flash")).to_contain_text(f"approved {ask}")
        page.screenshot(path=str(artifacts / "asks.png"), full_page=True)

        # An admission, then the dashboard's next eligible time is the CLI's.
        with open_store(db) as store:
            Admission(store, SystemClock()).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=SystemClock().now())
        cli = json.loads(run_cli("status", "--json", db=db).stdout)
        expected = next(a["next_eligible_at"] for a in cli["automations"] if a["automation"] == "x")
        page.goto(f"{base}/dashboard")
        expect(page.locator('#automation-x [data-testid="next-eligible"]')).to_have_attribute("datetime", expected)
        expect(page.locator("#recent-events")).to_contain_text("floor_changed")
        page.screenshot(path=str(artifacts / "dashboard.png"), full_page=True)
        page.goto(f"{base}/events")
        expect(page.locator("#events")).to_contain_text("ask_decided")
        page.screenshot(path=str(artifacts / "events.png"), full_page=True)
        browser.close()
    assert expected is not None
    assert sorted(p.name for p in artifacts.iterdir() if not p.name.startswith("act-")) == [
        "asks.png",
        "dashboard.png",
        "events.png",
        "settings-automation.png",
        "settings-conflict.png",
        "settings-daily-floor.png",
        "settings-reduction.png",
    ]


def test_the_dashboard_shows_a_failing_automation_in_red_and_refuses_run_now_once_held(served, artifacts: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect, sync_playwright

    from floorgate.scheduler.runtime.executor import TurnExecutor

    base, token, db = served
    with open_store(db) as store:
        clock = SystemClock()
        automation = add_automation(store, FixedClock(clock.now()), "f", script="import sys; sys.exit(7)")
        executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
        try:
            for _ in range(2):  # two consecutive failures: starts slow down
                assert executor.run(automation).verdict.status == "failed"
        finally:
            executor.close()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(f"{base}/signin")
        page.fill("#token", token)
        page.click("#signin")
        expect(page).to_have_url(f"{base}/dashboard")
        state = page.locator('#automation-f [data-testid="state"]')
        expect(state).to_have_text("failing")
        expect(state).to_have_css("color", "rgb(160, 27, 27)")  # red, never the green of eligible
        expect(page.locator("#automation-f")).to_contain_text("2 consecutive turns failed (latest: failed, exit_code_7)")
        expect(page.locator("#automation-f")).to_contain_text("no automatic start before")
        page.screenshot(path=str(artifacts / "dashboard-failing.png"), full_page=True)
        # Held by the owner's pause: "Run now" is refused in one line saying how to clear it.
        with open_store(db) as store:
            Automations(store, SystemClock()).set_state("f", "paused", "investigating")
        page.goto(f"{base}/dashboard")
        page.click("#automation-f summary")
        page.fill("#automation-f .run-now input[name=reason]", "debugging")
        page.click("#automation-f .run-now button")
        expect(page).to_have_url(f"{base}/dashboard")  # redirected after the POST: the refusal is the flash
        expect(page.locator("#flash")).to_contain_text("a manual run bypasses only the interval")
        expect(page.locator("#flash")).to_contain_text("floorgate automation resume f")
        page.screenshot(path=str(artifacts / "dashboard-run-now-refused.png"), full_page=True)
        browser.close()


def test_an_owner_acts_from_the_console_at_desktop_and_phone_width(served, artifacts: Path) -> None:  # type: ignore[no-untyped-def]
    """Pause and resume with a note, Run now (a reload does not run it again), the turn's page with
    its log, the zoomed timeline and the owner's zone; screenshots at a desktop and a phone width."""
    from playwright.sync_api import expect, sync_playwright

    base, token, db = served
    with open_store(db) as store:
        clock = FixedClock(SystemClock().now())
        add_automation(store, clock, "report", script="print('report <b>done</b>')")
        add_automation(store, clock, "broken", script="import sys; print('boom'); sys.exit(7)")
        add_automation(store, clock, "quiet")
        floor(store, clock, "g/a", timedelta(hours=1))  # a floored lane records its starts (the strips show them)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{base}/signin")
        page.fill("#token", token)
        page.keyboard.press("Enter")  # keyboard only
        expect(page).to_have_url(f"{base}/dashboard")

        # Times in the owner's zone, remembered.
        page.fill("#zone", "Europe/Berlin")
        page.click("#zone-form button")
        expect(page.locator("#flash")).to_contain_text("times are shown in Europe/Berlin")
        expect(page.locator("#now")).to_contain_text("CET")

        # Run now on the failing automation: a redirect; reloading does not run it again.
        page.click("#automation-broken summary")
        page.fill("#automation-broken .run-now input[name=reason]", "try it once")
        page.click("#automation-broken .run-now button")
        expect(page.locator("#flash")).to_contain_text("broken: turn")
        expect(page.locator("#flash")).to_contain_text("failed")
        expect(page).to_have_url(f"{base}/dashboard")
        page.reload()
        expect(page.locator("#flash")).to_have_count(0)
        with open_store(db) as store:
            assert raw_count(store, "broken") == 1, "a reload after Run now starts no second turn"
        expect(page.locator("#automation-broken")).to_have_class("trouble")
        rows = page.locator("#timers tbody tr").evaluate_all("els => els.map(e => e.id)")
        assert rows[0] == "automation-broken", rows  # a failed last turn is listed first
        page.screenshot(path=str(artifacts / "act-dashboard-desktop.png"), full_page=True)

        # The turn's page: verdict and log.
        page.click("#automation-broken td.wide a")
        expect(page.locator("#verdict")).to_contain_text("failed")
        expect(page.locator("#log")).to_contain_text("boom")
        page.screenshot(path=str(artifacts / "act-turn.png"), full_page=True)

        # Pause with a note from the automation's page, then resume.
        page.goto(f"{base}/automations/quiet")
        page.click("details.act summary")
        page.fill(".pause input[name=note]", "vendor outage")
        page.click(".pause button")
        expect(page).to_have_url(f"{base}/automations/quiet")
        expect(page.locator('[data-testid="state"]')).to_have_text("paused")
        page.click("details.act summary")
        page.click(".resume button")
        expect(page.locator("#flash")).to_contain_text("resumed quiet")

        # The timeline zooms.
        page.goto(f"{base}/dashboard")
        page.click("#zoom-week")
        expect(page.locator('svg[data-strip="broken"]')).to_have_attribute(
            "aria-label", re.compile("last week of broken: .* 1 starts \\(1 manual\\)")
        )
        page.click("#zoom-hour")
        expect(page).to_have_url(f"{base}/dashboard?zoom=hour")

        # Create one from the form: the live preview shows the next fires and what the 1 h floor admits.
        page.goto(f"{base}/dashboard")
        page.click("#new-automation")
        page.fill("#f-automation", "digest")
        page.fill("#f-goal", "g")
        page.fill("#f-agent", "a")
        page.fill("#f-schedule", "every 30m")
        expect(page.locator("#preview-summary")).to_contain_text("fires would run (floor 1h)")
        expect(page.locator("#preview-fires tr")).to_have_count(8)
        page.fill("#f-command", "/bin/true")
        page.screenshot(path=str(artifacts / "act-new-automation.png"), full_page=True)
        page.click("#save")
        expect(page).to_have_url(f"{base}/automations/digest")
        expect(page.locator("#flash")).to_contain_text("created digest")
        page.click("#edit")
        page.fill("#f-schedule", "every 2h")
        expect(page.locator("#preview-summary")).to_contain_text("8 of the next 8 fires would run")
        page.click("#save")
        expect(page.locator("#flash")).to_contain_text("saved digest at revision 2")

        # A phone's width: the table stays usable (secondary columns hidden, nothing cut off).
        page.set_viewport_size({"width": 390, "height": 844})
        page.goto(f"{base}/dashboard")
        expect(page.locator("#timers th.wide").first).to_be_hidden()
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1, f"the page scrolls sideways on a phone: {width}px"
        page.screenshot(path=str(artifacts / "act-dashboard-phone.png"), full_page=True)
        browser.close()
    names = {p.name for p in artifacts.iterdir()}
    assert {"act-dashboard-desktop.png", "act-turn.png", "act-new-automation.png", "act-dashboard-phone.png"} <= names


def raw_count(store, automation_id: str) -> int:  # type: ignore[no-untyped-def]
    from floorgate.admission import Journal

    return len(Journal(store).recent(automation_id, 50))


def test_a_spent_limit_shows_used_left_and_when_it_frees_on_the_dashboard_and_settings(served, artifacts: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import expect, sync_playwright

    from floorgate.admission import Policies, Scope
    from floorgate.admission.limits import LimitsChange
    from floorgate.admission.windows import parse_window
    from floorgate.scheduler.runtime.executor import TurnExecutor

    base, token, db = served
    with open_store(db) as store:
        clock = SystemClock()
        floor(store, FixedClock(clock.now()), "g/a", timedelta(seconds=1))  # today's admission records starts only under a floor
        Policies(store, clock).configure(
            Scope.parse("g/a"), expected_revision=1, owner_ref="o", limits=LimitsChange(max_starts=1, per=parse_window("1d"))
        )
        automation = add_automation(store, FixedClock(clock.now()), "x", schedule="every 30m")
        host_running(store, FixedClock(clock.now()))  # its upcoming fires are listed (a host fires them)
        executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
        try:
            assert executor.run(automation, manual_reason="spend the count").verdict.status == "succeeded"
        finally:
            executor.close()
    shown = json.loads(run_cli("policy", "show", "g/a/x", "--json", db=db).stdout)["limits"][0]
    assert shown["exhausted"] and shown["frees_at"] is not None
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        page.goto(f"{base}/signin")
        page.fill("#token", token)
        page.click("#signin")
        expect(page).to_have_url(f"{base}/dashboard")
        state = page.locator('#automation-x [data-testid="state"]')
        expect(state).to_have_text("limit_wait")  # never the green of eligible
        expect(state).to_have_css("color", "rgb(138, 90, 0)")
        limit = page.locator('#automation-x .limits li[data-kind="starts"]')
        expect(limit).to_contain_text("1 start per 1d at g/a: used 1, held 0, left 0; exhausted until")
        expect(limit.locator('[data-testid="limit-frees"]')).to_have_attribute("datetime", shown["frees_at"])
        expect(page.locator('#automation-x [data-testid="next-eligible"]')).to_have_attribute("datetime", shown["frees_at"])
        # Its coming fires name the spent count, never a floor.
        upcoming = page.locator("#upcoming tr", has_text="x").first
        expect(upcoming).to_contain_text("no (count_exhausted)")
        page.screenshot(path=str(artifacts / "dashboard-limit-spent.png"), full_page=True)
        # The new automation form's live preview for the lane: the same count, and why.
        page.goto(f"{base}/new-automation")
        page.fill("#f-automation", "y")
        page.fill("#f-goal", "g")
        page.fill("#f-agent", "a")
        page.fill("#f-schedule", "every 30m")
        expect(page.locator("#preview-held")).to_contain_text("count_exhausted: 1 start per 1d at g/a")
        expect(page.locator("#preview-fires tr").first).to_contain_text("no (count_exhausted")
        page.goto(f"{base}/settings?target=g/a/x")
        row = page.locator('#inherited tr[data-scope="g/a/x"]')
        expect(row.locator(".eligibility")).to_have_text("limit_wait")
        expect(row.locator(".limits li")).to_contain_text("used 1, held 0, left 0; exhausted until")
        expect(row.locator('.limits [data-testid="limit-frees"]')).to_have_attribute("datetime", shown["frees_at"])
        page.screenshot(path=str(artifacts / "settings-limit-spent.png"), full_page=True)
        browser.close()
