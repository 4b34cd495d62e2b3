"""Round trips and commits per admission decision, counted at the database driver (never timed).

Every statement the hot path sends is one round trip; transaction control (BEGIN with its lock,
COMMIT) is counted too, and a commit counts when its transaction wrote (a durable flush). These
are the costs today, asserted exactly: a change that adds a round trip or a commit to a decision
shows up here as a failing count, so it cannot creep back unseen (bench/admission.py has the times).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from decimal import Decimal
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from basics import T0, raw_sql
from sqlalchemy import event

from floorgate.admission import Admission, Automations, FixedClock, Journal, Policies, Reason, Scope, Store, open_store
from floorgate.admission import _limit_read as limit_read
from floorgate.admission.limits import LimitsChange
from floorgate.admission.usage import Prices
from floorgate.admission.windows import parse_window
from floorgate.scheduler.runtime.executor import Admitted, TurnExecutor

from helpers import add_automation, journal_entry

EVENTS: list[str] = []  # statement verbs and clock reads, in order, while counting


class _Cursor:
    """Counts each statement as a round trip, and each transaction that wrote as a durable commit:
    a BEGIN ... COMMIT block, or a statement run on its own (an autocommit statement is its own
    transaction). Whether a transaction wrote is asked of the database, uncounted: SQLite's
    ``total_changes``, PostgreSQL's transaction id (assigned only to a transaction that writes)."""

    def __init__(self, cursor: Any, conn: _Connection) -> None:
        self._cursor = cursor
        self._conn = conn

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        conn = self._conn
        conn.settle()
        conn.counts["round_trips"] += 1
        verb = sql.strip().split()[0].rstrip(";").upper()
        EVENTS.append(verb)
        if verb == "BEGIN":
            result = self._cursor.execute(sql, *args, **kwargs)
            conn.in_tx, conn.changes = True, conn.total_changes()
            return result
        if verb in ("COMMIT", "ROLLBACK"):
            if verb == "COMMIT" and conn.wrote():
                conn.counts["commits"] += 1
            conn.in_tx = False
            return self._cursor.execute(sql, *args, **kwargs)
        if conn.in_tx:
            return self._cursor.execute(sql, *args, **kwargs)
        if conn.dialect == "sqlite":  # SQLite counts a statement's changes once it is reset
            conn.settle()
            conn.pending = conn.total_changes()
            return self._cursor.execute(sql, *args, **kwargs)
        # PostgreSQL: run it in a block of its own, to ask whether it wrote (one counted round trip).
        conn.uncounted("BEGIN")
        conn.changes = conn.total_changes()
        try:
            result = self._cursor.execute(sql, *args, **kwargs)
        except BaseException:
            conn.uncounted("ROLLBACK")
            raise
        if conn.wrote():
            conn.counts["commits"] += 1
        conn.uncounted("COMMIT")
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


class _Connection:
    def __init__(self, raw: Any, counts: dict[str, int], dialect: str) -> None:
        self._raw = raw
        self.counts = counts
        self.dialect = dialect
        self.in_tx = False
        self.changes = 0
        self.pending: int | None = None  # SQLite: total_changes before an autocommit statement

    def settle(self) -> None:
        if self.pending is not None:
            self.counts["commits"] += self.total_changes() > self.pending
            self.pending = None

    def cursor(self, *args: Any, **kwargs: Any) -> _Cursor:
        return _Cursor(self._raw.cursor(*args, **kwargs), self)

    def uncounted(self, sql: str) -> Any:
        cur = self._raw.cursor()
        cur.execute(sql)
        return cur.fetchone() if cur.description else None

    def total_changes(self) -> int:
        return int(self._raw.driver_connection.total_changes) if self.dialect == "sqlite" else 0

    def wrote(self) -> bool:
        if self.dialect == "sqlite":
            return self.total_changes() > self.changes
        return bool(self.uncounted("SELECT pg_current_xact_id_if_assigned() IS NOT NULL")[0])

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


