"""Units of work: a managed turn's begin (reservation, journal attempt, mission open, turn count,
attempt-to-mission link) is one commit, its settlement (verdict and mission) is one commit, and
removing an automation takes its wake state and timer binding in the same commit.

Commits are counted, never timed: every commit of a SQLAlchemy transaction (an engine event),
every hot-path transaction of its own, and every write the hot path autocommits.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from basics import T0, raw_sql
from sqlalchemy import event

from floorgate.admission import (
    Automations,
    FixedClock,
    Journal,
    Missions,
    Policies,
    Scope,
    Store,
    StoreUnavailable,
    WakeState,
    parse_compute,
)
from floorgate.admission.journal import ClaimLost
from floorgate.admission.store import DriverTx
from floorgate.admission.timers import TimerBindings
from floorgate.scheduler.runtime.executor import TurnExecutor

from helpers import add_automation, floor

_WRITES = ("INSERT", "UPDATE", "DELETE")


class _Autocommitted:
    """A hot-path cursor outside a transaction: each write statement is a commit of its own."""

    def __init__(self, tx: DriverTx, commits: Commits) -> None:
        self._tx, self._commits, self.dialect, self.relaxed = tx, commits, tx.dialect, tx.relaxed

    def _count(self, sql: str) -> None:
        if sql.lstrip().split(None, 1)[0].upper() in _WRITES:
            self._commits.n += 1

    def row(self, sql: str, params: dict[str, Any]) -> Any:
        self._count(sql)
        return self._tx.row(sql, params)

    def execute(self, sql: str, params: dict[str, Any]) -> int:
        self._count(sql)
        return self._tx.execute(sql, params)


class Commits:
    """Counts the durable commits made through ``store`` while installed."""

    def __init__(self, store: Store) -> None:
        self.n = 0
        self._store = store
        self._driver = store.driver
        event.listen(store.engine, "commit", self._on_commit)
        store.driver = self._counting_driver  # type: ignore[method-assign]

    def _on_commit(self, _conn: Any) -> None:
        self.n += 1

    @contextmanager
    def _counting_driver(self, *, write: bool, lock_key: str | None = None, unit: Any = None) -> Iterator[Any]:
        joined = {} if unit is None else {"unit": unit}
        with self._driver(write=write, lock_key=lock_key, **joined) as tx:
            yield tx if write else _Autocommitted(tx, self)
        if write and unit is None:
            self.n += 1

    def remove(self) -> None:
        event.remove(self._store.engine, "commit", self._on_commit)
        del self._store.driver


@pytest.fixture
def commits(store: Store) -> Iterator[Commits]:
    counter = Commits(store)
    yield counter
    counter.remove()


def _phases(ex: TurnExecutor, commits: Commits) -> dict[str, int]:
    """Commit counts at the managed turn's steps: before its point of no return, and after it."""
    marks: dict[str, int] = {}
    launch = ex.journal.launch

    def counted_launch(*a: Any, **k: Any) -> Any:
        marks["begin"] = commits.n
        out = launch(*a, **k)
        marks["launched"] = commits.n
        return out

    ex.journal.launch = counted_launch  # type: ignore[method-assign]
    return marks


def test_a_managed_turn_begins_in_one_commit_and_settles_in_one(store: Store, commits: Commits, tmp_path: Path, bench_row: Any) -> None:
    clock = FixedClock(T0)
    automation = add_automation(store, clock)
    ex = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce")
    marks = _phases(ex, commits)
    start = commits.n
    outcome = ex.run(automation)
    assert outcome.verdict.status == "succeeded", outcome
    # begin: reservation + journal attempt + mission open + turn count + link, in one commit
    assert marks["begin"] - start == 1
    # the two-phase confirm with the held host's pid, before its program runs
    assert marks["launched"] - marks["begin"] == 1
    assert commits.n - marks["launched"] == 1  # the verdict and the mission's settlement together
    assert commits.n - start == 3, "a managed turn costs three commits"
    bench_row(f"managed turn: durable commits ({store.dialect})", f"{commits.n - start}", "<= 3", commits.n - start <= 3)
    record = Journal(store).get(outcome.turn_id)
    assert record is not None and record.mission_id is not None and record.attempt == 1
    mission = Missions(store).get(record.mission_id)
    assert (mission.status, mission.turns) == ("succeeded", 1)


