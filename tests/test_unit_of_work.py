"""The unit of work (``Store.unit()``): one commit for every repository that joins it, nothing on
an error, after-commit callbacks only once the change is durable, each lock key taken once, and
admission's locks in one order (PostgreSQL). Commits and lock statements are counted at the
engine, never timed; every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event, text

from floorgate.admission import (
    Admission,
    Approvals,
    FailureStreaks,
    FixedClock,
    Journal,
    LockOrderRefused,
    Missions,
    Policies,
    Scope,
    Store,
    Triggers,
)
from floorgate.admission import _locks as locks
from floorgate.admission.missions import MissionStatus
from floorgate.admission.unit import UnitClosed

from helpers import add_automation, journal_entry


class Wire:
    """Commits, and advisory-lock statements, sent through ``store``'s engine while installed."""

    def __init__(self, store: Store) -> None:
        self.commits = 0
        self.locks: list[Any] = []
        self._engine = store.engine
        event.listen(self._engine, "commit", self._on_commit)
        event.listen(self._engine, "before_cursor_execute", self._on_statement)

    def _on_commit(self, _conn: Any) -> None:
        self.commits += 1

    def _on_statement(self, _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if "pg_advisory_xact_lock" in statement:
            self.locks.append(parameters)

    def remove(self) -> None:
        event.remove(self._engine, "commit", self._on_commit)
        event.remove(self._engine, "before_cursor_execute", self._on_statement)


@pytest.fixture
def wire(store: Store) -> Iterator[Wire]:
    counted = Wire(store)
    yield counted
    counted.remove()


def _pg(store: Store) -> bool:
    return store.dialect == "postgresql"


def _count(store: Store, table: str) -> int:
    with store.read() as conn:
        return int(conn.execute(text(f"SELECT COUNT(*) FROM {table}")).scalar_one())


def test_every_repository_in_a_unit_commits_in_one_commit(store: Store, clock: FixedClock, wire: Wire) -> None:
    missions, approvals, triggers = Missions(store, clock), Approvals(store, clock), Triggers(store, clock)
    add_automation(store, clock)
    triggers.trigger("x", trigger_id="trig-1")
    before = wire.commits
    with store.unit() as unit:
        mission = missions.open("x", "g", "a", unit=unit)
        counted, seen = missions.count(mission.mission_id, "turns", 0, enforce=False, unit=unit)
        approvals.ask(mission.mission_id, "g/a/x", "max_turns", 2, unit=unit)
        served = triggers.serve("x", "turn-1", unit=unit)
        assert counted and seen.turns == 1 and served == 1  # the unit reads its own writes
        assert wire.commits == before  # nothing durable before the block ends
    assert wire.commits - before == 1
    after = missions.get(mission.mission_id)
    assert (after.turns, after.status) == (1, "awaiting_owner")
    assert len(approvals.pending(mission.mission_id)) == 1 and triggers.pending("x") is None


def test_an_error_in_a_unit_rolls_back_every_repository_in_it(store: Store, clock: FixedClock, wire: Wire) -> None:
    missions, approvals, triggers = Missions(store, clock), Approvals(store, clock), Triggers(store, clock)
    add_automation(store, clock)
    triggers.trigger("x", trigger_id="trig-1")
    before, events = wire.commits, _count(store, "fg_events")
    with pytest.raises(RuntimeError, match="the next step"), store.unit() as unit:
        mission = missions.open("x", "g", "a", unit=unit)
        missions.count(mission.mission_id, "turns", 0, enforce=False, unit=unit)
        approvals.ask(mission.mission_id, "g/a/x", "max_turns", 2, unit=unit)
        triggers.serve("x", "turn-1", unit=unit)
        raise RuntimeError("the next step failed")
    assert wire.commits == before
    assert (_count(store, "fg_missions"), _count(store, "fg_approvals"), _count(store, "fg_events")) == (0, 0, events)
    assert triggers.pending("x") is not None  # still pending: its serve went with the unit


def test_after_commit_callbacks_run_once_the_change_is_durable_and_in_order(store: Store, clock: FixedClock) -> None:
    missions = Missions(store, clock)
    seen: list[tuple[str, int]] = []
    with store.unit() as unit:
        missions.open("x", "g", "a", unit=unit)
        # Each callback looks from another connection: the mission is there only once committed.
        unit.after_commit(lambda: seen.append(("first", _count(store, "fg_missions"))))
        unit.after_commit(lambda: seen.append(("second", _count(store, "fg_missions"))))
        assert seen == []
    assert seen == [("first", 1), ("second", 1)]


def test_after_commit_callbacks_never_run_after_a_rollback(store: Store, clock: FixedClock) -> None:
    ran: list[str] = []
    with pytest.raises(RuntimeError), store.unit() as unit:
        Missions(store, clock).open("x", "g", "a", unit=unit)
        unit.after_commit(lambda: ran.append("woken"))
        raise RuntimeError("the next step failed")
    assert ran == [] and _count(store, "fg_missions") == 0


def test_a_savepoint_rolled_back_takes_its_callbacks_and_its_writes_with_it(store: Store, clock: FixedClock) -> None:
    missions = Missions(store, clock)
    ran: list[str] = []
    with store.unit() as unit:
        kept = missions.open("x", "g", "a", unit=unit)
        unit.after_commit(lambda: ran.append("kept"))
        point = unit.begin_nested()
        missions.open("y", "g", "a", unit=unit)
        unit.after_commit(lambda: ran.append("refused"))
        point.rollback()
        with unit.savepoint():
            missions.open("z", "g", "a", unit=unit)
            unit.after_commit(lambda: ran.append("released"))
    assert ran == ["kept", "released"]
    assert sorted(m.automation_id for m in missions.recent()) == ["x", "z"] and missions.get(kept.mission_id).status == "open"


def test_a_failing_callback_does_not_stop_the_others_and_the_change_stays(store: Store, clock: FixedClock) -> None:
    ran: list[str] = []

    def broken() -> None:
        raise OSError("the host's wake socket is gone")

    with pytest.raises(OSError, match="wake socket"), store.unit() as unit:
        Missions(store, clock).open("x", "g", "a", unit=unit)
        unit.after_commit(broken)
        unit.after_commit(lambda: ran.append("notified"))
    assert ran == ["notified"] and _count(store, "fg_missions") == 1


def test_two_repositories_joining_a_unit_take_their_shared_lock_once(store: Store, clock: FixedClock, wire: Wire) -> None:
    """The failure streak and the mission both lock the automation: one lock statement per unit.
    The mission this unit created is held without a statement of its own (no other transaction can
    see its row before the commit)."""
    key = locks.automation("x")
    with store.unit() as unit:
        FailureStreaks(store, clock).lock("x", unit=unit)
        Missions(store, clock).open("x", "g", "a", unit=unit)
        mission = Missions(store, clock).open("x", "g", "a", unit=unit)
        Missions(store, clock).count(mission.mission_id, "turns", 0, enforce=False, unit=unit)
        Missions(store, clock).settle(mission.mission_id, MissionStatus.STUCK, "done", unit=unit)
        assert unit.held == {key, locks.mission(mission.mission_id)}
    # PostgreSQL: the automation's key, once; SQLite locks the file instead.
    assert len(wire.locks) == (1 if _pg(store) else 0)


def test_a_savepoint_rolled_back_forgets_the_locks_taken_in_it(store: Store, clock: FixedClock, wire: Wire) -> None:
    """PostgreSQL releases an advisory lock taken in a savepoint rolled back: the unit takes it again."""
    with store.unit() as unit:
        point = unit.begin_nested()
        unit.lock(locks.automation("x"))
        point.rollback()
        assert unit.held == frozenset()
        FailureStreaks(store, clock).lock("x", unit=unit)
        assert unit.held == {locks.automation("x")}
        if _pg(store):
            held = unit.connection.execute(
                text("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted")
            ).scalar_one()
            assert held == 1
    assert len(wire.locks) == (2 if _pg(store) else 0)


# (first, then) -> refused on PostgreSQL: admission's keys go goal before agent, ascending by key.
ORDERS = [
    pytest.param(locks.agent("g", "a"), locks.agent("g", "b"), False, id="agents-ascending"),
    pytest.param(locks.agent("g", "b"), locks.agent("g", "a"), True, id="agents-descending"),
    pytest.param(locks.goal("g"), locks.agent("g", "a"), False, id="goal-then-agent"),
    pytest.param(locks.agent("g", "a"), locks.goal("g"), True, id="agent-then-goal"),
    pytest.param(locks.agent("g", "b"), locks.automation("x"), False, id="other-keys-unordered"),
]


@pytest.mark.parametrize(("first", "then", "refused"), ORDERS)
def test_admission_locks_in_one_unit_keep_one_order_or_are_refused(store: Store, wire: Wire, first: str, then: str, refused: bool) -> None:
    with store.unit() as unit:
        unit.lock(first)
        sent = len(wire.locks)
        if refused and _pg(store):
            with pytest.raises(LockOrderRefused, match="ascending key order"):
                unit.lock(then)
            assert len(wire.locks) == sent and then not in unit.held  # refused before waiting: nothing sent
        else:
            unit.lock(then)  # SQLite: the file's one write lock is held already, no order can deadlock
            assert then in unit.held


def test_an_ended_or_read_only_unit_refuses_writes(store: Store, clock: FixedClock) -> None:
    missions = Missions(store, clock)
    with store.unit() as unit:
        pass
    with pytest.raises(UnitClosed, match="has ended"):
        missions.open("x", "g", "a", unit=unit)
    with store.unit(write=False) as reading:
        with pytest.raises(UnitClosed, match="read-only"):
            missions.open("x", "g", "a", unit=reading)
        assert missions.recent() == [] and missions.current("x") is None
    assert _count(store, "fg_missions") == 0


def test_a_managed_reservation_hands_its_unit_to_on_admit(store: Store, clock: FixedClock, wire: Wire) -> None:
    """The begin's repositories join the reservation's unit (one commit), its callbacks run once
    that commit is durable, and a denial calls nothing and runs nothing."""
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    admission, missions = Admission(store, clock), Missions(store, clock)
    woken: list[int] = []

    def begin(unit: Any) -> None:
        assert locks.agent("g", "a") in unit.held  # the reservation's lock: no repository takes it again
        missions.open("x", "g", "a", unit=unit)
        unit.after_commit(lambda: woken.append(len(Journal(store).unsettled("x"))))

    before = wire.commits
    first = admission.reserve(
        goal="g",
        agent="a",
        automation="x",
        turn_id="t1",
        trigger_time=clock.now(),
        journal=journal_entry("t1", clock.now()),
        on_admit=begin,
    )
    assert first.admitted and wire.commits - before == 1
    assert woken == [1] and missions.current("x") is not None  # the callback saw the journal row committed
    clock.advance(timedelta(seconds=1))
    second = admission.reserve(
        goal="g",
        agent="a",
        automation="x",
        turn_id="t2",
        trigger_time=clock.now(),
        journal=journal_entry("t2", clock.now()),
        on_admit=begin,
    )
    assert not second.admitted and woken == [1]


def test_a_reservation_joining_a_unit_keeps_admission_s_lock_order(store: Store, clock: FixedClock) -> None:
    """A unit holding agent b's lock reserves for agent a: PostgreSQL refuses it before its
    statement can take a's lock (nothing written); SQLite admits it (one file lock, no order)."""
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    admission = Admission(store, clock)

    def reserve(unit: Any) -> Any:
        entry = journal_entry("t1", clock.now())
        return admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=clock.now(), journal=entry, unit=unit)

    if _pg(store):
        with store.unit() as unit:
            unit.lock(locks.agent("g", "b"))
            with pytest.raises(LockOrderRefused, match="'agent/g/a' asked for after 'agent/g/b'"):
                reserve(unit)
            advisory = "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
            assert unit.connection.execute(text(advisory)).scalar_one() == 1  # b's only: a's was never asked for
        assert (_count(store, "fg_starts"), _count(store, "fg_turns")) == (0, 0)
    else:
        with store.unit() as unit:
            unit.lock(locks.agent("g", "b"))
            assert reserve(unit).admitted
        assert (_count(store, "fg_starts"), _count(store, "fg_turns")) == (1, 1)
