"""Whole automations over the console API on both backends: PUT creates or changes one at exactly
the revision sent (the same body twice writes once), refuses bad input as the CLI does with one
error naming the field and nothing written, carries an external id and labels; DELETE removes it."""

from __future__ import annotations

import sys

import pytest
from basics import raw_sql

from floorgate.admission import FixedClock, Store

from console_kit import console

BODY = {
    "goal": "g",
    "agent": "a",
    "schedule": "DTSTART:20261201T090000Z RRULE:FREQ=DAILY",
    "command": [sys.executable, "-c", "pass"],
    "external_id": "fleet-7",
    "labels": {"team": "search", "tier": "gold"},
}


def _rows(store: Store) -> list[tuple]:  # type: ignore[type-arg]
    return raw_sql(store, "SELECT * FROM fg_automations ORDER BY automation_id")


def test_put_creates_then_is_idempotent_then_changes_at_the_exact_revision(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    r = c.client.put("/api/automations/nightly", json=BODY, headers=c.headers())
    assert r.status_code == 201, r.text
    doc = r.json()
    assert doc["result"] == "created" and doc["revision"] == 1
    assert doc["external_id"] == "fleet-7" and doc["labels"] == {"team": "search", "tier": "gold"}
    got = c.get("/api/automations/nightly").json()
    assert got["spec"]["labels"] == {"team": "search", "tier": "gold"}

    before = _rows(store)
    again = c.client.put("/api/automations/nightly", json=BODY, headers=c.headers())
    assert again.status_code == 200 and again.json()["result"] == "unchanged"
    assert _rows(store) == before  # nothing written, not even the revision

    changed = {**BODY, "schedule": "DTSTART:20261201T100000Z RRULE:FREQ=DAILY", "revision": 1}
    r = c.client.put("/api/automations/nightly", json=changed, headers=c.headers())
    assert r.status_code == 200 and r.json()["result"] == "changed" and r.json()["revision"] == 2

    stale = {**BODY, "schedule": "DTSTART:20261201T110000Z RRULE:FREQ=DAILY", "revision": 1}
    before = _rows(store)
    r = c.client.put("/api/automations/nightly", json=stale, headers=c.headers())
    assert r.status_code == 409, r.text
    err = r.json()["error"]
    assert err["kind"] == "revision_conflict" and err["current_revision"] == 2 and "/api/automations/nightly" in err["message"]
    assert _rows(store) == before

    missing = {k: v for k, v in stale.items() if k != "revision"}
    r = c.client.put("/api/automations/nightly", json=missing, headers=c.headers())
    assert r.status_code == 422 and r.json()["error"]["field"] == "revision"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"schedule": "every blue moon"}, "schedule", id="bad-schedule"),
        pytest.param({"schedule": "DTSTART:20200101T090000Z RRULE:FREQ=DAILY;COUNT=1"}, "schedule", id="never-fires-again"),
        pytest.param({"command": "/bin/true"}, "command", id="command-not-a-list"),
        pytest.param({"command": ["/no/such/program"]}, "command", id="program-missing"),
        pytest.param({"command": ["./triage.sh"]}, "cwd", id="relative-program-without-cwd"),
        pytest.param({"goal": None}, "goal", id="goal-missing"),
        pytest.param({"agent": "bad agent"}, "agent", id="agent-not-an-id"),
        pytest.param({"timeout": "forever"}, "timeout", id="bad-timeout"),
        pytest.param({"timer": "systemd"}, "timer", id="unknown-timer"),
        pytest.param({"env": ["FLOORGATE_TOKEN"]}, "env", id="credential-passed-through"),
        pytest.param({"labels": {"team": 3}}, "labels.team", id="label-not-text"),
        pytest.param({"labels": {"bad name": "x"}}, "labels.bad name", id="label-name-not-an-id"),
        pytest.param({"external_id": "has space"}, "external_id", id="bad-external-id"),
        pytest.param({"colour": "red"}, "colour", id="unknown-field"),
    ],
)
def test_put_refuses_bad_input_with_one_line_naming_the_field_and_writes_nothing(
    store: Store, clock: FixedClock, change: dict, field: str
) -> None:  # type: ignore[type-arg]
    c = console(store, clock)
    body = {k: v for k, v in {**BODY, **change}.items() if v is not None}
    r = c.client.put("/api/automations/x", json=body, headers=c.headers())
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["kind"] == "invalid_input" and err["field"] == field and "\n" not in err["message"]
    assert _rows(store) == []


def test_delete_removes_and_a_viewer_can_neither_put_nor_delete(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    assert c.client.put("/api/automations/x", json=BODY, headers=c.headers(c.viewer)).status_code == 403
    assert _rows(store) == []
    assert c.client.put("/api/automations/x", json=BODY, headers=c.headers()).status_code == 201
    assert c.client.delete("/api/automations/x", headers=c.headers(c.viewer)).status_code == 403
    r = c.client.delete("/api/automations/x", headers=c.headers())
    assert r.status_code == 200 and r.json() == {"removed": "x", "delete_by_hand": None, "running": []}
    assert _rows(store) == []
    assert c.client.delete("/api/automations/x", headers=c.headers()).status_code == 404


def test_openapi_documents_put_and_delete(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    doc = c.get("/api/openapi.json").json()
    ops = doc["paths"]["/api/automations/{automation}"]
    assert {"get", "put", "delete"} <= set(ops)
    props = ops["put"]["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert {"labels", "external_id", "revision", "command"} <= set(props) and "201" in ops["put"]["responses"]