def test_a_failure_inside_the_begin_leaves_no_reservation_and_no_attempt(store: Store, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    automation = add_automation(store, clock)

    def failing_count(*_a: Any, **_k: Any) -> Any:
        raise StoreUnavailable("the store went away while counting the turn")

    monkeypatch.setattr(Missions, "count", failing_count)
    outcome = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce").run(automation)
    assert outcome.verdict.status == "denied" and outcome.decision is not None
    assert outcome.decision.reason.value == "state_unavailable"
    # Nothing of the begin committed: no start holds the window, no journal row, no mission.
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_turns") == [(0,)]
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_missions") == [(0,)]


def test_a_runner_that_lost_its_claim_settles_neither_the_turn_nor_the_mission(store: Store, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    automation = add_automation(store, clock)
    ex = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce")
    launch = ex.journal.launch

    def then_taken_over(turn_id: str, owner: str, **kw: Any) -> Any:
        out = launch(turn_id, owner, **kw)
        raw_sql(store, "UPDATE fg_turns SET owner_id = 'elsewhere:1:recoverer' WHERE turn_id = :t", {"t": turn_id})
        return out

    ex.journal.launch = then_taken_over  # type: ignore[method-assign]
    with pytest.raises(ClaimLost):
        ex.run(automation)
    assert raw_sql(store, "SELECT status FROM fg_missions") == [("open",)], "a runner whose turn settlement was refused settled the mission"
    assert raw_sql(store, "SELECT phase FROM fg_turns") == [("launched",)]


def test_removing_an_automation_takes_its_wake_state_and_binding_in_one_commit(store: Store, commits: Commits) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock)
    automations = Automations(store, clock)
    automations.save_wake_state(WakeState(automation_id="x", backoff_step=2, backoff_wake_at=T0 + timedelta(minutes=5)))
    TimerBindings(store).set_desired("x", "crontab", "* * * * *", False, None, T0)
    before = commits.n
    automations.remove("x")
    assert commits.n - before == 1
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_wake_state") == [(0,)]
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_timer_bindings") == [(0,)]
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_automations") == [(0,)]


class _Killed(BaseException):
    """Stands in for SIGKILL: nothing after it runs, not even the settlement."""


def test_a_turn_resumed_after_its_begin_committed_is_counted_once(store: Store, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    automation = add_automation(store, clock)
    floor(store, clock, "g/a", timedelta(hours=1))  # a reservation to resume
    first = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce")

    def killed(step: str) -> None:
        if step == "reserved":
            raise _Killed

    def no_settlement(*_a: Any, **_k: Any) -> Any:
        raise _Killed

    monkeypatch.setattr("floorgate.scheduler.runtime.executor._pause", killed)
    first.journal.settle = no_settlement  # type: ignore[method-assign]
    with pytest.raises(_Killed):
        first.run(automation, turn_id="x-resume")
    monkeypatch.undo()
    assert raw_sql(store, "SELECT turns FROM fg_missions") == [(1,)]  # the begin committed, counted
    clock.advance(first.lease + timedelta(seconds=1))  # the dead runner's claim expires
    outcome = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce").run(automation, turn_id="x-resume")
    assert outcome.verdict.status == "succeeded" and outcome.decision is not None
    assert outcome.decision.reason.value == "resumed"
    assert raw_sql(store, "SELECT status, turns FROM fg_missions") == [("succeeded", 1)]


def test_a_turn_the_count_refuses_settles_with_its_mission_in_one_commit(store: Store, commits: Commits, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    automation = add_automation(store, clock)
    compute = parse_compute('{"max_turns": 1, "on_exhausted": "finish_stuck"}')
    Policies(store, clock).configure(Scope.parse("g/a/x"), compute=compute, expected_revision=0, owner_ref="owner")
    mission = Missions(store, clock).open("x", "g", "a")
    ex = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce")
    precheck = ex.gate.precheck

    def then_another_runner_counts(a: Any) -> Any:
        checked = precheck(a)  # saw 0 of 1 turns used
        raw_sql(store, "UPDATE fg_missions SET turns = 1 WHERE mission_id = :m", {"m": mission.mission_id})
        return checked

    ex.gate.precheck = then_another_runner_counts  # type: ignore[method-assign]
    start = commits.n
    outcome = ex.run(automation)
    assert (outcome.verdict.status, outcome.verdict.bound) == ("stuck", "max_turns")
    # the begin; the mission's exhaustion with the turn's verdict; the automation's hold
    assert commits.n - start - 1 == 3  # (the other runner's count is the 1)
    assert raw_sql(store, "SELECT status, turns FROM fg_missions") == [("stuck", 1)]
    assert raw_sql(store, "SELECT phase, status FROM fg_turns") == [("settled", "stuck")]
    assert Automations(store).get("x").state == "held"


def test_repositories_join_the_callers_transaction_and_roll_back_with_it(store: Store, commits: Commits) -> None:
    missions = Missions(store, FixedClock(T0))
    before = commits.n
    with store.unit() as unit:
        mission = missions.open("x", "g", "a", unit=unit)
        counted, seen = missions.count(mission.mission_id, "turns", 0, enforce=False, unit=unit)
        assert counted and seen.turns == 1  # the unit reads its own writes
    assert commits.n - before == 1
    with pytest.raises(RuntimeError, match="after the count"), store.unit() as unit:
        missions.count(mission.mission_id, "turns", 0, enforce=False, unit=unit)
        raise RuntimeError("after the count")
    assert missions.get(mission.mission_id).turns == 1
    assert commits.n - before == 1


def test_a_host_publishes_its_timers_in_short_chunks(store, commits) -> None:  # type: ignore[no-untyped-def]
    """10,000 readbacks must not be one long write transaction that admissions wait behind."""
    from floorgate.admission.timers import PUBLISH_CHUNK

    now = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
    rows = [(f"a{i:04d}", "apscheduler", "DTSTART:20261201T090000Z RRULE:FREQ=HOURLY", None, now) for i in range(2 * PUBLISH_CHUNK + 50)]
    before = commits.n
    TimerBindings(store).publish_own(rows)
    assert commits.n - before == 3  # two full chunks and the rest
    assert len(TimerBindings(store).all()) == len(rows)
    TimerBindings(store).publish_own(rows)  # again: updates in place, the same chunks
    assert commits.n - before == 6 and len(TimerBindings(store).all()) == len(rows)