@contextmanager
def counted(store: Store) -> Iterator[dict[str, int]]:
    """Round trips and durable commits the hot path makes while the block runs."""
    counts = {"round_trips": 0, "commits": 0}
    hot = store._hot_connection
    conns: dict[int, _Connection] = {}  # one counter per DBAPI connection, whichever call hands it out

    def wrapped() -> _Connection:
        raw = hot()
        return conns.setdefault(id(raw), _Connection(raw, counts, store.dialect))

    store._hot_connection = wrapped  # type: ignore[method-assign]
    try:
        yield counts
    finally:
        del store._hot_connection
        for conn in conns.values():
            conn.settle()


# (backend, operation) -> (round trips, durable commits). A denial is one plain read on both:
# no lock, no transaction, nothing written. PostgreSQL decides an admission in one call of
# one statement (fg_facts reads and decides; fg_admit locks, reads again and inserts); SQLite, in process,
# reads without the lock first, then decides again under BEGIN IMMEDIATE.
EXPECTED = {
    ("sqlite", "admitted"): (5, 1),  # facts, BEGIN IMMEDIATE, facts, insert, COMMIT
    ("sqlite", "confirm"): (1, 1),  # one autocommitted UPDATE ... RETURNING
    ("sqlite", "denied"): (1, 0),
    ("sqlite", "eligibility"): (1, 0),
    ("sqlite", "denial"): (1, 0),  # Admission.denial: the same plain read, on both backends
    ("sqlite", "denial_open"): (1, 0),
    ("postgresql", "admitted"): (1, 1),  # SELECT ... FROM fg_facts(...) ... fg_admit(...), autocommitted
    ("postgresql", "confirm"): (1, 1),
    ("postgresql", "denied"): (1, 0),
    ("postgresql", "eligibility"): (1, 0),
    ("postgresql", "denial"): (1, 0),
    ("postgresql", "denial_open"): (1, 0),
}


# What issue 12 asks of each (the figure bench/all.py prints beside the count).
GOALS: dict[tuple[str, str], tuple[str, Callable[[dict[str, int]], bool]]] = {
    ("postgresql", "admitted"): ("1 round trip, 1 commit", lambda c: (c["round_trips"], c["commits"]) == (1, 1)),
    ("sqlite", "admitted"): ("1 commit", lambda c: c["commits"] == 1),
    **{(b, "confirm"): ("1 round trip, 1 commit", lambda c: (c["round_trips"], c["commits"]) == (1, 1)) for b in ("sqlite", "postgresql")},
    **{
        (b, op): ("1 round trip, 0 commits", lambda c: (c["round_trips"], c["commits"]) == (1, 0))
        for b in ("sqlite", "postgresql")
        for op in ("denied", "eligibility", "denial", "denial_open")
    },
}


@pytest.mark.parametrize("operation", ["admitted", "confirm", "denied", "eligibility", "denial", "denial_open"])
def test_round_trips_and_commits_per_decision(store: Store, operation: str, bench_row: Any) -> None:
    clock = FixedClock(T0)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    admission = Admission(store, clock)
    admission.eligibility("g", "a", "x")  # the hot connection is open before counting starts

    def reserve(turn: str) -> Any:
        return admission.reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=clock.now())

    def denial(turn: str) -> Any:
        return admission.denial(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=clock.now())

    if operation in ("confirm", "denied", "denial"):
        assert reserve("t1").admitted
    if operation in ("denied", "denial"):
        clock.advance(timedelta(seconds=1))  # a new trigger inside the floor
    with counted(store) as counts:
        if operation == "admitted":
            assert reserve("t1").admitted
        elif operation == "confirm":
            assert admission.confirm("t1").status == "confirmed"
        elif operation == "denied":
            assert not reserve("t2").admitted
        elif operation == "denial":
            found = denial("t2")
            assert found is not None and found.reason.value == "interval_wait" and not found.admitted
        elif operation == "denial_open":
            assert denial("t1") is None  # it may admit: only reserve decides that
        else:
            admission.eligibility("g", "a", "x")
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert (counts["round_trips"], counts["commits"]) == EXPECTED[(backend, operation)]
    goal = GOALS[(backend, operation)]
    bench_row(f"{operation}: round trips / commits ({backend})", f"{counts['round_trips']} / {counts['commits']}", goal[0], goal[1](counts))


