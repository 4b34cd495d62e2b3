"""Round trips and commits per admission decision, counted at the database driver (never timed).

Every statement the hot path sends is one round trip; transaction control (BEGIN with its lock,
COMMIT) is counted too. These are the costs today: a change that adds a round trip to a decision
shows up here as a failing count, so it cannot creep back unseen (bench/admission.py has the times).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from admission import Admission, FixedClock, Policies, Scope, Store

from conftest import T0

EVENTS: list[str] = []  # statement verbs and clock reads, in order, while counting


class _Cursor:
    def __init__(self, cursor: Any, counts: dict[str, int]) -> None:
        self._cursor = cursor
        self._counts = counts

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        self._counts["round_trips"] += 1
        EVENTS.append(sql.strip().split()[0].rstrip(";").upper())
        if sql.strip().upper().startswith("COMMIT"):
            self._counts["commits"] += 1
        return self._cursor.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Connection:
    def __init__(self, raw: Any, counts: dict[str, int]) -> None:
        self._raw = raw
        self._counts = counts

    def cursor(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._raw.cursor(*args, **kwargs), self._counts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@contextmanager
def counted(store: Store) -> Iterator[dict[str, int]]:
    """Round trips and commits the hot path makes while the block runs."""
    counts = {"round_trips": 0, "commits": 0}
    hot = store._hot_connection
    store._hot_connection = lambda: _Connection(hot(), counts)  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        del store._hot_connection


# (backend, operation) -> (round trips, commits). PostgreSQL's admitted reserve reads the facts
# first without a lock (so a denial takes none), then locks and reads them again to decide.
EXPECTED = {
    ("sqlite", "admitted"): (4, 1),  # BEGIN IMMEDIATE, facts, insert, COMMIT
    ("sqlite", "confirm"): (1, 0),  # one autocommitted UPDATE ... RETURNING
    # BEGIN IMMEDIATE, facts, COMMIT of nothing: SQLite decides under its write lock (a pre-read
    # like PostgreSQL's would save it; issue 12), and a denial still writes no row.
    ("sqlite", "denied"): (3, 1),
    ("sqlite", "eligibility"): (1, 0),
    ("postgresql", "admitted"): (5, 1),  # facts, BEGIN + advisory lock, facts, insert, COMMIT
    ("postgresql", "confirm"): (1, 0),
    ("postgresql", "denied"): (1, 0),
    ("postgresql", "eligibility"): (1, 0),
}


@pytest.mark.parametrize("operation", ["admitted", "confirm", "denied", "eligibility"])
def test_round_trips_and_commits_per_decision(store: Store, operation: str) -> None:
    clock = FixedClock(T0)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    admission = Admission(store, clock)
    admission.eligibility("g", "a", "x")  # the hot connection is open before counting starts

    def reserve(turn: str) -> Any:
        return admission.reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=clock.now())

    if operation in ("confirm", "denied"):
        assert reserve("t1").admitted
    if operation == "denied":
        clock.advance(timedelta(seconds=1))  # a new trigger inside the floor
    with counted(store) as counts:
        if operation == "admitted":
            assert reserve("t1").admitted
        elif operation == "confirm":
            assert admission.confirm("t1").status == "confirmed"
        elif operation == "denied":
            assert not reserve("t2").admitted
        else:
            admission.eligibility("g", "a", "x")
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert (counts["round_trips"], counts["commits"]) == EXPECTED[(backend, operation)]


class _LoggedClock(FixedClock):
    def now(self):  # type: ignore[no-untyped-def]
        EVENTS.append("CLOCK")
        return super().now()


def test_reserve_reads_the_clock_after_the_facts_it_decides_on(store: Store) -> None:
    """A start another process committed just before must never look like it is in the future
    (a false clock_rollback under a burst): the clock is read after the deciding read, under the lock."""
    clock = _LoggedClock(T0)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    admission = Admission(store, clock)
    admission.eligibility("g", "a", "x")
    EVENTS.clear()
    with counted(store):
        assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    locked = EVENTS.index("BEGIN")
    deciding_read = EVENTS.index("SELECT", locked)
    assert "CLOCK" in EVENTS[deciding_read : EVENTS.index("INSERT")], EVENTS
    assert "CLOCK" not in EVENTS[:locked] or store.dialect == "postgresql", EVENTS  # PostgreSQL's unlocked pre-read reads it too
