"""The console's operational endpoints on both backends: run now (a manual managed turn whose
reason bypasses only the interval), turns, timers (desired, observed, diff, ACK), missions and
their envelopes, events and webhooks; each with its typed errors."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from basics import DAY, raw_sql
from test_timers import add

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store
from floorgate.admission.envelope import parse_compute

from cli import run_cli
from console_kit import console, pending_ask
from helpers import add_automation, floor, lines, marker_script, wait_for


def _started(store: Store, clock: FixedClock) -> None:
    """g/a/x ran just now: its 1 d floor keeps every automatic start out until tomorrow."""
    floor(store, clock, "g/a", DAY)
    admission = Admission(store, clock)
    admission.reserve(goal="g", agent="a", automation="x", turn_id="t-0", trigger_time=clock.now())
    admission.confirm("t-0")
    clock.advance(timedelta(hours=1))


def test_run_now_bypasses_only_the_interval_and_records_the_authenticated_reason(
    store: Store, wall_clock: FixedClock, tmp_path: Path
) -> None:
    clock = wall_clock  # 'turn run' below is a process on the system clock
    marker = tmp_path / "launches"
    add_automation(store, clock, "x", script=marker_script(marker))
    _started(store, clock)
    c = console(store, clock)
    c.fg.settings = c.fg.settings.model_copy(update={"state_dir": tmp_path / "state"})
    auto = run_cli("turn", "run", "x", "--state-dir", str(tmp_path / "state"), db=store.url)
    assert auto.returncode == 3 and "interval_wait" in auto.stdout  # an automatic run is denied ...
    r = c.post("/api/automations/x/run", {"reason": "hotfix deploy", "wait": "60s"})
    assert r.status_code == 200, r.text  # ... a manual one is not
    doc = r.json()
    assert doc["state"] == "settled" and doc["verdict"]["status"] == "succeeded", json.dumps(doc)
    assert (doc["decision"]["admitted"], doc["decision"]["reason"], doc["decision"]["kind"]) == (True, "manual", "manual")
    assert lines(marker) == 1
    [start] = [s for s in c.get("/api/starts?automation=x").json()["starts"] if s["turn_id"] == doc["turn_id"]]
    assert start["manual_reason"] == "hotfix deploy (by ops, authenticated)"
    assert c.get(f"/api/turns/{doc['turn_id']}").json()["verdict"]["status"] == "succeeded"  # as 'turn show'


def test_run_now_does_not_bypass_the_compute_envelope(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    marker = tmp_path / "launches"
    add_automation(store, clock, "x", script=marker_script(marker), model="unlisted-model")
    compute = parse_compute('{"model_allowlist": ["allowed-model"]}')
    Policies(store, clock).configure(Scope.parse("g"), compute=compute, expected_revision=0, owner_ref="o")
    c = console(store, clock)
    c.fg.settings = c.fg.settings.model_copy(update={"state_dir": tmp_path / "state"})
    refused = c.post("/api/automations/x/run", {"reason": "urgent", "wait": "60s"}).json()
    assert refused["verdict"]["status"] != "succeeded" and refused["verdict"]["failure_category"] == "policy", refused
    assert not marker.exists() and raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]


def test_a_long_run_now_answers_202_with_the_turn_to_follow(store: Store, clock: FixedClock, tmp_path: Path) -> None:
    go = tmp_path / "go"
    script = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.02)"
    add_automation(store, clock, "x", script=script)
    c = console(store, clock)
    c.fg.settings = c.fg.settings.model_copy(update={"state_dir": tmp_path / "state"})
    r = c.post("/api/automations/x/run", {"reason": "now", "wait": "0s"})
    assert r.status_code == 202 and r.json()["state"] == "running", r.text
    turn = r.json()["turn"]
    wait_for(lambda: c.get(turn).status_code == 200, what="the turn's journal row")
    go.write_text("")
    settled = wait_for(lambda: c.get(turn).json().get("verdict") or None, what="the verdict")
    assert settled["status"] == "succeeded"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({}, "reason", id="no-reason"),
        pytest.param({"reason": "   "}, "reason", id="blank-reason"),
        pytest.param({"reason": 7}, "reason", id="reason-not-text"),
        pytest.param({"reason": "r", "wait": "2h"}, "wait", id="wait-too-long"),
        pytest.param({"reason": "r", "wait": "soon"}, "wait", id="wait-not-an-interval"),
    ],
)
def test_run_now_bad_input_names_the_field_and_launches_nothing(store: Store, clock: FixedClock, tmp_path: Path, body, field) -> None:  # type: ignore[no-untyped-def]
    marker = tmp_path / "launches"
    add_automation(store, clock, "x", script=marker_script(marker))
    c = console(store, clock)
    r = c.post("/api/automations/x/run", body)
    assert r.status_code == 422 and r.json()["error"] == {**r.json()["error"], "kind": "invalid_input", "field": field}
    assert not marker.exists() and raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]


def test_run_now_refuses_an_external_timer_and_an_unknown_automation(store: Store, clock: FixedClock) -> None:
    add(store, clock, "ext", "DTSTART:20261101T000500Z RRULE:FREQ=DAILY", "external")
    c = console(store, clock)
    r = c.post("/api/automations/ext/run", {"reason": "r"})
    assert r.status_code == 422 and r.json()["error"]["field"] == "automation"
    assert c.post("/api/automations/nope/run", {"reason": "r"}).json()["error"]["kind"] == "not_found"
    assert c.get("/api/turns/nope").json()["error"]["kind"] == "not_found"


def test_timer_desired_observed_diff_and_ack_match_the_cli(store: Store, wall_clock: FixedClock) -> None:
    clock = wall_clock  # 'automation apply' below records its time from the system clock
    add(store, clock, "ext", "DTSTART:20261101T000500Z RRULE:FREQ=DAILY", "external")
    c = console(store, clock)
    assert c.get("/api/automations/ext/timer").json()["binding"] is None
    desired = c.post("/api/automations/ext/timer/desired").json()
    assert desired["desired"] and desired["applied_at"] is None
    cli = json.loads(run_cli("automation", "desired", "ext", "--json", db=store.url).stdout)
    assert cli["desired"] == desired["desired"]
    ack = c.post("/api/automations/ext/timer/ack", {"current_rrule": desired["desired"]}).json()
    assert ack["accepted"] is False and "never applied" in ack["reason"]  # as the CLI says it
    assert run_cli("automation", "apply", "ext", db=store.url).returncode == 0  # recorded as applied by the owner
    clock.advance(DAY)
    observed = c.post("/api/automations/ext/timer/observe", {"current_rrule": desired["desired"]}).json()
    assert observed["observation"]["state"] == "present" and observed["observed"] == desired["desired"]
    view = c.get("/api/automations/ext/timer").json()
    cli_diff = json.loads(run_cli("automation", "diff", "ext", "--json", db=store.url).stdout)  # on the real clock: fires differ
    assert view["diff"]["match"] is True and {k: cli_diff[k] for k in ("desired", "observed", "match")} == {
        k: view["diff"][k] for k in ("desired", "observed", "match")
    }
    ack = c.post("/api/automations/ext/timer/ack", {"current_rrule": desired["desired"]}).json()
    assert ack["accepted"] is True and c.get("/api/automations/ext/timer").json()["binding"]["ack_state"] == "acked"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        pytest.param({"unavailable": "yes"}, "unavailable", id="unavailable-not-bool"),
        pytest.param({"current_rrule": 5}, "current_rrule", id="rrule-not-text"),
        pytest.param({"wait": "1h"}, "wait", id="wait-too-long"),
    ],
)
def test_timer_reads_bad_input_names_the_field(store: Store, clock: FixedClock, body, field) -> None:  # type: ignore[no-untyped-def]
    add(store, clock, "ext", "DTSTART:20261101T000500Z RRULE:FREQ=DAILY", "external")
    c = console(store, clock)
    for action in ("observe", "ack"):
        r = c.post(f"/api/automations/ext/timer/{action}", body)
        assert r.status_code == 422 and r.json()["error"]["field"] == field, (action, r.text)
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_timer_bindings") == [(0,)]


def test_missions_and_their_envelopes_read_as_the_cli(store: Store, clock: FixedClock) -> None:
    Policies(store, clock).configure(Scope.parse("g"), compute=parse_compute('{"max_turns": 5}'), expected_revision=0, owner_ref="o")
    pending_ask(store, clock)
    c = console(store, clock)
    [mission] = c.get("/api/missions?automation=x").json()["missions"]
    detail = c.get(f"/api/missions/{mission['mission_id']}").json()
    assert detail["envelope"]["max_turns"] == 5 and detail["left"]["turns"] == 5
    assert [a["bound"] for a in detail["pending_asks"]] == ["max_turns"]
    cli = json.loads(run_cli("mission", "show", mission["mission_id"], "--json", db=store.url).stdout)
    assert detail == cli
    assert c.get("/api/missions/nope").json()["error"]["kind"] == "not_found"
    assert c.get("/api/missions?limit=x").json()["error"]["field"] == "limit"


def test_events_and_webhooks_in_the_api(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    hook, secret = c.fg.notify.events.add_webhook("http://127.0.0.1:9/hook", "ask_pending", "slack")
    pending_ask(store, clock)
    [event] = c.get("/api/events").json()["events"]
    assert event["kind"] == "ask_pending" and [d["state"] for d in event["deliveries"]] == ["pending"]
    assert c.get("/api/events?kind=floor_changed").json()["events"] == []
    assert c.get("/api/events?kind=nope").json()["error"]["field"] == "events"
    [listed] = c.get("/api/webhooks").json()["webhooks"]
    assert (listed["webhook_id"], listed["format"], listed["pending"]) == (hook.webhook_id, "slack", 1)
    assert secret not in c.get("/api/webhooks").text
    assert c.get("/api/webhooks", token=c.viewer).status_code == 403  # a URL can be a credential