class _RacedClock(FixedClock):
    """Its first reading is taken just before another process admits a start 1 ms later."""

    def __init__(self, start: datetime, race: Callable[[], None]) -> None:
        super().__init__(start)
        self._race: Callable[[], None] | None = race

    def now(self) -> datetime:
        reading = super().now()
        if self._race is not None:
            race, self._race = self._race, None
            race()
            self.advance(timedelta(milliseconds=2))
        return reading


def test_a_start_committed_after_the_clock_reading_is_not_a_clock_rollback(store: Store) -> None:
    """Under a burst another process may commit a start after this reserve read the clock (on
    PostgreSQL the clock is read before the one call, which may wait for that process's lock): the
    decision is the floor's interval_wait, taken at a fresh reading, never a false clock_rollback."""
    Policies(store, FixedClock(T0)).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    other = open_store(store.url)
    try:

        def race() -> None:
            later = T0 + timedelta(milliseconds=1)
            assert (
                Admission(other, FixedClock(later)).reserve(goal="g", agent="a", automation="y", turn_id="o1", trigger_time=later).admitted
            )

        clock = _RacedClock(T0, race)
        decision = Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0)
    finally:
        other.close()
    assert (decision.reason, decision.decided_at) == (Reason.INTERVAL_WAIT, T0 + timedelta(milliseconds=2))
    assert decision.next_eligible_at == T0 + timedelta(hours=1, milliseconds=1)


@contextmanager
def on_the_wire(store: Store) -> Iterator[dict[str, int]]:
    """Round trips and commits of every connection the store uses while the block runs (its hot
    connection and the pool's): on PostgreSQL the protocol's ReadyForQuery messages, one per round
    trip, from libpq's trace; on SQLite the statements sqlite3 reports executing."""
    import os
    import tempfile
    from pathlib import Path

    from sqlalchemy import event

    counts = {"round_trips": 0, "commits": 0}
    traces: list[Any] = []

    def sqlite_statements() -> Any:
        last: list[str | None] = [None]

        def statement(sql: str) -> None:
            # sqlite3 reports a trigger's run (the limit mark's, migration 0032) as the statement
            # that fired it again, bound values and all: a repeat is that statement, not another.
            # (No path sends one statement with the same values twice in a row.) A line that starts
            # as a comment is a program run inside the statement being traced (the schema version
            # the limit mark is read with, ``pragma_schema_version``), not a statement sent.
            if sql == last[0] or sql.startswith("-- "):
                return
            last[0] = sql
            counts["round_trips"] += 1
            counts["commits"] += sql.strip().upper().startswith("COMMIT")

        return statement

    def watch(dbapi: Any) -> None:
        if store.dialect == "sqlite":
            dbapi.set_trace_callback(sqlite_statements())
            traces.append(dbapi)
            return
        import psycopg

        fd, path = tempfile.mkstemp(prefix="fg-trace-")
        dbapi.pgconn.trace(fd)
        dbapi.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
        traces.append((dbapi, fd, path))

    def checkout(dbapi: Any, _record: Any, _proxy: Any) -> None:
        watch(dbapi)

    watch(store._hot_connection().driver_connection)
    event.listen(store.engine.pool, "checkout", checkout)
    try:
        yield counts
    finally:
        event.remove(store.engine.pool, "checkout", checkout)
        for item in traces:
            if store.dialect == "sqlite":
                item.set_trace_callback(None)
                continue
            dbapi, fd, path = item
            dbapi.pgconn.untrace()
            lines = Path(path).read_text().splitlines()
            os.close(fd)
            os.unlink(path)
            # A round trip is a wait: the client's messages, then the server's answer. Counted as
            # each turn from what the client sent (F) to what the server sent (B), so a pipeline
            # that flushes to read a row before its Sync counts the two waits it makes.
            sides = [line[:1] for line in lines if line[:1] in ("F", "B")]
            counts["round_trips"] += sum(a == "F" and b == "B" for a, b in pairwise(sides))
            counts["commits"] += sum(line.startswith("B") and 'CommandComplete\t "COMMIT"' in line for line in lines)


