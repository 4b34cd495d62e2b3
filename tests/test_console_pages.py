"""The console's pages on both backends: sign-in cookie and its limits, CSRF on every write form,
the settings Save (preview -> apply -> readback; a stale revision asks for a refresh),
owner asks and the dashboard's exact next-eligible time."""

from __future__ import annotations

import html
import os
import re

from basics import DAY, T0, raw_sql

from floorgate.admission import Admission, FixedClock, Store

from console_kit import console, pending_ask, post_form, post_signin, sign_in
from helpers import add_automation, floor, wait_for


def test_pages_need_a_session_and_sign_in_sets_an_http_only_same_site_cookie(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    pages = ("/dashboard", "/automations/x", "/turns/t", "/new-automation", "/automations/x/edit", "/settings", "/asks", "/events")
    for path in pages:
        r = c.client.get(path, follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/signin", path
    r = post_signin(c.client, c.owner, follow_redirects=False)
    cookie = r.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert c.client.get("/dashboard").status_code == 200


def test_one_stale_token_failing_again_and_again_locks_only_itself(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    stale = c.owner
    c.fg.principals.revoke("ops")  # a scraper keeps the revoked token
    _, good = c.fg.principals.add("lead", "owner")
    for _ in range(5):
        assert c.get("/metrics", stale).status_code == 401
    r = c.get("/metrics", stale)
    assert r.status_code == 429 and "this token failed 5 times" in r.json()["error"]["message"]
    assert 0 < int(r.headers["Retry-After"]) <= 900
    assert c.get("/metrics", good).status_code == 200  # same address, another token: unaffected
    assert c.get("/api/whoami", good).status_code == 200
    assert post_signin(c.client, good, follow_redirects=False).headers["location"] == "/dashboard"
    assert post_signin(c.client, stale).status_code == 429  # the page shares the limit
    clock.advance(DAY)  # the window passed: the token is checked again (and still fails)
    assert c.get("/metrics", stale).status_code == 401


def test_many_different_wrong_tokens_for_one_name_from_one_address_lock_that_name_good_token_included(
    store: Store, clock: FixedClock
) -> None:
    c = console(store, clock)
    for i in range(19):
        assert post_signin(c.client, f"fgo_ops.guess{i}").status_code == 401
    assert c.get("/api/whoami").status_code == 200  # 19 distinct misses (and 5 typos at the form) are not yet guessing
    assert c.get("/api/whoami", "fgo_ops.guess19").status_code == 401  # a bearer token counts too
    r = c.get("/api/whoami")
    assert r.status_code == 429 and "20 different wrong tokens" in r.json()["error"]["message"]
    assert post_signin(c.client, c.owner).status_code == 429  # (the form's redirect keeps the refusal's status)
    clock.advance(DAY)
    assert post_signin(c.client, c.owner, follow_redirects=False).headers["location"] == "/dashboard"


def test_every_write_form_needs_the_session_csrf_token(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    ask = pending_ask(store, clock)
    csrf = sign_in(c)
    forms = [
        ("/settings", {"target": "g/a", "revision": "1", "min_interval": "2d"}),
        (f"/asks/{ask}/decide", {"decision": "approve"}),
        ("/automations/x/run", {"reason": "forged run"}),
        ("/signout", {}),
    ]
    for path, form in forms:
        for bad in ({}, {"csrf": "forged"}):
            first = c.client.post(path, data={**form, **bad}, follow_redirects=False)
            assert first.status_code == 303 and first.headers["location"] == "/signin", (path, bad)  # redirected, never rendered
            assert c.client.get("/signin").status_code == 403, (path, bad)  # the form says why, with the refusal's status
    assert raw_sql(store, "SELECT revision FROM fg_rules") == [(1,)]
    assert raw_sql(store, "SELECT state FROM fg_approvals") == [("pending",)]
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]  # no forged run started
    assert c.client.post("/settings", data={"target": "g/a", "revision": "1", "min_interval": "2d", "csrf": csrf}).status_code == 200
    assert raw_sql(store, "SELECT revision FROM fg_rules") == [(2,)]


def test_save_applies_and_reports_only_what_the_readback_shows(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    csrf = sign_in(c)
    _, r = post_form(c, "/settings", {"target": "g", "revision": "0", "min_interval": "1d", "csrf": csrf})
    assert 'id="saved"' in r.text and "revision 1" in r.text
    assert re.search(r'data-scope="g/a">.*?class="effective">1d<', r.text, re.S), "the agent inherits the goal's floor"
    # Lowering without the shown reduction's key is refused, nothing written.
    _, r = post_form(c, "/settings", {"target": "g", "revision": "1", "min_interval": "12h", "csrf": csrf})
    assert 'data-status="403"' in r.text and "reduction" in r.text
    preview = c.client.get("/settings/preview", params={"target": "g", "revision": "1", "min_interval": "12h"}).json()
    assert preview["reduction"] is True and preview["before"] == "1d"
    data = {"target": "g", "revision": "1", "min_interval": "12h", "csrf": csrf, "authorize_reduction": preview["reduction_key"]}
    _, r = post_form(c, "/settings", data)
    assert 'id="saved"' in r.text and "revision 2" in r.text
    assert raw_sql(store, "SELECT owner_ref, owner_kind FROM fg_rule_history ORDER BY id") == [("ops", "authenticated")] * 2


def test_a_viewer_sees_settings_read_only_without_a_save_button(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    sign_in(c, c.viewer)
    page = c.client.get("/settings?target=g/a").text
    assert 'id="read_only"' in page and 'class="effective">1d<' in page
    assert 'id="save"' not in page and 'name="min_interval"' not in page
    sign_in(c)  # an owner, same page: the form
    page = c.client.get("/settings?target=g/a").text
    assert 'id="save"' in page and 'id="read_only"' not in page


def test_a_refused_reduction_keeps_the_draft_and_offers_the_authorization_in_page_words(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    floor(store, clock, "g", DAY / 2)
    floor(store, clock, "g/a", DAY)
    csrf = sign_in(c)
    _, r = post_form(c, "/settings", {"target": "g/a", "revision": "1", "min_interval": "0", "note": "off for a week", "csrf": csrf})
    assert 'data-status="403"' in r.text
    assert 'id="min_interval" placeholder="e.g. 24h, 45m; 0 disables"\n    value="0"' in r.text, "the typed value is kept"
    assert 'value="off for a week"' in r.text
    assert "I authorize this reduction" in r.text and "--allow-reduction" not in r.text
    key = re.search(r'id="authorize_reduction" value="([^"]+)"', r.text)
    assert key is not None and html.unescape(key.group(1)) == "g/a@1:floor 1d -> 0"
    assert re.search(r'<li data-scope="g/a">g/a inherits 1d &rarr; 12h</li>', r.text), "the effective after, from the goal"
    preview = c.client.get("/settings/preview", params={"target": "g/a", "revision": "0", "min_interval": "2d"}).json()
    assert "refresh" in preview["error"]["message"] and "--revision" not in preview["error"]["message"]
    data = {"target": "g/a", "revision": "1", "min_interval": "0", "csrf": csrf, "authorize_reduction": html.unescape(key.group(1))}
    assert 'id="saved"' in post_form(c, "/settings", data)[1].text


def test_a_concurrent_change_makes_save_a_conflict_that_asks_for_a_refresh(store: Store, clock: FixedClock) -> None:
    from cli import run_cli

    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    csrf = sign_in(c)
    signed = {**os.environ, "FLOORGATE_TOKEN": c.owner}  # this store has owners: a CLI write carries a token
    assert run_cli("policy", "set", "g/a", "--min-interval", "2d", "--revision", "1", db=store.url, env=signed).returncode == 0
    _, r = post_form(c, "/settings", {"target": "g/a", "revision": "1", "min_interval": "3d", "csrf": csrf})
    assert 'data-status="409"' in r.text and 'id="refresh"' in r.text and "now revision 2" in r.text
    assert 'id="edit"' not in r.text, "no form to resubmit: the owner refreshes first"
    assert raw_sql(store, "SELECT revision, min_interval_us FROM fg_rules") == [(2, 2 * 86_400_000_000)]


def test_the_inbox_approves_an_ask_as_the_signed_in_owner_and_a_viewer_cannot(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    ask = pending_ask(store, clock)
    csrf = sign_in(c, c.viewer)
    page = c.client.get("/asks").text
    assert ask in page and "max_turns +5" in page and 'class="approve"' not in page
    assert 'data-status="403"' in post_form(c, f"/asks/{ask}/decide", {"decision": "approve", "csrf": csrf})[1].text
    csrf = sign_in(c)
    _, r = post_form(c, f"/asks/{ask}/decide", {"decision": "approve", "csrf": csrf})
    assert 'data-status="200"' in r.text and f"approved {ask}" in r.text
    assert raw_sql(store, "SELECT state, decided_by, decided_by_kind FROM fg_approvals") == [("approved", "ops", "authenticated")]
    _, again = post_form(c, f"/asks/{ask}/decide", {"decision": "approve", "csrf": csrf})
    assert 'data-status="409"' in again.text and "single-use" in again.text


def test_the_dashboard_shows_the_servers_exact_next_eligible_time(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    add_automation(store, clock, "x")
    Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=T0)
    sign_in(c)
    page = c.client.get("/dashboard").text
    expected = c.get("/api/status").json()["automations"][0]["next_eligible_at"]
    assert expected == "2026-12-02T09:00:00Z"
    # The exact instant in datetime=, shown to the second in the owner's zone (UTC until picked).
    assert f'<time datetime="{expected}" data-testid="next-eligible" title="{expected}">2026-12-02 09:00:00 UTC</time>' in page
    assert '<svg width="640"' in page and "Upcoming 24 h" in page


def test_the_dashboard_strip_counts_manual_starts(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    floor(store, clock, "g/a", DAY)  # a floored lane records its starts
    admission = Admission(store, clock)
    admission.reserve(goal="g", agent="a", automation="x", turn_id="m-1", trigger_time=T0, manual_reason="customer escalation")
    admission.confirm("m-1")
    sign_in(c)
    page = c.client.get("/dashboard").text
    assert 'aria-label="last day of x: 0 fires, 1 starts (1 manual), 0 denials"' in page
    assert "(manual: customer escalation)</title>" in page


def test_upcoming_says_how_many_fires_it_does_not_list(store: Store, clock: FixedClock) -> None:
    from helpers import host_running

    c = console(store, clock)
    host_running(store, clock)
    add_automation(store, clock, "often", schedule="DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY")
    add_automation(store, clock, "daily")
    sign_in(c)
    page = c.client.get("/dashboard").text
    listed = re.findall(r"<tr><td><time [^>]+>[^<]+</time></td><td>(often|daily)</td>", page)
    assert listed.count("often") == 48 and "daily" in listed
    more = re.search(r'<li data-automation="often">([^<]*)<', page)
    assert more is not None, "the fires past the 48 listed are counted, not silently dropped"
    assert more.group(1).startswith("often: 48 fires listed (through 2026-12-01 09:47:00 UTC), 1393 more in the next 24 h")
    assert 'data-automation="daily"' not in page  # every fire of it is listed


def test_floored_lanes_without_an_automation_leave_out_agents_that_have_one(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")  # agent g/a has an automation
    floor(store, clock, "g/a", DAY)
    floor(store, clock, "g/b", DAY)  # agent g/b has none
    sign_in(c)
    page = c.client.get("/dashboard").text
    lanes = page[page.index("Floored lanes without an automation") :]
    assert "<td>g/b</td>" in lanes and "<td>g/a</td>" not in lanes
    # The same listing as status --json and the API (one readback under every surface).
    listed = [(lane["goal"], lane["agent"], lane["automation"]) for lane in c.get("/api/status").json()["lanes"]]
    assert listed == [("g", "b", None)]


def test_owner_asks_show_the_limit_hit_what_was_used_and_what_approving_sets(store: Store, clock: FixedClock) -> None:
    from floorgate.admission import Policies, Scope, parse_compute

    c = console(store, clock)
    Policies(store, clock).configure(
        Scope.parse("g/a"), min_interval=None, compute=parse_compute('{"max_turns": 3}'), expected_revision=0, owner_ref="o"
    )
    ask = pending_ask(store, clock)  # proposes max_turns +5
    raw_sql(store, "UPDATE fg_missions SET turns = 3, extra_turns = 2")  # 3 used; an earlier approval gave 2 more
    sign_in(c)
    page = c.client.get("/asks").text
    assert "<h1>Owner asks</h1>" in page and "Asks inbox" not in page
    row = re.search(rf'<tr id="ask-{ask}">.*?</tr>', page, re.S)
    assert row is not None
    cells = dict(re.findall(r'<td class="(bound|used|limit|proposed)">([^<]*)</td>', row.group(0)))
    assert cells == {"bound": "max_turns", "used": "3", "limit": "5", "proposed": "10 (+5)"}
    [doc] = c.get("/api/asks").json()["asks"]  # the API shows the same
    assert doc["limit"] == {"bound": "max_turns", "limit": 5, "used": 3, "extension": 5, "proposed_limit": 10}


def test_sessions_live_in_the_store_hashed_and_survive_a_restart_or_a_second_server(store: Store, clock: FixedClock) -> None:
    import hashlib

    from starlette.testclient import TestClient

    from floorgate.scheduler.app.root import Floorgate
    from floorgate.scheduler.console import SESSION_COOKIE, create_app

    c = console(store, clock)
    sign_in(c)
    sid = c.client.cookies[SESSION_COOKIE]
    assert raw_sql(store, "SELECT session_sha256, principal FROM fg_sessions") == [(hashlib.sha256(sid.encode()).hexdigest(), "ops")]
    assert sid not in str(raw_sql(store, "SELECT * FROM fg_sessions"))  # only its hash is stored
    other = TestClient(create_app(Floorgate(store, clock=clock)))  # a restart, or a second 'serve' on the store
    other.cookies.set(SESSION_COOKIE, sid)
    assert other.get("/dashboard", follow_redirects=False).status_code == 200
    clock.advance(DAY)  # past the session's 12 h
    assert other.get("/dashboard", follow_redirects=False).status_code == 303


def test_revoking_a_principal_signs_its_sessions_out_everywhere(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    sign_in(c)
    c.fg.principals.revoke("ops")
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_sessions") == [(0,)]
    assert c.client.get("/dashboard", follow_redirects=False).status_code == 303


def test_an_engaged_sign_in_lock_is_shared_by_every_server_on_the_store(store: Store, clock: FixedClock) -> None:
    from starlette.testclient import TestClient

    from floorgate.scheduler.app.root import Floorgate
    from floorgate.scheduler.console import create_app

    c = console(store, clock)
    other = TestClient(create_app(Floorgate(store, clock=clock)))
    for _ in range(5):  # failures are counted where they happen: a wrong token is no store write
        assert post_signin(c.client, "fgo_ops.guess").status_code == 401
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_signin_locks") == [(1,)]  # the lock, once engaged, is
    assert post_signin(other, "fgo_ops.guess").status_code == 429  # honoured by every server
    restarted = TestClient(create_app(Floorgate(store, clock=clock)))
    assert post_signin(restarted, "fgo_ops.guess").status_code == 429
    for i in range(20):
        post_signin(other, f"fgo_ops.other{i}")
    assert post_signin(c.client, c.owner).status_code == 429  # (the form's redirect keeps the refusal's status)
    assert post_signin(restarted, c.owner).status_code == 429


def test_the_target_selector_lists_goal_agents_and_their_automations_and_an_automation_override_leaves_peers(
    store: Store, clock: FixedClock
) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    add_automation(store, clock, "y")
    add_automation(store, clock, "z", agent="b")
    floor(store, clock, "g", DAY)
    csrf = sign_in(c)
    page = c.client.get("/settings").text
    options = re.findall(r'<option value="([^"]+)"', page[page.index('id="target"') : page.index("</select>")])
    assert options == ["g", "g/a", "g/a/x", "g/a/y", "g/b", "g/b/z"]
    _, r = post_form(c, "/settings", {"target": "g/a/x", "revision": "0", "min_interval": "2d", "csrf": csrf})
    assert 'id="saved"' in r.text, r.text
    assert re.search(r'<option value="g/a/x" selected>', r.text)
    rules = raw_sql(store, "SELECT goal_id, agent_id, automation_id, min_interval_us FROM fg_rules ORDER BY automation_id")
    assert rules == [("g", "", "", 86_400_000_000), ("g", "a", "x", 2 * 86_400_000_000)]  # peers and the goal default untouched
    lane = c.get("/api/eligibility?goal=g&agent=a&automation=y").json()
    assert lane["effective_floor"]["floor"] == "1d"


def test_the_optional_note_goes_into_the_writes_provenance_and_its_event(store: Store, clock: FixedClock) -> None:
    import json

    from cli import run_cli

    c = console(store, clock)
    add_automation(store, clock, "x")
    csrf = sign_in(c)
    page = c.client.get("/settings").text
    assert re.search(r"<details[^>]*>\s*<summary>[^<]*note", page), "the note sits in a disclosure"
    _, r = post_form(c, "/settings", {"target": "g/a", "revision": "0", "min_interval": "1d", "csrf": csrf, "note": " vacation week "})
    assert 'class="note">vacation week<' in r.text
    [change] = c.get("/api/policy/history?scope=g/a").json()["history"]
    assert (change["note"], change["owner_ref"], change["owner_kind"]) == ("vacation week", "ops", "authenticated")
    [event] = c.get("/api/events?kind=floor_changed").json()["events"]
    assert event["data"]["note"] == "vacation week"
    cli = json.loads(run_cli("policy", "history", "--json", db=store.url).stdout)
    assert [h.get("note") for h in cli["history"]] == ["vacation week"]
    # No note: none recorded; a bad one is refused naming the field, nothing written.
    post_form(c, "/settings", {"target": "g/a", "revision": "1", "min_interval": "2d", "csrf": csrf})
    assert c.get("/api/policy/history?scope=g/a").json()["history"][0]["note"] is None
    _, r = post_form(c, "/settings", {"target": "g/a", "revision": "2", "min_interval": "3d", "csrf": csrf, "note": "x" * 501})
    assert 'data-status="422"' in r.text and "note" in r.text
    assert raw_sql(store, "SELECT revision FROM fg_rules") == [(2,)]


def test_the_events_page_shows_each_event_with_its_deliveries_dead_ones_included(store: Store, clock: FixedClock) -> None:
    from floorgate.admission.events import MAX_ATTEMPTS

    c = console(store, clock)
    hook, _ = c.fg.notify.events.add_webhook("http://127.0.0.1:9/secret-path", "ask_pending")
    pending_ask(store, clock)
    events = c.fg.notify.events
    [due] = events.claim_due()
    for _ in range(MAX_ATTEMPTS):
        events.record_attempt(hook.webhook_id, due.event.event_id, status=500, error=None)
    sign_in(c)
    page = c.client.get("/events").text
    row = re.search(rf'<tr class="event kind-ask_pending" data-id="{due.event.event_id}">.*?</tr>', page, re.S)
    assert row is not None and f"dead after {MAX_ATTEMPTS} attempts (http_status_500)" in row.group(0)
    hooks = re.search(r'<table id="webhooks">.*?</table>', page, re.S)
    assert hooks is not None and "secret-path" in hooks.group(0) and '<td class="reduction">1</td>' in hooks.group(0)
    dashboard = c.client.get("/dashboard").text
    assert re.search(r'id="recent-events">.*?kind-ask_pending.*?state-dead', dashboard, re.S)
    c.client.cookies.clear()
    sign_in(c, c.viewer)
    assert "secret-path" not in c.client.get("/events").text  # a viewer sees counts, not URLs


def test_run_now_from_the_dashboard_runs_a_manual_turn_for_an_owner_only(store: Store, clock: FixedClock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from datetime import timedelta

    from helpers import lines, marker_script

    marker = tmp_path / "launches"
    add_automation(store, clock, "x", script=marker_script(marker))
    floor(store, clock, "g/a", DAY)
    admission = Admission(store, clock)
    admission.reserve(goal="g", agent="a", automation="x", turn_id="t-0", trigger_time=T0)
    admission.confirm("t-0")
    clock.advance(timedelta(hours=1))  # inside the 1 d floor: only a manual run may start
    c = console(store, clock)
    c.fg.settings = c.fg.settings.model_copy(update={"state_dir": tmp_path / "state"})
    csrf = sign_in(c)
    assert 'action="/automations/x/run"' in c.client.get("/dashboard").text
    _, r = post_form(c, "/automations/x/run", {"csrf": csrf, "reason": "  "})
    assert 'data-status="422"' in r.text and 'id="flash"' in r.text and "reason" in r.text and not marker.exists()
    first, r = post_form(c, "/automations/x/run", {"csrf": csrf, "reason": "customer escalation"})
    assert first.headers["location"] == "/dashboard"
    assert re.search(r'id="flash"[^>]*>x: turn \S+ (succeeded|running)', r.text), r.text
    wait_for(lambda: lines(marker) == 1, what="the manual turn's launch")
    # Reloading the page the POST led to shows the page again: no second turn, no message twice.
    again = c.client.get("/dashboard")
    assert 'id="flash"' not in again.text and lines(marker) == 1
    manual = raw_sql(store, "SELECT manual_reason FROM fg_starts WHERE turn_id != 't-0'")
    assert manual == [("customer escalation (by ops, authenticated)",)]
    c.client.cookies.clear()
    viewer_csrf = sign_in(c, c.viewer)
    assert 'action="/automations/x/run"' not in c.client.get("/dashboard").text
    _, r = post_form(c, "/automations/x/run", {"csrf": viewer_csrf, "reason": "r"})
    assert 'data-status="403"' in r.text and lines(marker) == 1


def test_the_dashboard_shows_a_mission_s_wall_time_used_and_left(store: Store, clock: FixedClock) -> None:
    from floorgate.admission import Policies, Scope, parse_compute

    c = console(store, clock)
    Policies(store, clock).configure(
        Scope.parse("g/a"), min_interval=None, compute=parse_compute('{"max_wall_seconds": 30}'), expected_revision=0, owner_ref="o"
    )
    pending_ask(store, clock)
    raw_sql(store, "UPDATE fg_missions SET wall_ms = 12500")  # its turns ran 12.5 s
    sign_in(c)
    page = c.client.get("/automations/x").text
    assert "wall 12.5s (left 17.5" in page, page


def test_a_refused_sign_in_is_a_redirect_and_a_reload_posts_nothing(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    first = post_signin(c.client, "fgo_ops.wrong", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/signin"  # the token is never in a page to resubmit
    page = c.client.get("/signin")
    assert page.status_code == 401 and 'id="error"' in page.text
    again = c.client.get("/signin")  # a reload: the form again, no message, nothing counted
    assert again.status_code == 200 and 'id="error"' not in again.text


def test_the_early_retry_after_a_failure_is_marked_on_the_dashboard_and_the_automation_page(store: Store, clock: FixedClock) -> None:
    """floorgate's own timer wakes once early after a failure: both pages mark that row as the
    retry it is (as show and preview do), and the schedule's fires stay plain."""
    from datetime import timedelta

    from floorgate.admission import Automations, WakeState

    from helpers import host_running

    c = console(store, clock)
    host_running(store, clock)
    add_automation(store, clock, "x")  # daily at 09:00
    retry_at = T0 + timedelta(minutes=10)
    Automations(store, clock).save_wake_state(WakeState(automation_id="x", backoff_step=1, backoff_wake_at=retry_at))
    sign_in(c)
    note = "(a retry after a failure, not a schedule fire)"
    for path in ("/dashboard", "/automations/x"):
        page = c.client.get(path).text
        assert page.count(note) == 1, path
        row = page[page.index(note) - 400 : page.index(note)]
        assert "09:10:00" in row, (path, row)  # on the retry's own row
