"""Events and webhook notifications: an event commits with the change it describes (and only with
it), and a real local HTTP receiver gets each subscribed event signed, with an id to deduplicate
on; a failing receiver is retried with backoff and its failure is visible in the delivery log."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from basics import raw_sql

from floorgate.admission import Approvals, Automations, FixedClock, Missions, Policies, RevisionConflict, Scope, Store
from floorgate.admission.automations import AutomationState, HoldKind
from floorgate.admission.events import EVENT_ID_HEADER, SIGNATURE_HEADER, EventKind, Events, signature, verify
from floorgate.admission.missions import MissionStatus
from floorgate.scheduler.app.notify import NotifyService

from cli import run_cli
from helpers import Receiver, add_automation


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def kinds(store: Store) -> list[str]:
    return [row[0] for row in raw_sql(store, "SELECT kind FROM fg_events ORDER BY seq")]


def test_an_event_commits_with_its_change_and_not_without_it(store: Store, clock: FixedClock) -> None:
    approvals = Approvals(store, clock)
    # A unit of work that fails after the ask: neither the ask nor its event is left.
    with pytest.raises(RuntimeError), store.unit() as unit:
        approvals.ask("m-rolled", "g/a/x", "max_turns", 3, unit=unit)
        raise RuntimeError("the caller's next step failed")
    assert raw_sql(store, "SELECT count(*) FROM fg_approvals") == [(0,)]
    assert kinds(store) == []
    # The same ask committed: exactly one ask_pending event, describing it, at the clock's time.
    mission = Missions(store, clock).open("x", "g", "a").mission_id
    ask = approvals.ask(mission, "g/a/x", "max_turns", 3)
    (event,) = Events(store, clock).list()
    assert event.kind is EventKind.ASK_PENDING
    assert event.event_id.startswith("evt-") and event.subject == mission
    assert event.occurred_at == clock.now() and event.occurred_at.tzinfo is not None
    assert event.data["approval_id"] == ask.approval_id and event.data["extension"] == 3
    # A floor write that loses its revision check writes no floor_changed; one that wins does.
    policies = Policies(store, clock)
    with pytest.raises(RevisionConflict):
        policies.configure(Scope.parse("g"), min_interval=timedelta(hours=1), expected_revision=5, owner_ref="o")
    assert kinds(store) == ["ask_pending"]
    policies.configure(Scope.parse("g"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    assert kinds(store) == ["ask_pending", "floor_changed"]
    assert Events(store, clock).list(EventKind.FLOOR_CHANGED)[0].data["after_us"] == 3_600_000_000
    approvals.decide(ask.approval_id, False)
    assert kinds(store) == ["ask_pending", "floor_changed", "ask_decided", "mission_stuck"]


def test_a_stuck_mission_and_a_set_latch_are_events_once(store: Store, clock: FixedClock) -> None:
    missions = Missions(store, clock)
    one = missions.open("x", "g", "a").mission_id
    # Rolled back with the unit: no event.
    with pytest.raises(RuntimeError), store.unit() as unit:
        missions.set_latch(one, "usage unreported", unit=unit)
        missions.settle(one, MissionStatus.STUCK, "max_turns reached", unit=unit)
        raise RuntimeError("the caller's next step failed")
    assert kinds(store) == []
    missions.set_latch(one, "usage unreported")
    missions.set_latch(one, "usage unreported")  # unchanged: no second event
    missions.set_latch(one, None)  # cleared: not a latch_set
    missions.settle(one, MissionStatus.STUCK, "max_turns reached")
    missions.settle(one, MissionStatus.STUCK, "again")  # already settled: nothing changes, no event
    two = missions.open("y", "g", "a").mission_id
    missions.settle(two, MissionStatus.SUCCEEDED, "completed")
    assert kinds(store) == ["latch_set", "mission_stuck"]
    latch, stuck = Events(store, clock).list()
    assert latch.data == {"mission_id": one, "reason": "usage unreported"}
    assert stuck.data == {"mission_id": one, "reason": "max_turns reached"} and stuck.subject == one


def test_a_receiver_gets_a_signed_deduplicable_event_for_an_ask_and_a_hold(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    notify = NotifyService(store, clock)
    webhook, secret = notify.events.add_webhook(receiver.url, "ask_pending,automation_held")
    add_automation(store, clock, "x")
    Approvals(store, clock).ask("m-1", "g/a/x", "max_turns", 2)
    Automations(store, clock).set_state("x", AutomationState.HELD, "mission m-1 is stuck", hold_kind=HoldKind.MISSION_STUCK)
    Policies(store, clock).configure(
        Scope.parse("g"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o"
    )  # not subscribed

    report = notify.deliver()
    assert (report.attempted, report.delivered, report.failed) == (2, 2, 0)
    assert [d["kind"] for d in receiver.docs()] == ["ask_pending", "automation_held"]
    stored = {e.event_id for e in Events(store, clock).list() if e.kind is not EventKind.FLOOR_CHANGED}
    for headers, body in receiver.got:
        doc = json.loads(body)
        assert headers[SIGNATURE_HEADER] == signature(secret, body) and verify(secret, body, headers[SIGNATURE_HEADER])
        assert headers[EVENT_ID_HEADER] == doc["id"]
        assert doc["occurred_at"].endswith("Z")
    assert {h[EVENT_ID_HEADER] for h, _ in receiver.got} == stored
    assert receiver.docs()[1]["data"] == {"automation_id": "x", "hold_kind": "mission_stuck", "note": "mission m-1 is stuck"}
    # Delivered once: delivering again sends nothing; the log says so.
    assert notify.deliver().attempted == 0
    (listed,) = notify.events.webhooks()
    assert (listed.webhook_id, listed.delivered, listed.pending, listed.last_status) == (webhook.webhook_id, 2, 0, 200)


def test_a_failing_receiver_is_retried_with_backoff_and_the_failure_is_visible(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    notify = NotifyService(store, clock)
    notify.events.add_webhook(receiver.url, ["ask_pending"])
    Approvals(store, clock).ask("m-1", "g/a/x", "max_turns", 2)
    receiver.status = 500
    assert notify.deliver().failed == 1
    (listed,) = notify.events.webhooks()
    assert (listed.pending, listed.failing, listed.delivered, listed.last_status, listed.last_error) == (1, 1, 0, 500, "http_status_500")
    (delivery,) = notify.events.deliveries()
    assert delivery.attempts == 1 and delivery.next_attempt_at == clock.now() + timedelta(seconds=30)
    assert notify.deliver().attempted == 0  # backing off: not due yet
    clock.advance(timedelta(seconds=30))
    assert notify.deliver().failed == 1
    (delivery,) = notify.events.deliveries()
    assert delivery.attempts == 2 and delivery.next_attempt_at == clock.now() + timedelta(seconds=60)
    receiver.status = 204
    clock.advance(timedelta(seconds=60))
    assert notify.deliver().delivered == 1
    (delivery,) = notify.events.deliveries()
    assert (delivery.state.value, delivery.attempts, delivery.last_status) == ("delivered", 3, 204)
    # Three attempts of one event: the same id each time, so the receiver can drop the repeats.
    assert len(receiver.got) == 3 and len({h[EVENT_ID_HEADER] for h, _ in receiver.got}) == 1
    assert notify.events.webhooks()[0].failing == 0


def test_an_unreachable_receiver_is_logged_not_lost(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    url = receiver.url
    receiver.close()  # nothing listens there now
    notify = NotifyService(store, clock)
    notify.events.add_webhook(url, "ask_pending")
    Approvals(store, clock).ask("m-1", "g/a/x", "max_turns", 2)
    assert notify.deliver().failed == 1
    (delivery,) = notify.events.deliveries()
    assert delivery.state.value == "pending" and delivery.last_status is None and delivery.last_error == "connect_failed"


def test_the_signature_verifies_only_with_the_secret_over_the_exact_body() -> None:
    body = b'{"id":"evt-1","kind":"ask_pending"}'
    header = signature("fgs_secret", body)
    assert header.startswith("sha256=") and len(header) == len("sha256=") + 64
    assert verify("fgs_secret", body, header)
    assert not verify("fgs_other", body, header)
    assert not verify("fgs_secret", body + b" ", header)
    assert not verify("fgs_secret", body, None)


def test_webhook_input_is_refused_naming_the_field(store: Store, clock: FixedClock) -> None:
    events = Events(store, clock)
    with pytest.raises(ValueError, match=r"^events: 'ask_sent' is not an event kind"):
        events.add_webhook("http://127.0.0.1:9/x", "ask_sent")
    with pytest.raises(ValueError, match=r"^url: "):
        events.add_webhook("ftp://example/x", "ask_pending")
    assert events.webhooks() == []


def test_notify_commands_add_list_deliver_and_remove(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    added = run_cli("notify", "add", receiver.url, "--events", "ask_pending,automation_held", "--json", db=store.url)
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    secret, webhook_id = doc["secret"], doc["webhook_id"]
    assert doc["events"] == ["ask_pending", "automation_held"] and secret.startswith("fgs_")
    listed = json.loads(run_cli("notify", "list", "--json", db=store.url).stdout)["webhooks"]
    assert [w["webhook_id"] for w in listed] == [webhook_id] and "secret" not in listed[0]  # printed once, at add

    mission = Missions(store, clock).open("x", "g", "a").mission_id
    Approvals(store, clock).ask(mission, "g/a/x", "max_turns", 2)
    receiver.status = 500
    delivered = run_cli("notify", "deliver", "--json", db=store.url)
    assert delivered.returncode == 0 and json.loads(delivered.stdout) == {"attempted": 1, "delivered": 0, "failed": 1, "hosts_lost": 0}
    (listed_row,) = json.loads(run_cli("notify", "list", "--json", db=store.url).stdout)["webhooks"]
    assert (listed_row["failing"], listed_row["last_status"], listed_row["last_error"]) == (1, 500, "http_status_500")
    ((headers, body),) = receiver.got
    assert verify(secret, body, headers[SIGNATURE_HEADER])

    bad = run_cli("notify", "add", receiver.url, "--events", "nope", db=store.url)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [bad.stderr.strip()] and "events: 'nope'" in bad.stderr
    assert run_cli("notify", "remove", webhook_id, db=store.url).returncode == 0
    assert json.loads(run_cli("notify", "list", "--json", db=store.url).stdout)["webhooks"] == []
    assert run_cli("notify", "remove", webhook_id, db=store.url).returncode != 0


def test_a_running_host_delivers_events_on_its_own(store: Store, clock: FixedClock, receiver: Receiver, tmp_path: Path) -> None:
    from floorgate.scheduler.app.root import Floorgate
    from floorgate.scheduler.runtime.host import RuntimeConfig

    _, secret = Events(store, clock).add_webhook(receiver.url, "floor_changed")
    Policies(store, clock).configure(Scope.parse("g"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", poll=timedelta(milliseconds=100)))
    host.start()
    try:
        deadline = time.monotonic() + 15
        while not receiver.got and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        host.stop()
    ((headers, body),) = receiver.got
    assert json.loads(body)["kind"] == "floor_changed" and verify(secret, body, headers[SIGNATURE_HEADER])
    assert Events(store, clock).webhooks()[0].delivered == 1


# -- observed events: host_lost, timer_drift ---------------------------------------------------
def _beat(store: Store, clock: FixedClock, host_id: str = "host-1") -> None:
    from floorgate.admission.liveness import HostBeat, HostBeats

    now = clock.now()
    HostBeats(store).started(
        HostBeat(
            host_id=host_id, hostname="box", pid=4242, version="t", started_at=now, beat_at=now, poll=timedelta(seconds=5), stopped_at=None
        )
    )


def test_a_stale_heartbeat_is_one_signed_host_lost_event_per_loss(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    from floorgate.admission.liveness import HostBeats

    notify = NotifyService(store, clock)
    _, secret = notify.events.add_webhook(receiver.url, "host_lost")
    _beat(store, clock)
    _beat(store, clock, "host-2")
    HostBeats(store).stopped("host-2", clock.now())  # a clean stop is not a loss
    assert notify.deliver().hosts_lost == 0  # alive: nothing to say
    clock.advance(timedelta(minutes=1))  # three missed 5 s polls and the slack
    first = notify.deliver()
    assert (first.hosts_lost, first.delivered) == (1, 1)
    ((headers, body),) = receiver.got
    doc = json.loads(body)
    assert verify(secret, body, headers[SIGNATURE_HEADER]) and headers[EVENT_ID_HEADER] == doc["id"]
    assert (doc["kind"], doc["subject"], doc["data"]["pid"]) == ("host_lost", "host-1", 4242)
    # Another observer (a second deliverer, a rerun) sees the same loss: no second event.
    assert NotifyService(store, clock).deliver().hosts_lost == 0
    assert kinds(store).count("host_lost") == 1
    # The host comes back and is lost again: a new loss, a new event.
    HostBeats(store).beat("host-1", clock.now())
    assert notify.deliver().hosts_lost == 0
    clock.advance(timedelta(minutes=1))
    assert notify.deliver().hosts_lost == 1 and kinds(store).count("host_lost") == 2


def test_an_owner_reported_timer_that_differs_is_one_timer_drift_event_per_episode(
    store: Store, clock: FixedClock, receiver: Receiver
) -> None:
    from test_timers import add

    from floorgate.scheduler.app.timers import TimerService

    notify = NotifyService(store, clock)
    _, secret = notify.events.add_webhook(receiver.url, "timer_drift")
    timers = TimerService(store, clock=clock)
    automation = add(store, clock, "ext", "DTSTART:20261101T000500Z RRULE:FREQ=DAILY", "external")
    desired = timers.apply(automation).desired
    clock.advance(timedelta(seconds=1))
    timers.observe(automation, current_rrule=desired)  # the app holds what was applied
    assert "timer_drift" not in kinds(store)
    moved = "DTSTART:20261101T063000Z\nRRULE:FREQ=DAILY"
    for _ in range(3):  # the same drift read again and again: one episode
        timers.observe(automation, current_rrule=moved)
    assert kinds(store).count("timer_drift") == 1
    assert notify.deliver().delivered == 1
    ((headers, body),) = receiver.got
    doc = json.loads(body)
    assert verify(secret, body, headers[SIGNATURE_HEADER])
    assert (doc["kind"], doc["subject"], doc["data"]["observed"]) == ("timer_drift", "ext", moved)
    timers.observe(automation, current_rrule="DTSTART:20261101T070000Z\nRRULE:FREQ=DAILY")  # it drifts elsewhere: a new episode
    assert kinds(store).count("timer_drift") == 2


# -- formats and dead letters ------------------------------------------------------------------
def test_a_slack_webhook_gets_a_signed_text_message(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    added = run_cli("notify", "add", receiver.url, "--events", "ask_pending", "--format", "slack", "--json", db=store.url)
    assert added.returncode == 0, added.stderr
    secret = json.loads(added.stdout)["secret"]
    approval = Approvals(store, clock).ask("m-1", "g/a/x", "max_turns", 2).approval_id
    assert NotifyService(store, clock).deliver().delivered == 1
    ((headers, body),) = receiver.got
    doc = json.loads(body)
    assert list(doc) == ["text"] and doc["text"].startswith("floorgate ask_pending: ") and approval in doc["text"]
    assert headers[EVENT_ID_HEADER] in doc["text"] and verify(secret, body, headers[SIGNATURE_HEADER])
    (row,) = json.loads(run_cli("notify", "list", "--json", db=store.url).stdout)["webhooks"]
    assert row["format"] == "slack"
    bad = run_cli("notify", "add", receiver.url, "--events", "ask_pending", "--format", "xml", db=store.url)
    assert bad.returncode == 2 and "--format" in bad.stderr


def test_a_delivery_failing_max_attempts_is_dead_listed_and_can_be_retried(
    store: Store, wall_clock: FixedClock, receiver: Receiver
) -> None:
    from floorgate.admission.events import MAX_ATTEMPTS, backoff

    # `notify retry` below runs as a process on the system clock: the test's clock starts there too
    # (a clock fixed at T0 would leave the retried delivery due only in the test's future).
    clock = wall_clock

    notify = NotifyService(store, clock)
    webhook, _ = notify.events.add_webhook(receiver.url, "ask_pending")
    Approvals(store, clock).ask("m-1", "g/a/x", "max_turns", 2)
    receiver.status = 503
    for attempt in range(1, MAX_ATTEMPTS + 1):
        assert notify.deliver().failed == 1, attempt
        clock.advance(backoff(attempt))
    (delivery,) = notify.events.deliveries()
    assert (delivery.state.value, delivery.attempts) == ("dead", MAX_ATTEMPTS)
    clock.advance(timedelta(days=1))
    assert notify.deliver().attempted == 0  # dead: never retried on its own ...
    (row,) = json.loads(run_cli("notify", "list", "--json", db=store.url).stdout)["webhooks"]
    assert (row["dead"], row["pending"], row["last_error"]) == (1, 0, "http_status_503")  # ... and never hidden
    (event,) = json.loads(run_cli("notify", "events", "--json", db=store.url).stdout)["events"]
    assert [(d["state"], d["attempts"]) for d in event["deliveries"]] == [("dead", MAX_ATTEMPTS)]
    assert "dead(12)" in run_cli("notify", "events", db=store.url).stdout
    retried = run_cli("notify", "retry", webhook.webhook_id, "--json", db=store.url)
    assert retried.returncode == 0 and json.loads(retried.stdout)["retried"] == 1
    receiver.status = 200
    assert notify.deliver().delivered == 1
    assert notify.events.webhooks()[0].dead == 0


def test_the_webhook_secret_is_printed_once_and_the_store_file_is_owner_only(tmp_path: Path, receiver: Receiver) -> None:
    import os
    import stat

    db = tmp_path / "new.db"
    added = run_cli("notify", "add", receiver.url, "--events", "ask_pending", db=f"sqlite:///{db}")
    assert added.returncode == 0, added.stderr
    secret = added.stdout.strip().splitlines()[-1]
    assert secret.startswith("fgs_")
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600  # the secret sits in a file only its owner reads
    for argv in (("notify", "list"), ("notify", "list", "--json"), ("notify", "events", "--json")):
        shown = run_cli(*argv, db=f"sqlite:///{db}")
        assert shown.returncode == 0 and secret not in shown.stdout + shown.stderr, argv


def test_floorgate_serve_delivers_on_its_own_so_the_last_host_dying_is_reported(sqlite_db: str, receiver: Receiver, tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys
    import urllib.request

    from floorgate.admission import SystemClock, open_store
    from floorgate.admission.liveness import HostBeat, HostBeats
    from floorgate.scheduler.app.root import Floorgate

    from helpers import wait_for

    clock = SystemClock()
    with open_store(sqlite_db) as store:
        _, secret = Events(store, clock).add_webhook(receiver.url, "host_lost")
        _, token = Floorgate(store, clock=clock).principals.add("ops", "owner")
        then = clock.now() - timedelta(hours=1)  # the only host: silent for an hour, never stopped
        HostBeats(store).started(
            HostBeat(
                host_id="h-gone",
                hostname="box",
                pid=1,
                version="t",
                started_at=then,
                beat_at=then,
                poll=timedelta(seconds=5),
                stopped_at=None,
            )
        )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = [sys.executable, "-m", "floorgate", "--db", sqlite_db, "serve", "--port", str(port), "--deliver-every", "1s"]
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
    try:
        wait_for(lambda: receiver.got, what=f"the console's delivery round ({tmp_path / 'serve.log'})")
        request = urllib.request.Request(f"http://127.0.0.1:{port}/api/whoami", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert json.loads(answer.read())["name"] == "ops"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    ((headers, body),) = receiver.got
    assert json.loads(body)["subject"] == "h-gone" and verify(secret, body, headers[SIGNATURE_HEADER])


def test_racing_observers_record_one_host_lost_between_them(store: Store, clock: FixedClock) -> None:
    """Four processes notice the same lost host at once: exactly one event (its key decides)."""
    import subprocess
    import sys

    _beat(store, clock)
    code = (
        "import sys\n"
        "from datetime import datetime, timedelta, timezone\n"
        "from floorgate.admission import FixedClock, open_store\n"
        "from floorgate.scheduler.app.notify import NotifyService\n"
        "clock = FixedClock(datetime.fromisoformat(sys.argv[2]))\n"
        "with open_store(sys.argv[1]) as store:\n"
        "    print(len(NotifyService(store, clock).note_lost_hosts()))\n"
    )
    later = (clock.now() + timedelta(minutes=5)).isoformat()
    procs = [subprocess.Popen([sys.executable, "-c", code, store.url, later], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    found = [int(p.communicate(timeout=120)[0].strip()) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sorted(found) == [0, 0, 0, 1] and kinds(store).count("host_lost") == 1


def test_a_webhook_gets_its_events_in_order_a_later_one_waits_behind_a_retry(store: Store, clock: FixedClock, receiver: Receiver) -> None:
    notify = NotifyService(store, clock)
    notify.events.add_webhook(receiver.url, ["ask_pending"])
    approvals = Approvals(store, clock)
    approvals.ask("m-1", "g/a/x", "max_turns", 2)
    receiver.status = 500
    report = notify.deliver()
    assert (report.attempted, report.failed) == (1, 1)
    approvals.ask("m-2", "g/a/x", "max_turns", 2)  # a later event, due at once
    receiver.status = 204
    assert notify.deliver().attempted == 0  # it waits behind the first one's retry
    approvals.ask("m-3", "g/a/x", "max_turns", 2)
    receiver.status = 500
    clock.advance(timedelta(seconds=30))
    report = notify.deliver()  # the first one's retry fails again: the two behind it are not tried
    assert (report.attempted, report.failed) == (1, 1)
    receiver.status = 204
    clock.advance(timedelta(seconds=60))
    assert notify.deliver().delivered == 3  # in order, in one round
    missions = [doc["data"]["mission_id"] for doc in receiver.docs()]
    assert missions == ["m-1", "m-1", "m-1", "m-2", "m-3"]