# A managed turn's reservation: the start, its journal row and the caller's on_admit writes in one
# unit. (backend, outcome) -> (round trips, commits), with an on_admit that writes nothing.
# The journal row counts its attempt number in its own insert. ``read``: the caller's plain read
# (``Admission.denial``) found just before that it may admit, so PostgreSQL does not repeat it
# (its locked statement reads and decides again); SQLite's read is local and stays.
MANAGED = {
    # facts; BEGIN, fg_facts + fg_admit (lock, facts, start), journal row (counted), COMMIT
    ("postgresql", "admitted"): (5, 1),
    ("postgresql", "denied"): (1, 0),
    ("postgresql", "admitted after a read"): (4, 1),
    # facts; BEGIN IMMEDIATE, facts, start, journal row (counted), COMMIT
    ("sqlite", "admitted"): (6, 1),
    ("sqlite", "denied"): (1, 0),
    ("sqlite", "admitted after a read"): (6, 1),
}


@pytest.mark.parametrize("outcome", ["admitted", "denied", "admitted after a read"])
def test_round_trips_and_commits_of_a_managed_reservation(store: Store, outcome: str, bench_row: Any) -> None:
    clock = FixedClock(T0)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    admission = Admission(store, clock)
    admitted_units: list[object] = []
    if outcome == "denied":
        assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t0", trigger_time=T0).admitted
        clock.advance(timedelta(seconds=1))
    admission.eligibility("g", "a", "x")  # the hot connection is open before counting starts
    with on_the_wire(store) as counts:
        decision = admission.reserve(
            goal="g",
            agent="a",
            automation="x",
            turn_id="t1",
            trigger_time=clock.now(),
            journal=journal_entry("t1", T0),
            on_admit=admitted_units.append,
            read_may_admit=outcome == "admitted after a read",
        )
    assert decision.admitted is (outcome != "denied")
    assert len(admitted_units) == (outcome != "denied")
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert (counts["round_trips"], counts["commits"]) == MANAGED[(backend, outcome)]
    commits = 0 if outcome == "denied" else 1
    bench_row(
        f"managed turn's reservation, {outcome}: round trips / commits ({backend})",
        f"{counts['round_trips']} / {counts['commits']}",
        "1 commit (reservation, journal and mission together)" if commits else "0 commits (nothing written)",
        counts["commits"] == commits,
    )


# A lane whose rules carry counts or budgets (issue 20), every limit kind configured. Its first
# decision in a process is checked by the slow path (the plain read, then the rules, each series'
# starts or usage, the prices, the estimate's usage and the model in one read transaction), which
# also keeps the lane's limit definitions in this process (``admission._limit_read``). Every later
# decision reads the facts and all of the lane's limits in one statement: a denial is one round
# trip on PostgreSQL and one read statement on SQLite, whether the floor or the count denies.
LIMITED = {
    ("sqlite", "interval_wait"): 1,
    ("postgresql", "interval_wait"): 1,
    ("sqlite", "count_exhausted"): 1,
    ("postgresql", "count_exhausted"): 1,
}


def _every_limit_kind(store: Store, clock: FixedClock, floor: timedelta, starts: int) -> Admission:
    limits = LimitsChange(max_starts=starts, budget_tokens=1000, budget_usd=Decimal(5), estimate_tokens=10, per=parse_window("1d"))
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=floor, expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    return Admission(store, clock)


@contextmanager
def statements(store: Store) -> Iterator[tuple[dict[str, int], list[str]]]:
    """``counted``, with the statements sent on the pool's connections besides (the slow path's read)."""
    pooled: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        pooled.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        with counted(store) as counts:
            yield counts, pooled
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)


@pytest.mark.parametrize("denied_by", ["interval_wait", "count_exhausted"])
def test_round_trips_of_a_denial_with_every_limit_kind(store: Store, denied_by: str) -> None:
    limit_read.forget_all()  # this process has not seen the lane: its first decision fills the cache
    clock = FixedClock(T0)
    floor = timedelta(hours=1) if denied_by == "interval_wait" else timedelta(0)
    starts = 2 if denied_by == "interval_wait" else 1  # the floor denies with the count not yet full
    admission = _every_limit_kind(store, clock, floor, starts)
    admission.eligibility("g", "a", "x")
    with statements(store) as (_first, first_pooled):
        assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=clock.now()).admitted
    assert len(first_pooled) > 1  # the slow path checked it (and kept its definitions)
    clock.advance(timedelta(seconds=1))
    with statements(store) as (counts, pooled):
        denied = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=clock.now())
    assert (denied.admitted, denied.reason.value) == (False, denied_by)
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert (counts["round_trips"] + len(pooled), counts["commits"]) == (LIMITED[(backend, denied_by)], 0), pooled


