"""The console's JSON API on both backends: authentication and roles on every endpoint, typed
errors, exact-revision conflicts, reduction authorization, asks bound to the principal, parity
with ``floorgate status --json``, and /metrics from the store."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
from basics import DAY, T0, raw_sql
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from floorgate.admission import Admission, FixedClock, Role, Scope, Store
from floorgate.admission.missions import Missions
from floorgate.scheduler.app.readback import Readback
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.console import create_app
from floorgate.scheduler.console.api import ENDPOINTS

from cli import run_cli
from console_kit import console, pending_ask
from helpers import add_automation, floor

DAY_S = 86400.0


def _path(template: str) -> str:
    ids = {"{automation}": "x", "{approval_id}": "auth-nope", "{turn_id}": "t-nope", "{mission_id}": "m-nope", "{webhook_id}": "wh-nope"}
    for name, value in ids.items():
        template = template.replace(name, value)
    return template


_WRITTEN = ("fg_rules", "fg_starts", "fg_turns", "fg_timer_bindings", "fg_missions", "fg_approvals", "fg_webhooks", "fg_deliveries")


@pytest.mark.parametrize("ep", ENDPOINTS, ids=lambda e: f"{e.method} {e.path}")
def test_every_endpoint_refuses_anonymous_and_bad_tokens(store: Store, clock: FixedClock, ep) -> None:  # type: ignore[no-untyped-def]
    c = console(store, clock)
    for headers in ({}, {"Authorization": "Bearer fgo_ops.wrong"}, {"Authorization": "Basic b3BzOng="}):
        r = c.client.request(ep.method, _path(ep.path), headers=headers, json={} if ep.method == "POST" else None)
        assert r.status_code == 401, (headers, r.text)
        assert r.json()["error"]["kind"] == "unauthenticated"


@pytest.mark.parametrize("ep", [e for e in ENDPOINTS if e.role is Role.OWNER], ids=lambda e: f"{e.method} {e.path}")
def test_every_write_refuses_a_viewer(store: Store, clock: FixedClock, ep) -> None:  # type: ignore[no-untyped-def]
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    add_automation(store, clock, "x")
    body = {"scope": "g/a", "revision": 1, "min_interval": "2d", "reason": "r", "current_rrule": "RRULE:FREQ=DAILY"}
    body |= {"url": "http://127.0.0.1:9/hook", "events": "ask_pending"}  # what adding a webhook needs

    def written() -> list[object]:
        return [raw_sql(store, f"SELECT * FROM {table}") for table in _WRITTEN]

    before = written()
    r = c.client.request(ep.method, _path(ep.path), json=body if ep.method == "POST" else None, headers=c.headers(c.viewer))
    assert r.status_code == 403 and r.json()["error"]["kind"] == "forbidden"
    assert written() == before


def test_a_goal_floor_is_inherited_lowered_only_with_the_shown_reduction_and_recorded_as_authenticated(
    store: Store, clock: FixedClock
) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")  # agent g/a exists
    r = c.post("/api/policy/apply", {"scope": "g", "revision": 0, "min_interval": "1d"})
    assert r.status_code == 200 and r.json()["confirmed"] is True
    view = c.get("/api/policy?scope=g").json()
    assert view["revision"] == 1
    [agent] = view["inherited"]
    assert agent["scope"] == "g/a" and agent["effective_floor"]["floor_seconds"] == DAY_S
    assert [r["scope"] for r in agent["effective_floor"]["rules"]] == ["g"]  # where it comes from

    preview = c.post("/api/policy/preview", {"scope": "g", "revision": 1, "min_interval": "12h"}).json()
    assert preview["before"] == "1d" and preview["after"] == "12h" and preview["reduction"] is True
    refused = c.post("/api/policy/apply", {"scope": "g", "revision": 1, "min_interval": "12h"})
    assert refused.status_code == 403 and refused.json()["error"]["kind"] == "reduction_not_authorized"
    other = c.post(
        "/api/policy/apply", {"scope": "g", "revision": 1, "min_interval": "6h", "authorize_reduction": preview["reduction_key"]}
    )
    assert other.status_code == 403, "an authorization is for the reduction shown, not another"
    assert c.get("/api/policy?scope=g").json()["revision"] == 1  # nothing written by either
    done = c.post(
        "/api/policy/apply", {"scope": "g", "revision": 1, "min_interval": "12h", "authorize_reduction": preview["reduction_key"]}
    )
    assert done.status_code == 200 and done.json()["confirmed"] is True
    assert done.json()["readback"]["inherited"][0]["effective_floor"]["floor"] == "12h"
    [latest, first] = c.get("/api/policy/history?scope=g").json()["history"]
    assert (latest["owner_ref"], latest["owner_kind"], latest["reduction_authorized"]) == ("ops", "authenticated", True)
    assert first["owner_kind"] == "authenticated"
    # This store has owners: the CLI writes only with an owner's token, recorded as that owner, authenticated.
    unsigned = run_cli(
        "policy", "set", "g", "--min-interval", "2d", "--revision", "2", "--owner-ref", "alice", db=store.url, env=_no_token()
    )
    assert unsigned.returncode == 3
    signed = run_cli("policy", "set", "g", "--min-interval", "2d", "--revision", "2", db=store.url, env=_no_token(FLOORGATE_TOKEN=c.owner))
    assert signed.returncode == 0, signed.stderr
    latest = c.get("/api/policy/history?scope=g").json()["history"][0]
    assert (latest["owner_ref"], latest["owner_kind"]) == ("ops", "authenticated")


def test_a_stale_revision_is_a_typed_conflict_carrying_the_current_one(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    for path in ("/api/policy/preview", "/api/policy/apply"):
        r = c.post(path, {"scope": "g/a", "revision": 0, "min_interval": "2d"})
        assert r.status_code == 409, path
        error = r.json()["error"]
        assert error["kind"] == "revision_conflict" and error["current_revision"] == 1
        assert "send revision 1" in error["message"] and "--revision" not in error["message"], "the API's field, not the CLI's flag"
    assert raw_sql(store, "SELECT revision, min_interval_us FROM fg_rules") == [(1, 86_400_000_000)]


def test_a_refused_reduction_names_the_api_field_and_carries_the_preview_key(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    refused = c.post("/api/policy/apply", {"scope": "g/a", "revision": 1, "min_interval": "12h"})
    error = refused.json()["error"]
    preview = c.post("/api/policy/preview", {"scope": "g/a", "revision": 1, "min_interval": "12h"}).json()
    assert refused.status_code == 403 and error["kind"] == "reduction_not_authorized"
    assert error["reduction_key"] == preview["reduction_key"] and error["revision"] == 1
    assert "authorize_reduction" in error["message"] and "--allow-reduction" not in error["message"]


def test_a_preview_shows_the_effective_floor_each_target_inherits_before_and_after(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")  # agent g/a
    add_automation(store, clock, "y", agent="b")
    floor(store, clock, "g", DAY / 2)
    floor(store, clock, "g/a", DAY)

    def effective(scope: str, interval: str, revision: int) -> dict[str, tuple[str, str]]:
        doc = c.post("/api/policy/preview", {"scope": scope, "revision": revision, "min_interval": interval}).json()
        return {e["scope"]: (e["before"]["floor"], e["after"]["floor"]) for e in doc["effective"]}

    # Disabling the agent rule: it inherits the goal's 12h, not "0".
    assert effective("g/a", "0", 1) == {"g/a": ("1d", "12h")}
    # A goal change: every agent below, each with what it keeps of its own rule.
    assert effective("g", "2d", 1) == {"g/a": ("1d", "2d"), "g/b": ("12h", "2d")}
    assert effective("g", "0", 1) == {"g/a": ("1d", "1d"), "g/b": ("12h", "0")}
    assert effective("g/a/x", "3d", 0) == {"g/a/x": ("1d", "3d")}


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/policy/apply", {"scope": "g/a", "revision": 0, "min_interval": "soon"}, "min_interval"),
        ("/api/policy/apply", {"revision": 0, "min_interval": "1d"}, "scope"),
        ("/api/policy/apply", {"scope": "g/a", "revision": "one", "min_interval": "1d"}, "revision"),
        ("/api/policy/apply", {"scope": "g/a/x/y", "revision": 0, "min_interval": "1d"}, "scope"),
        ("/api/policy/preview", {"scope": "g", "revision": 0, "compute": {"max_turns": -1}}, "compute.max_turns"),
        ("/api/policy/apply", "not json", "body"),
    ],
)
def test_bad_input_is_invalid_input_naming_the_field(store: Store, clock: FixedClock, path: str, body: object, field: str) -> None:
    c = console(store, clock)
    if body == "not json":
        r = c.client.post(path, content=b"{nope", headers=c.headers())
    else:
        r = c.post(path, body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["kind"] == "invalid_input" and r.json()["error"]["field"] == field
    assert "Traceback" not in r.text
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_rules") == [(0,)]


def test_unknown_ids_are_not_found(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    reads = ("/api/automations/nope", "/api/automations/nope/preview", "/api/automations/nope/ticks", "/api/automations/nope/timer")
    for path in (*reads, "/api/turns/nope", "/api/missions/nope"):
        r = c.get(path)
        assert r.status_code == 404 and r.json()["error"]["kind"] == "not_found", path
    for path in ("/api/automations/nope/run", *(f"/api/automations/nope/timer/{a}" for a in ("desired", "observe", "ack"))):
        r = c.post(path, {"reason": "r"})
        assert r.status_code == 404 and r.json()["error"]["kind"] == "not_found", path


def test_automations_list_show_preview_pause_resume_and_lane_reads(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    add_automation(store, clock, "x")
    assert [a["automation"] for a in c.get("/api/automations").json()["automations"]] == ["x"]
    assert c.get("/api/automations/x").json()["automation"] == "x"
    assert c.get("/api/automations/x/preview?next=3").json()["floor_seconds"] == DAY_S
    paused = c.post("/api/automations/x/pause", {"note": "vacation"}).json()
    assert paused["state"] == "paused" and paused["readback"]["detail"] == "vacation (by ops, authenticated)" and paused["changed"]
    resumed = c.post("/api/automations/x/resume").json()
    assert (resumed["state"], resumed["changed"]) == ("active", True)
    assert c.post("/api/automations/x/resume").json()["changed"] is False  # nothing left to resume: nothing written
    Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=T0)
    assert [s["turn_id"] for s in c.get("/api/starts?goal=g").json()["starts"]] == ["t-1"]
    lane = c.get("/api/eligibility?goal=g&agent=a&automation=x").json()
    assert lane["status"] == "interval_wait" and lane["next_eligible_at"] == "2026-12-02T09:00:00Z"
    assert c.get("/api/eligibility?goal=g").json()["error"]["field"] == "agent"
    assert c.get("/api/automations/x/ticks").json() == {"ticks": []}
    assert c.get("/api/hosts").json() == {"hosts": []}
    assert c.get("/api/whoami", token=c.viewer).json() == {"name": "watcher", "role": "viewer"}


def test_an_ask_is_decided_once_by_the_authenticated_principal(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    ask = pending_ask(store, clock)
    [listed] = c.get("/api/asks", token=c.viewer).json()["asks"]
    assert listed["approval_id"] == ask and listed["proposal"] == {"max_turns": 5}
    assert c.post(f"/api/asks/{ask}/approve", token=c.viewer).status_code == 403
    done = c.post(f"/api/asks/{ask}/approve")
    assert done.status_code == 200
    assert done.json()["ask"]["state"] == "approved" and done.json()["mission_status"] == "open"
    assert (done.json()["ask"]["decided_by"], done.json()["ask"]["decided_by_kind"]) == ("ops", "authenticated")
    again = c.post(f"/api/asks/{ask}/deny")
    assert again.status_code == 409 and again.json()["error"]["kind"] == "approval_rejected"
    assert c.get("/api/asks").json() == {"asks": []}


def test_the_api_status_is_the_cli_status(store: Store) -> None:
    from floorgate.admission import Policies, Scope, SystemClock

    system = SystemClock()
    Policies(store, system).configure(Scope.parse("g/a"), min_interval=DAY, expected_revision=0, owner_ref="owner")
    add_automation(store, FixedClock(system.now()), "x")
    Admission(store, system).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=system.now())
    c = console(store)  # the system clock, as the CLI's
    import json

    cli = json.loads(run_cli("status", "--json", db=store.url).stdout)
    api = c.get("/api/status").json()
    keys = ("automation", "state", "detail", "next_eligible_at", "next_fire_at")
    assert [{k: a[k] for k in keys} for a in api["automations"]] == [{k: a[k] for k in keys} for a in cli["automations"]]
    assert api["automations"][0]["next_eligible_at"] is not None


def test_the_api_status_walks_pages_in_status_order_and_filters_by_state_and_goal(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    for aid, goal in (("b1", "b"), ("a2", "a"), ("a1", "a"), ("b2", "b"), ("a3", "a")):
        add_automation(store, clock, aid, goal=goal)
    assert c.post("/api/automations/a3/pause", {"note": "vacation"}).status_code == 200
    walked, after, pages = [], None, 0
    while True:
        page = c.get("/api/status?limit=2" + (f"&after={after}" if after else "")).json()
        pages += 1
        assert len(page["automations"]) <= 2
        walked += [a["automation"] for a in page["automations"]]
        after = page["next"]
        if after is None:
            break
    assert (walked, pages) == (["a1", "a2", "a3", "b1", "b2"], 3)
    made: list[str] = []
    of = Readback.of

    def counted(self: Readback, automation: Any, *a: Any, **kw: Any) -> Any:
        made.append(automation.automation_id)
        return of(self, automation, *a, **kw)

    Readback.of = counted  # type: ignore[method-assign]
    try:
        assert len(c.get("/api/status?limit=2").json()["automations"]) == 2
    finally:
        Readback.of = of  # type: ignore[method-assign]
    assert made == ["a1", "a2"], "a page computes only its own readbacks"
    assert [a["automation"] for a in c.get("/api/status").json()["automations"]] == walked  # one page when it fits
    paused = c.get("/api/status?state=paused").json()
    assert [a["automation"] for a in paused["automations"]] == ["a3"] and paused["next"] is None
    assert [a["automation"] for a in c.get("/api/status?goal=b&limit=1&after=b/b1").json()["automations"]] == ["b2"]
    bad = c.get("/api/status?state=sleepy")
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "state"


def test_metrics_parse_come_from_the_store_and_change_after_an_admission(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    add_automation(store, clock, "x")
    assert c.client.get("/metrics").status_code == 401

    def samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = c.get("/metrics", token=c.viewer).text
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}

    before = samples()
    names = {name for name, _ in before}
    for name in ("floorgate_asks_pending", "floorgate_hosts_alive", "floorgate_build_info", "floorgate_automations"):
        assert name in names, name
    Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="turn-secret-1", trigger_time=T0)
    after = samples()
    admitted = ("floorgate_admissions_total", (("decision", "admitted"), ("reason", "automatic")))
    assert before.get(admitted, 0) == 0 and after[admitted] == 1
    lane = (("agent", "a"), ("automation", "x"), ("goal", "g"))
    every = c.get("/metrics?lanes=all", token=c.viewer).text
    lanes = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(every) for s in f.samples}
    assert lanes[("floorgate_next_eligible_timestamp_seconds", lane)] == (T0.timestamp() + DAY_S)
    assert ("floorgate_timer_drift", lane) in lanes
    assert not any("turn-secret-1" in v for _, labels in after for _, v in labels), "no turn ids as labels"
    # Another console on the same store (another host) reports the same numbers.
    second = TestClient(create_app(Floorgate(store, clock=clock)))
    assert second.get("/metrics", headers=c.headers()).text == c.get("/metrics").text


def test_metrics_hold_a_bounded_number_of_series_with_a_lane_only_while_it_is_in_trouble(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    floor(store, clock, "g/a", DAY)

    def series(query: str = "") -> set[tuple[str, tuple[tuple[str, str], ...]]]:
        text = c.get(f"/metrics{query}", token=c.viewer).text
        return {(s.name, tuple(sorted(s.labels.items()))) for f in text_string_to_metric_families(text) for s in f.samples}

    add_automation(store, clock, "x0")
    one = series()
    for i in range(1, 12):
        add_automation(store, clock, f"x{i}")
    many = series()
    assert len(many) == len(one), "healthy lanes add no series"
    assert ("floorgate_automations", (("state", "active"),)) in many
    latched = Missions(store, clock).open("x3", "g", "a").mission_id
    Missions(store, clock).set_latch(latched, "usage unreported")
    trouble = series()
    assert trouble - many == {("floorgate_accounting_latch_active", (("agent", "a"), ("automation", "x3"), ("goal", "g")))}
    every = series("?lanes=all")
    assert sum(1 for name, _ in every if name == "floorgate_timer_drift") == 12  # the opt-in: every lane


def test_the_openapi_schema_lists_every_endpoint(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    doc = c.client.get("/api/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    assert {(ep.path, ep.method.lower()) for ep in ENDPOINTS} == {(p, m) for p, ops in doc["paths"].items() for m in ops}
    issue_list = {
        ("/api/automations/{automation}/run", "post"),
        ("/api/automations/{automation}/timer", "get"),
        ("/api/automations/{automation}/timer/desired", "post"),
        ("/api/automations/{automation}/timer/observe", "post"),
        ("/api/automations/{automation}/timer/ack", "post"),
        ("/api/automations/{automation}/ticks", "get"),
        ("/api/missions", "get"),
        ("/api/missions/{mission_id}", "get"),
        ("/api/turns/{turn_id}", "get"),
        ("/api/events", "get"),
    }
    assert issue_list <= {(p, m) for p, ops in doc["paths"].items() for m in ops}
    run = doc["paths"]["/api/automations/{automation}/run"]["post"]
    assert "202" in run["responses"] and run["requestBody"]["content"]["application/json"]["schema"]["required"] == ["reason"]


def test_owner_add_prints_the_token_once_and_stores_only_its_hash(store: Store) -> None:
    import json

    out = run_cli("owner", "add", "ops-lead", "--role", "viewer", "--json", db=store.url)
    assert out.returncode == 0, out.stderr
    token = json.loads(out.stdout)["token"]
    stored = raw_sql(store, "SELECT name, role, token_sha256 FROM fg_principals")
    assert stored[0][:2] == ("ops-lead", "viewer")
    assert token.split(".", 1)[1] not in repr(stored) and re.fullmatch(r"[0-9a-f]{64}", stored[0][2])
    listed = run_cli("owner", "list", db=store.url).stdout
    assert "ops-lead" in listed and token not in listed
    c = console(store)
    assert c.get("/api/whoami", token=token).json()["name"] == "ops-lead"
    signed = _no_token(FLOORGATE_TOKEN=c.owner)  # the store has owners now: owner writes carry a token
    assert run_cli("owner", "add", "ops-lead", db=store.url, env=signed).returncode == 2  # one principal per name
    assert run_cli("owner", "revoke", "ops-lead", db=store.url, env=signed).returncode == 0
    assert c.get("/api/whoami", token=token).status_code == 401


def test_an_apply_is_confirmed_only_when_the_readback_shows_the_written_revision_and_floor(store: Store, clock: FixedClock) -> None:
    from dataclasses import replace

    c = console(store, clock)
    applied = c.fg.floors.apply(Scope.parse("g/a"), revision=0, min_interval=DAY, principal=c.fg.principals.get("ops"))
    assert applied.confirmed
    assert applied.readback.rule is not None
    stale = replace(applied.readback, rule=applied.readback.rule.model_copy(update={"revision": 9}))
    other = replace(applied.readback, rule=applied.readback.rule.model_copy(update={"min_interval": DAY / 2}))
    for readback in (stale, other, replace(applied.readback, rule=None)):
        assert not replace(applied, readback=readback).confirmed


def test_many_requests_hold_a_bounded_number_of_store_connections(store: Store, clock: FixedClock) -> None:
    # Each TestClient request runs on a new event loop; the store's per-thread connections must
    # not grow with them (they did with the loop's own thread pool, until the pool ran dry).
    from floorgate.scheduler.console.workers import THREADS

    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    for _ in range(3 * THREADS + 5):
        assert c.get("/api/status").status_code == 200
    assert 1 <= len(store._hot) <= THREADS


def test_metrics_count_webhook_deliveries_by_state_dead_ones_included(store: Store, clock: FixedClock) -> None:
    from floorgate.admission.events import MAX_ATTEMPTS

    c = console(store, clock)
    events = c.fg.notify.events
    hook, _ = events.add_webhook("http://127.0.0.1:9/hook", "ask_pending")
    pending_ask(store, clock, "x")
    pending_ask(store, clock, "y")

    def by_state() -> dict[str, float]:
        text = c.get("/metrics").text
        return {
            s.labels["state"]: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "floorgate_webhook_deliveries"
        }

    assert by_state() == {"pending": 2.0, "delivered": 0.0, "dead": 0.0}
    first, _second = events.claim_due()
    for _ in range(MAX_ATTEMPTS):
        events.record_attempt(hook.webhook_id, first.event.event_id, status=500, error=None)
    assert by_state() == {"pending": 1.0, "delivered": 0.0, "dead": 1.0}


def test_an_owner_adds_lists_retries_and_removes_a_webhook_through_the_api(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    body = {"url": "http://127.0.0.1:9/hook", "events": "ask_pending,automation_held", "format": "slack"}
    refused = c.post("/api/webhooks", body, token=c.viewer)  # a webhook's URL can carry a credential: owners only
    assert refused.status_code == 403 and raw_sql(store, "SELECT COUNT(*) FROM fg_webhooks") == [(0,)], refused.text
    added = c.post("/api/webhooks", body)
    assert added.status_code == 200, added.text
    doc = added.json()
    hook_id, secret = doc["webhook_id"], doc["secret"]
    assert secret and doc["format"] == "slack" and doc["events"] == ["ask_pending", "automation_held"], doc
    listed = c.get("/api/webhooks").json()["webhooks"]
    assert [w["webhook_id"] for w in listed] == [hook_id]
    assert secret not in c.get("/api/webhooks").text  # the secret is shown once, at add
    # The CLI sees the same subscription (one service under both surfaces).
    assert json.loads(run_cli("notify", "list", "--json", db=store.url).stdout)["webhooks"][0]["webhook_id"] == hook_id
    retried = c.post(f"/api/webhooks/{hook_id}/retry")
    assert retried.status_code == 200 and retried.json() == {"webhook_id": hook_id, "retried": 0}
    removed = c.post(f"/api/webhooks/{hook_id}/remove")
    assert removed.status_code == 200 and removed.json() == {"removed": hook_id}
    assert c.get("/api/webhooks").json()["webhooks"] == []
    again = c.post(f"/api/webhooks/{hook_id}/remove")
    assert again.status_code == 404 and hook_id in again.json()["error"]["message"], again.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"events": "ask_pending"}, "url"),
        ({"url": "ftp://example.invalid/x", "events": "ask_pending"}, "url"),
        ({"url": "http://127.0.0.1:9/hook"}, "events"),
        ({"url": "http://127.0.0.1:9/hook", "events": "no_such_kind"}, "events"),
        ({"url": "http://127.0.0.1:9/hook", "events": "ask_pending", "format": "xml"}, "format"),
    ],
    ids=["no-url", "not-http", "no-events", "unknown-event", "unknown-format"],
)
def test_a_bad_webhook_is_refused_naming_the_field_and_nothing_is_written(store: Store, clock: FixedClock, body, field) -> None:  # type: ignore[no-untyped-def]
    c = console(store, clock)
    r = c.post("/api/webhooks", body)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["field"] == field, r.json()
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_webhooks") == [(0,)]


def test_metrics_count_turns_in_flight_by_phase(store: Store, clock: FixedClock) -> None:
    from test_executor import crashed

    c = console(store, clock)
    add_automation(store, clock, "x")
    add_automation(store, clock, "y", agent="b")

    def in_flight() -> dict[str, float]:
        text = c.get("/metrics").text
        return {
            s.labels["phase"]: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "floorgate_turns_in_flight"
        }

    assert in_flight() == {"journaled": 0.0, "confirmed": 0.0, "launched": 0.0}
    crashed(store, clock, "t-waiting", "elsewhere:1:runner")  # admitted, its host not started yet
    crashed(store, clock, "t-running", "elsewhere:1:runner", automation="y", agent="b", phase="launched")
    assert in_flight() == {"journaled": 1.0, "confirmed": 0.0, "launched": 1.0}


def _no_token(**extra: str) -> dict[str, str]:
    """This environment without any owner credential of the caller's (plus ``extra``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_TOKEN")}
    return {**env, "HOME": "/nonexistent", **extra}
