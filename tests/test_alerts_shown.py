"""Alerts visible beyond webhooks, on SQLite and PostgreSQL with a fake clock: each limit's latest
``budget_threshold`` / ``budget_exhausted`` in its current period shows in the readback
(``status`` text and JSON, ``automation show``), on the console's dashboard and automation page,
and in ``/metrics`` (a counter by event and limit kind; the per-lane series only behind
``?lanes=all``); the next period shows none until its own alerts come."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store
from floorgate.admission.events import EventKind
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window
from floorgate.scheduler.app.readback import Readback
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.views.present import readback_doc
from floorgate.scheduler.views.present_automation import detail_text
from floorgate.scheduler.views.present_status import status_text

from console_kit import console, sign_in
from helpers import add_automation, floor

T0 = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
HOUR = timedelta(hours=1)


def _spend(store: Store, clock: FixedClock, change: LimitsChange, starts: int) -> None:
    add_automation(store, clock)
    floor(store, clock, "g", timedelta(seconds=1))  # today's admission records starts only under a floor
    Policies(store, clock).configure(Scope.parse("g/a"), expected_revision=0, owner_ref="o", limits=change)
    for i in range(starts):
        at = T0 + i * HOUR
        clock.set(at)
        assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id=f"t{i}", trigger_time=at).admitted
    clock.set(T0 + starts * HOUR)


TOKENS = LimitsChange(budget_tokens=30_000, per=parse_window("1d"), estimate_tokens=10_000)  # alerts at 50/80/100


def detail_text_of(store: Store, clock: FixedClock) -> str:
    return detail_text(Floorgate(store, clock=clock).automations.show("x", fires=1, ticks=1))


THRESHOLD = "budget_threshold: 50% of 30k tokens per 1d at g/a reached at 2026-12-01T10:00:00Z (used and held 20000 tokens)"


def test_the_latest_threshold_shows_in_status_text_and_json_and_automation_show(store: Store, clock: FixedClock) -> None:
    _spend(store, clock, TOKENS, 2)  # 20k of 30k held: the 50% threshold, at the second start
    rb = Readback(store, clock).automation("x")
    [doc] = readback_doc(rb)["limits"]
    assert doc["alert"] is not None
    assert (doc["alert"]["event"], doc["alert"]["percent"], doc["alert"]["used"], doc["alert"]["at"]) == (
        "budget_threshold", 50, 20_000, "2026-12-01T10:00:00Z",
    )  # fmt: skip
    assert f"  x: alert {THRESHOLD}" in status_text(Readback(store, clock).overview())
    assert f"  alert:          {THRESHOLD}" in detail_text_of(store, clock)


def test_a_spent_count_shows_budget_exhausted_and_the_next_period_shows_none(store: Store, clock: FixedClock) -> None:
    _spend(store, clock, LimitsChange(max_starts=2, per=parse_window("day@Europe/Berlin")), 2)
    [doc] = readback_doc(Readback(store, clock).automation("x"))["limits"]
    assert doc["alert"] is not None and doc["alert"]["event"] == EventKind.BUDGET_EXHAUSTED.value
    text = status_text(Readback(store, clock).overview())
    assert "  x: alert budget_exhausted: 2 starts per day@Europe/Berlin at g/a spent at 2026-12-01T10:00:00Z (2 starts)" in text
    clock.set(datetime(2026, 12, 1, 23, tzinfo=timezone.utc))  # midnight in Berlin: a new period
    [doc] = readback_doc(Readback(store, clock).automation("x"))["limits"]
    assert doc["alert"] is None and ": alert " not in status_text(Readback(store, clock).overview())


def test_alerts_show_on_the_console_and_in_metrics_with_bounded_series(store: Store, clock: FixedClock) -> None:
    _spend(store, clock, TOKENS, 2)
    c = console(store, clock)
    metrics = c.get("/metrics").text
    assert 'floorgate_budget_alerts_total{event="budget_threshold",limit="tokens"} 1.0' in metrics
    assert "floorgate_limit_alert_timestamp_seconds{" not in metrics  # per lane: only when asked for
    every = c.get("/metrics?lanes=all").text
    found = re.search(r'floorgate_limit_alert_timestamp_seconds\{[^}]*automation="x"[^}]*event="budget_threshold"[^}]*\} (\S+)', every)
    assert found is not None and float(found.group(1)) == (T0 + HOUR).timestamp()
    api = c.get("/api/automations/x").json()
    assert [x["alert"]["percent"] for x in api["limits"]] == [50]
    sign_in(c)
    for page in (c.client.get("/dashboard").text, c.client.get("/automations/x").text):
        alert = re.search(
            r'<span class="limit-alert" data-event="budget_threshold" data-percent="50">(.*?)</span>(?:<small|</li>)', page, re.S
        )
        assert alert is not None and "(used and held 20000 tokens)" in alert.group(1)
        assert 'data-testid="limit-alert-at"' in page