# The serialized decision of a known limited lane reads its limits in one statement too (under the
# lock, in the admitting transaction, a bare driver transaction as a floor's is), never the slow
# path's several. On the wire, SQLite: the plain read; BEGIN IMMEDIATE, the facts and the limits
# in one statement, the start, the held estimate (one INSERT that leaves a turn already held
# alone), COMMIT. PostgreSQL: the plain read; then one pipeline, the lock and fg_facts + fg_admit
# with the estimate held, guarded by the limits the plain read found (``_limit_guard``): its
# implicit transaction commits at its end with no COMMIT message, as the floor's autocommitted
# statement does. No alert crosses here (2 of 5 starts). The turn holds its estimate either way.
KNOWN_ADMISSION = {"sqlite": (6, 1), "postgresql": (2, 0)}


def test_an_admission_with_every_limit_kind_reads_its_limits_once(store: Store) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _every_limit_kind(store, clock, timedelta(0), 5)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=clock.now()).admitted
    clock.advance(timedelta(seconds=1))
    with on_the_wire(store) as counts:
        assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=clock.now()).admitted
    assert (counts["round_trips"], counts["commits"]) == KNOWN_ADMISSION[store.dialect]
    held = raw_sql(store, "SELECT state, estimate_tokens, model FROM fg_usage WHERE turn_id = 't2'")
    assert held == [("held", 10, "m")]


# A lane without a USD budget gathers no prices in its one statement.
def test_a_lane_without_a_usd_budget_reads_no_prices(store: Store) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    limits = LimitsChange(max_starts=1, budget_tokens=1000, estimate_tokens=10, per=parse_window("1d"))
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    admission = Admission(store, clock)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=clock.now()).admitted
    clock.advance(timedelta(seconds=1))
    with statements(store) as (counts, pooled):
        denied = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=clock.now())
    assert (denied.admitted, denied.reason.value) == (False, "count_exhausted")
    assert (counts["round_trips"], pooled) == (1, [])
    lane = limit_read.known("g", "a", "x")
    assert lane is not None and "fg_model_prices" not in limit_read.statement(store.dialect, store.relaxed, lane.shape, True)


# A goal floor (issue 20 item 4), with or without ``--across agents``, costs what an agent's floor
# costs (``EXPECTED``), even as the first decision of a process: the goal's floor and latest start
# are facts of the one read, and a goal floor alone is no limit for the client to check; fg_admit
# takes the goal's lock itself when it may admit (tests/test_concurrency_limits.py races it).
GOAL_FLOOR = {
    (b, op, across): EXPECTED[(b, op)][0] for b in ("sqlite", "postgresql") for op in ("denied", "admitted") for across in (False, True)
}


@pytest.mark.parametrize(
    ("outcome", "across"),
    [("denied", False), ("admitted", False), ("denied", True), ("admitted", True)],
    ids=["per-agent-denied", "per-agent-admitted", "across-agents-denied", "across-agents-admitted"],
)
def test_round_trips_of_a_goal_floor(store: Store, outcome: str, across: bool) -> None:
    clock = FixedClock(T0)
    Policies(store, clock).configure(
        Scope.parse("g"),
        min_interval=timedelta(hours=1),
        expected_revision=0,
        owner_ref="o",
        limits=LimitsChange(across_agents=True) if across else None,
    )
    admission = Admission(store, clock)
    admission.eligibility("g", "a", "x")
    if outcome == "denied":
        assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=clock.now()).admitted
        clock.advance(timedelta(seconds=1))
    pooled: list[str] = []  # statements on the pool's connections (the lane's check), besides the hot path's

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        pooled.append(statement)

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        with counted(store) as counts:
            decision = admission.reserve(goal="g", agent="b" if across else "a", automation="x", turn_id="t2", trigger_time=clock.now())
    finally:
        event.remove(store.engine, "before_cursor_execute", seen)
    assert (decision.admitted, decision.reason.value) == (outcome == "admitted", "eligible" if outcome == "admitted" else "interval_wait")
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert counts["round_trips"] + len(pooled) == GOAL_FLOOR[(backend, outcome, across)], pooled


