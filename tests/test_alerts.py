"""Alerts once per period: an admission that crosses an owner-set percentage of a count or budget
writes ``budget_threshold`` (and, when the window is spent, ``budget_exhausted``) in its own
transaction, once per window and limit however often it is retried or raced, on SQLite and
PostgreSQL with a fake clock; the signed webhooks deliver them."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from basics import T0 as RACE_T0
from basics import raw_sql

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store, open_store
from floorgate.admission._limit_check import check_lane
from floorgate.admission.alerts import latest
from floorgate.admission.decisions import Decision, Reason
from floorgate.admission.events import SIGNATURE_HEADER, EventKind, Events, record_once, verify
from floorgate.admission.limits import LimitsChange, parse_alerts
from floorgate.admission.windows import parse_window
from floorgate.scheduler.app.notify import NotifyService

from helpers import Receiver
from race_worker import race_limits

T0 = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)


def configure(policies: Policies, path: str, change: LimitsChange) -> None:
    scope = Scope.parse(path)
    current = policies.get(scope)
    policies.configure(scope, expected_revision=current.revision if current else 0, owner_ref="o", limits=change)


def reserve(store: Store, clock: FixedClock, at: datetime, lane: tuple[str, str], turn: str) -> Decision:
    clock.set(at)
    agent, automation = lane
    return Admission(store, clock).reserve(goal="g", agent=agent, automation=automation, turn_id=turn, trigger_time=at)


def alerts(store: Store) -> list[tuple[str, int | None, str]]:
    """(kind, percent, period_start) of every alert written, in order."""
    out = []
    for row in raw_sql(store, "SELECT kind, data_json FROM fg_events WHERE kind LIKE 'budget_%' ORDER BY seq"):
        data = json.loads(row[1])
        out.append((row[0], data.get("percent"), data["period_start"]))
    return out


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def test_each_percentage_is_written_once_then_again_in_the_next_window(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(budget_tokens=1000, per=parse_window("day@UTC"), estimate_tokens=250))
    day = "2026-12-01T00:00:00Z"
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted  # 0 -> 250: no percentage passed
    assert alerts(store) == []
    assert reserve(store, clock, T0 + timedelta(minutes=1), ("a", "x"), "t2").admitted  # 250 -> 500: 50
    assert alerts(store) == [("budget_threshold", 50, day)]
    assert reserve(store, clock, T0 + timedelta(minutes=2), ("a", "x"), "t3").admitted  # 500 -> 750: none
    assert reserve(store, clock, T0 + timedelta(minutes=3), ("a", "x"), "t4").admitted  # 750 -> 1000: 80, 100, spent
    assert alerts(store) == [
        ("budget_threshold", 50, day),
        ("budget_threshold", 80, day),
        ("budget_threshold", 100, day),
        ("budget_exhausted", None, day),
    ]
    subjects = [row[0] for row in raw_sql(store, "SELECT subject FROM fg_events WHERE kind LIKE 'budget_%' ORDER BY seq")]
    assert subjects == [f"{p}% of 1k tokens per day@UTC at g/a" for p in (50, 80, 100)] + ["1k tokens per day@UTC at g/a"]
    # Denials write nothing, so no alert is written twice while the window stays spent.
    assert reserve(store, clock, T0 + timedelta(minutes=4), ("a", "x"), "t5").reason is Reason.BUDGET_EXHAUSTED
    assert len(alerts(store)) == 4
    # The next day is a new window: each percentage is written again, once.
    nxt = datetime(2026, 12, 2, 0, tzinfo=timezone.utc)
    for i in range(4):
        assert reserve(store, clock, nxt + timedelta(minutes=i), ("a", "x"), f"n{i}").admitted
    later = [a for a in alerts(store) if a[2] == "2026-12-02T00:00:00Z"]
    assert [a[:2] for a in later] == [
        ("budget_threshold", 50),
        ("budget_threshold", 80),
        ("budget_threshold", 100),
        ("budget_exhausted", None),
    ]


# A raised limit is another limit: the old amount's alerts are not read back against the new one
# (100% of 1000 tokens is 50% of 2000), and the new amount's percentages are alerted afresh.
def test_a_raised_limit_reads_back_none_of_the_old_alerts_and_alerts_afresh(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(budget_tokens=1000, per=parse_window("day@UTC"), estimate_tokens=250))
    for i in range(4):  # 0 -> 1000: 50, 80, 100, spent
        assert reserve(store, clock, T0 + timedelta(minutes=i), ("a", "x"), f"t{i}").admitted
    assert len(alerts(store)) == 4
    raised = LimitsChange(budget_tokens=2000, per=parse_window("day@UTC"), estimate_tokens=250)
    policies.configure(Scope.parse("g/a"), expected_revision=1, owner_ref="o", limits=raised, allow_reduction=True)
    now = T0 + timedelta(minutes=10)
    with store.read() as conn:
        states = check_lane(conn, "g", "a", "x", now).states
        assert [s.limit.amount for s in states] == [2000]
        assert latest(conn, states, now) == (None,)
    for i in range(3):  # 1000 -> 1750 of 2000: 80 (50 was passed before, at the old amount's 100)
        assert reserve(store, clock, now + timedelta(minutes=i), ("a", "x"), f"r{i}").admitted
    assert [a[:2] for a in alerts(store)[4:]] == [("budget_threshold", 80)]
    with store.read() as conn:
        found = latest(conn, check_lane(conn, "g", "a", "x", now).states, now)
    assert found[0] is not None and (found[0].percent, found[0].used) == (80, 1750)


def test_owner_percentages_and_a_count(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a/x", LimitsChange(max_starts=4, per=parse_window("1d"), alert_at=parse_alerts("25,75")))
    for i in range(4):
        assert reserve(store, clock, T0 + timedelta(minutes=i), ("a", "x"), f"t{i}").admitted
    got = [(k, p) for k, p, _ in alerts(store)]
    assert got == [("budget_threshold", 25), ("budget_threshold", 75), ("budget_exhausted", None)]
    (spent,) = Events(store, clock).list(EventKind.BUDGET_EXHAUSTED)
    assert spent.data["reason"] == "count_exhausted" and spent.data["used"] == 4 and spent.data["turn_id"] == "t3"


def test_an_alert_commits_with_its_admission_and_not_without_it(store: Store, clock: FixedClock, policies: Policies) -> None:
    configure(policies, "g/a", LimitsChange(max_starts=2, per=parse_window("1d")))

    def refuse(_conn: object) -> None:
        raise RuntimeError("the caller's unit of work failed")

    clock.set(T0)
    with pytest.raises(RuntimeError):
        Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0, on_admit=refuse)
    assert alerts(store) == [] and raw_sql(store, "SELECT COUNT(*) FROM fg_starts")[0][0] == 0
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    assert [k for k, _p, _s in alerts(store)] == ["budget_threshold"]


def test_a_key_is_written_once_however_often_it_is_recorded(store: Store, clock: FixedClock) -> None:
    with store.write() as conn:
        first = record_once(conn, EventKind.BUDGET_THRESHOLD, "s", {"percent": 50}, T0, key="budget:k:50")
        again = record_once(conn, EventKind.BUDGET_THRESHOLD, "s", {"percent": 50}, T0, key="budget:k:50")
    with store.write() as conn:  # a retry in a later transaction (another host)
        later = record_once(conn, EventKind.BUDGET_THRESHOLD, "s", {"percent": 50}, T0, key="budget:k:50")
    assert first is not None and (again, later) == (None, None)
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_events")[0][0] == 1


def test_a_webhook_receives_one_signed_alert(store: Store, clock: FixedClock, policies: Policies, receiver: Receiver) -> None:
    notify = NotifyService(store, clock)
    _webhook, secret = notify.events.add_webhook(receiver.url, "budget_exhausted")
    configure(policies, "g/a", LimitsChange(max_starts=1, per=parse_window("day@Europe/Berlin")))
    assert reserve(store, clock, T0, ("a", "x"), "t1").admitted
    assert notify.deliver().delivered == 1
    assert notify.deliver().attempted == 0
    ((headers, body),) = receiver.got
    assert verify(secret, body, headers[SIGNATURE_HEADER])
    doc = json.loads(body)
    assert doc["kind"] == "budget_exhausted" and doc["data"]["reason"] == "count_exhausted"
    assert doc["data"]["period_end"] == "2026-12-01T23:00:00Z"  # the next Berlin midnight: when it frees


@pytest.mark.slow
def test_racing_admissions_write_each_alert_once(db_url: str) -> None:
    with open_store(db_url) as store:
        Policies(store, FixedClock(RACE_T0)).configure(
            Scope.parse("g"),
            expected_revision=0,
            owner_ref="o",
            limits=LimitsChange(budget_tokens=700, estimate_tokens=100, per=parse_window("1d"), across_agents=True),
        )
    workers, rounds = 8, 2
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers)
    results = ctx.Queue()
    procs = [ctx.Process(target=race_limits, args=(db_url, w, rounds, f"a{w % 4}", barrier, results)) for w in range(workers)]
    for p in procs:
        p.start()
    decisions = [results.get(timeout=180) for _ in range(workers * rounds)]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert sum(1 for d in decisions if d[2]) == 7
    with open_store(db_url) as store:
        got = sorted((k, p or 0) for k, p, _s in alerts(store))
    assert got == [("budget_exhausted", 0), ("budget_threshold", 50), ("budget_threshold", 80), ("budget_threshold", 100)]