# A host's managed begin after its plain read (``_ticking``: the tick's envelope precheck and wake
# state read already): the reservation, the journal row counting its attempt, the mission opened
# (under the automation's lock), its turn counted and the attempt linked to it, in one commit. The
# mission and the journal row were inserted in this unit, so counting and linking them take no lock.
# PostgreSQL: BEGIN, fg_facts + fg_admit, journal row, automation lock, mission read, mission insert,
# count, link, COMMIT. SQLite: the plain read, BEGIN IMMEDIATE, facts, start, journal row, mission
# read, mission insert, count, link, COMMIT.
HOST_BEGIN = {"postgresql": (9, 1), "sqlite": (10, 1)}


def test_round_trips_of_a_hosts_managed_begin(store: Store, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    automation = add_automation(store, clock)
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="enforce")
    pre, wake = executor.gate.precheck(automation), Automations(store, clock).wake_state("x")
    executor.admission.eligibility("g", "a", "x")  # the hot connection is open before counting starts
    with on_the_wire(store) as counts:
        begun = executor.begin(
            automation, nominal=clock.now(), turn_id="x-t1", minted=True, overlap_checked=True, pre=pre, wake=wake, read_may_admit=True
        )
    assert isinstance(begun, Admitted)
    assert [(counted, mission.turns) for counted, mission in begun.begun] == [(True, 1)]
    record = Journal(store).get("x-t1")
    assert record is not None and (record.attempt, record.mission_id) == (1, begun.begun[0][1].mission_id)
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert (counts["round_trips"], counts["commits"]) == HOST_BEGIN[backend]


# Without a mission (envelopes disabled), the attempt number is the automation's attempts so far plus
# one, counted by the journal row's insert.
def test_the_journal_row_counts_its_attempt(store: Store, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    automation = add_automation(store, clock)
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock, mode="disabled")
    for n in (1, 2):
        begun = executor.begin(automation, nominal=clock.now(), turn_id=f"x-t{n}", minted=True, overlap_checked=True)
        assert isinstance(begun, Admitted), begun
        record = Journal(store).get(f"x-t{n}")
        assert record is not None and record.attempt == n
        clock.advance(timedelta(hours=1))


# The caller's read may predate a count or budget, or come from a process that never saw the lane
# limited: then the locked statement finds limits it did not check, and the lane is decided the usual
# way (its limits read and checked), never denied as unreadable nor admitted past its count.
def test_a_lane_limited_since_the_callers_read_is_decided_with_its_limits(store: Store) -> None:
    clock = FixedClock(T0)
    limits = LimitsChange(max_starts=1, per=parse_window("1d"))
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    admission = Admission(store, clock)
    reasons = []
    for n in (1, 2):
        limit_read.forget_all()
        decision = admission.reserve(
            goal="g",
            agent="a",
            automation="x",
            turn_id=f"t{n}",
            trigger_time=clock.now(),
            journal=journal_entry(f"t{n}", T0),
            read_may_admit=True,
        )
        reasons.append(decision.reason.value)
        clock.advance(timedelta(seconds=1))
    assert reasons == ["eligible", "count_exhausted"]


# Issue 20 item 4: what each lane's decisions cost, on the wire (every connection the store uses),
# side by side: (a) a plain floor on the agent, (b) a goal floor across agents and nothing else,
# (c) every limit kind (a count, a token and a USD budget) on the agent beside its floor. Each
# decision follows a first one in this process (``Admission.denial``, or the admission its denial
# follows), which the lane's limits need to be read in one statement. (b) denies when another agent
# of the goal started a second ago. Commits are COMMIT messages: PostgreSQL's bare admission is one
# autocommitted statement (fg_facts + fg_admit) and sends none.
# SQLite, bare admission: the plain read; BEGIN IMMEDIATE, facts, the start, COMMIT. Managed: the
# journal row before COMMIT. PostgreSQL, managed: the plain read (none after the caller's read);
# BEGIN, fg_facts + fg_admit, the journal row, COMMIT. (c) adds, in the admitting transaction, the
# lane's limit read and its held estimate (and on PostgreSQL the agent's lock before them; there the
# reservation guarded by the plain read, holding the estimate in the same statement, stands for
# both, ``_limit_guard.reserve_on``: BEGIN, the lock, it, the journal row, COMMIT); its bare
# admission reads the facts with its limits in one statement on SQLite, and on PostgreSQL sends,
# after the plain read, one pipeline: the lock, and fg_facts + fg_admit + the hold guarded by the
# limits that read found (its implicit transaction sends no COMMIT).
_PLAIN = {
    ("sqlite", "denied"): (1, 0),
    ("sqlite", "admitted"): (5, 1),
    ("sqlite", "managed denied"): (1, 0),
    ("sqlite", "managed admitted"): (6, 1),
    ("sqlite", "managed admitted after a read"): (6, 1),
    ("postgresql", "denied"): (1, 0),
    ("postgresql", "admitted"): (1, 0),
    ("postgresql", "managed denied"): (1, 0),
    ("postgresql", "managed admitted"): (5, 1),
    ("postgresql", "managed admitted after a read"): (4, 1),
}
LANES = {
    **{("plain-floor", *k): v for k, v in _PLAIN.items()},
    # The goal's floor is one of the facts and fg_admit takes the goal's lock itself: a plain floor's costs.
    **{("goal-floor-across-agents", *k): v for k, v in _PLAIN.items()},
    **{
        ("every-limit-kind", *k): v
        for k, v in {
            ("sqlite", "denied"): (1, 0),
            ("sqlite", "admitted"): (6, 1),
            ("sqlite", "managed denied"): (1, 0),
            ("sqlite", "managed admitted"): (8, 1),
            ("sqlite", "managed admitted after a read"): (8, 1),
            ("postgresql", "denied"): (1, 0),
            ("postgresql", "admitted"): (2, 0),
            ("postgresql", "managed denied"): (1, 0),
            ("postgresql", "managed admitted"): (6, 1),
            ("postgresql", "managed admitted after a read"): (6, 1),
        }.items()
    },
}
OPERATIONS = ["denied", "admitted", "managed denied", "managed admitted", "managed admitted after a read"]


def _lane(store: Store, clock: FixedClock, lane: str) -> Admission:
    if lane == "every-limit-kind":
        return _every_limit_kind(store, clock, timedelta(hours=1), 5)
    across = lane == "goal-floor-across-agents"
    Policies(store, clock).configure(
        Scope.parse("g" if across else "g/a"),
        min_interval=timedelta(hours=1),
        expected_revision=0,
        owner_ref="o",
        limits=LimitsChange(across_agents=True) if across else None,
    )
    return Admission(store, clock)


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("lane", ["plain-floor", "goal-floor-across-agents", "every-limit-kind"])
def test_round_trips_per_lane(store: Store, lane: str, operation: str) -> None:
    limit_read.forget_all()
    clock = FixedClock(T0)
    admission = _lane(store, clock, lane)
    denied = operation.endswith("denied")
    if denied:  # a start a second ago: by another agent of the goal where the floor counts across them
        other = ("b", "y") if lane == "goal-floor-across-agents" else ("a", "x")
        assert admission.reserve(goal="g", agent=other[0], automation=other[1], turn_id="t0", trigger_time=T0).admitted
        clock.advance(timedelta(seconds=1))
    else:
        assert admission.denial(goal="g", agent="a", automation="x", turn_id="t0", trigger_time=T0) is None
    managed = operation.startswith("managed")
    with on_the_wire(store) as counts:
        decision = admission.reserve(
            goal="g",
            agent="a",
            automation="x",
            turn_id="t1",
            trigger_time=clock.now(),
            journal=journal_entry("t1", clock.now()) if managed else None,
            read_may_admit=operation.endswith("after a read"),
        )
    assert (decision.admitted, decision.reason.value) == (not denied, "interval_wait" if denied else "eligible")
    backend = "postgresql" if store.dialect == "postgresql" else "sqlite"
    assert (counts["round_trips"], counts["commits"]) == LANES[(lane, backend, operation)]
