"""The limit mark of a SQLite store (migration 0032): a known lane's decision that finds the mark
unchanged reuses its last limit check instead of reading its limit rows again, and any change to
those rows, by any process, replaces the mark, so the next decision reads them. PostgreSQL
stores carry no triggers and are never marked (their decisions read their limits every time)."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from basics import T0

from floorgate.admission import Admission, Decision, FixedClock, Policies, Scope, Store, open_store
from floorgate.admission import _limit_read as limit_read
from floorgate.admission._upgrade import LIMIT_MARK_TRIGGERS
from floorgate.admission.limits import LimitsChange
from floorgate.admission.usage import Prices
from floorgate.admission.windows import parse_window

from helpers import add_automation

DAY = parse_window("1d")


def _lane(store: Store, clock: FixedClock, max_starts: int = 2) -> Admission:
    limits = LimitsChange(max_starts=max_starts, budget_tokens=10_000, budget_usd=Decimal(5), estimate_tokens=10, per=DAY)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    return Admission(store, clock)


@contextlib.contextmanager
def _admitted_once(path: str, max_starts: int = 2, clock: FixedClock | None = None) -> Iterator[tuple[FixedClock, Admission]]:
    """The store at ``path`` with ``_lane``'s limits and one start admitted (turn ``t1``), at
    ``clock`` (a fixed one at T0 when None); closed on leaving."""
    store = open_store(path)
    try:
        clock = FixedClock(T0) if clock is None else clock
        admission = _lane(store, clock, max_starts)
        assert _reserve(admission, "t1", clock).admitted
        yield clock, admission
    finally:
        store.close()


def _priced_lane(store: Store, clock: FixedClock) -> None:
    """A $0.05 daily budget with a 10,000-token estimate on g/a; model ``m`` at $1 and ``big`` at
    $1000 per million tokens; automation ``x`` on ``m``."""
    limits = LimitsChange(budget_usd=Decimal("0.05"), estimate_tokens=10_000, per=DAY)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(0), expected_revision=0, owner_ref="o", limits=limits)
    prices = Prices(store, clock)
    prices.set("m", Decimal(1), expected_revision=0, owner_ref="o")
    prices.set("big", Decimal(1000), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")


def _reserve(admission: Admission, turn: str, clock: FixedClock) -> Decision:
    return admission.reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=clock.now())


def _denial(admission: Admission, turn: str, at: datetime) -> str | None:
    """The reason a reserve now would be denied for (None: it may admit)."""
    found = admission.denial(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=at)
    return None if found is None else found.reason.value


def _checks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times a known lane's limits were checked from rows read (not reused)."""
    calls = [0]
    real = limit_read._check

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(limit_read, "_check", counting)
    return calls


def _other_process(path: str, sql: str) -> None:
    """``sql`` (one or more statements) committed by another process, through plain sqlite3 (a
    hand edit, or another tool)."""
    code = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit(); c.close()"
    subprocess.run([sys.executable, "-c", code, path, sql], check=True, timeout=60)


def test_only_a_sqlite_store_is_marked(store: Store) -> None:
    assert store.marked == (store.dialect == "sqlite")


# Each change to what a known lane's limits read, written by another process after this one
# decided (and kept its check): the next decision sees it.
CHANGES = [
    pytest.param(
        "INSERT INTO fg_starts SELECT 'other', goal_id, agent_id, automation_id, trigger_us + 1, anchor_us + 1, phase, kind, "
        "manual_reason, confirmed_at_us FROM fg_starts WHERE turn_id = 't1'",
        "count_exhausted",
        id="a-start-inserted",
    ),
    pytest.param(
        "UPDATE fg_usage SET state = 'settled', tokens = 10000, settled_at_us = at_us WHERE turn_id = 't1'",
        "budget_exhausted",
        id="usage-settled",
    ),
    pytest.param("UPDATE fg_rules SET max_starts = 1", "count_exhausted", id="a-rule-tightened"),
    pytest.param("UPDATE fg_model_prices SET usd_per_mtok_micros = NULL", "budget_exhausted", id="the-price-removed"),
    pytest.param("UPDATE fg_automations SET model = 'unpriced'", "budget_exhausted", id="the-model-changed"),
]


@pytest.mark.parametrize(("sql", "reason"), CHANGES)
def test_a_change_by_another_process_is_seen_by_the_next_decision(
    sqlite_db: str, monkeypatch: pytest.MonkeyPatch, sql: str, reason: str
) -> None:
    with _admitted_once(sqlite_db) as (clock, admission):
        checks = _checks(monkeypatch)
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d1", clock.now()) is None
        assert checks[0] == 1  # read, and kept
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d2", clock.now()) is None
        assert checks[0] == 1  # the mark unchanged: kept check reused, no limit row read
        _other_process(sqlite_db, sql)
        assert _denial(admission, "d3", clock.now()) == reason


def test_a_start_deleted_by_another_process_frees_the_count(sqlite_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _admitted_once(sqlite_db, max_starts=1) as (clock, admission):
        checks = _checks(monkeypatch)
        for turn in ("d1", "d2"):
            clock.advance(timedelta(minutes=1))
            assert _denial(admission, turn, clock.now()) == "count_exhausted"
        assert checks[0] == 1
        _other_process(sqlite_db, "DELETE FROM fg_starts WHERE turn_id = 't1'")
        assert _denial(admission, "d3", clock.now()) is None


def test_a_kept_check_stands_until_a_start_leaves_its_window(sqlite_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Time alone changes what a rolling window holds: the kept check is reused one microsecond
    before the earliest start leaves, and read again at that instant (which then admits)."""
    with _admitted_once(sqlite_db, max_starts=1) as (clock, admission):
        checks = _checks(monkeypatch)
        clock.advance(timedelta(hours=1))
        assert _denial(admission, "d1", clock.now()) == "count_exhausted"
        clock.set(T0 + timedelta(days=1) - timedelta(microseconds=1))
        assert _denial(admission, "d2", clock.now()) == "count_exhausted"
        assert checks[0] == 1
        clock.set(T0 + timedelta(days=1))
        assert _denial(admission, "d3", clock.now()) is None
        assert checks[0] == 2


def test_a_clock_gone_back_reads_again(sqlite_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _admitted_once(sqlite_db) as (clock, admission):
        checks = _checks(monkeypatch)
        clock.advance(timedelta(hours=1))
        assert _denial(admission, "d1", clock.now()) is None
        clock.advance(-timedelta(minutes=30))
        assert _denial(admission, "d2", clock.now()) is None
        assert checks[0] == 2  # not reused for an instant before the one it was read at


@pytest.mark.parametrize("trigger", sorted(LIMIT_MARK_TRIGGERS))
def test_a_store_missing_a_mark_trigger_reads_its_limits_every_time(sqlite_db: str, monkeypatch: pytest.MonkeyPatch, trigger: str) -> None:
    """A trigger lost (a table rebuilt by hand drops its own): the store opens unmarked, and a
    change the lost trigger would have marked is still seen."""
    with sqlite3.connect(sqlite_db) as conn:
        conn.execute(f"DROP TRIGGER {trigger}")
    store = open_store(sqlite_db)
    try:
        assert not store.marked
        clock = FixedClock(T0)
        admission = _lane(store, clock)
        assert _reserve(admission, "t1", clock).admitted
        checks = _checks(monkeypatch)
        for turn in ("d1", "d2"):
            clock.advance(timedelta(minutes=1))
            assert _denial(admission, turn, clock.now()) is None
        assert checks[0] == 2
        _other_process(sqlite_db, "UPDATE fg_rules SET max_starts = 1")
        assert _denial(admission, "d3", clock.now()) == "count_exhausted"
    finally:
        store.close()


def test_two_stores_with_one_lane_keep_their_own_checks(tmp_path: Any, sqlite_db: str) -> None:
    """A copy of a store (same rows, same mark) opened beside it: each decides from its own rows."""
    clock = FixedClock(T0)
    first = open_store(sqlite_db)
    copy = tmp_path / "copy.db"
    try:
        admission = _lane(first, clock, max_starts=1)
        with sqlite3.connect(sqlite_db) as src, sqlite3.connect(copy) as dst:
            src.backup(dst)
        assert _reserve(admission, "t1", clock).admitted
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d1", clock.now()) == "count_exhausted"
        second = open_store(str(copy))
        try:
            assert _denial(Admission(second, clock), "d1", clock.now()) is None
        finally:
            second.close()
    finally:
        first.close()


_ANOTHER_START = (
    "INSERT INTO fg_starts SELECT 'other', goal_id, agent_id, automation_id, trigger_us + 1, anchor_us + 1, phase, kind, "
    "manual_reason, confirmed_at_us FROM fg_starts WHERE turn_id = 't1';"
)
_RECREATE = (
    "CREATE TRIGGER fg_limit_mark_starts_insert AFTER INSERT ON fg_starts BEGIN UPDATE fg_limit_mark SET n = random() WHERE k = 0; END;"
)


@pytest.mark.parametrize(
    "sql",
    [
        pytest.param("DROP TRIGGER fg_limit_mark_starts_insert; " + _ANOTHER_START, id="dropped-then-a-start"),
        pytest.param("DROP TRIGGER fg_limit_mark_starts_insert; " + _ANOTHER_START + _RECREATE, id="dropped-a-start-and-remade"),
    ],
)
def test_a_trigger_dropped_while_this_process_runs_is_seen(sqlite_db: str, monkeypatch: pytest.MonkeyPatch, sql: str) -> None:
    """The store opened marked; another process then drops a trigger and writes what it would have
    marked (and may make it again): the schema's version the mark is read with has changed, so
    the kept check is not reused, and nothing is kept until the triggers are seen intact."""
    with _admitted_once(sqlite_db) as (clock, admission):
        assert admission.store.marked
        checks = _checks(monkeypatch)
        for turn in ("d1", "d2"):
            clock.advance(timedelta(minutes=1))
            assert _denial(admission, turn, clock.now()) is None
        assert checks[0] == 1  # kept
        _other_process(sqlite_db, sql)
        assert _denial(admission, "d3", clock.now()) == "count_exhausted"
        reserved = _reserve(admission, "t3", clock)
        assert (reserved.admitted, reserved.reason.value) == (False, "count_exhausted")


def test_a_store_whose_trigger_went_missing_keeps_nothing(sqlite_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with _admitted_once(sqlite_db) as (clock, admission):
        _other_process(sqlite_db, "DROP TRIGGER fg_limit_mark_usage_update;")
        checks = _checks(monkeypatch)
        for turn in ("d1", "d2", "d3"):
            clock.advance(timedelta(minutes=1))
            assert _denial(admission, turn, clock.now()) is None
        assert checks[0] == 3  # read every time: the mark no longer covers every change
        _other_process(sqlite_db, "UPDATE fg_usage SET state = 'settled', tokens = 10000, settled_at_us = at_us WHERE turn_id = 't1';")
        assert _denial(admission, "d4", clock.now()) == "budget_exhausted"


def test_a_model_that_is_not_text_counts_as_no_model_on_every_path(sqlite_db: str) -> None:
    """A damaged model (a BLOB: the column's text affinity turns a number into text) is no model: its usage is priced at the highest price known (the
    slow path's reading), never read as the text it would turn into; a budget the cheap price
    leaves room in but the highest does not is exhausted, on the first decision and the next."""
    store = open_store(sqlite_db)
    try:
        clock = FixedClock(T0)
        _priced_lane(store, clock)
        admission = Admission(store, clock)
        assert _denial(admission, "d0", clock.now()) is None  # at m's price: $0.01 of $0.05
        _other_process(sqlite_db, "UPDATE fg_automations SET model = CAST('m' AS BLOB);")
        for turn in ("d1", "d2", "d3"):
            clock.advance(timedelta(minutes=1))
            assert _denial(admission, turn, clock.now()) == "budget_exhausted"
        reserved = _reserve(admission, "t1", clock)
        assert (reserved.admitted, reserved.reason.value) == (False, "budget_exhausted")
    finally:
        store.close()


class _Ticking(FixedClock):
    """A clock that moves on by a millisecond each time it is read (while ``ticking``)."""

    ticking = True

    def now(self) -> datetime:
        found = super().now()
        if self.ticking:
            self.advance(timedelta(milliseconds=1))
        return found


def test_a_kept_check_stands_from_the_instant_it_was_checked_at(sqlite_db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decision reads the clock before its statement (the windows' starts) and checks at the
    clock read after it: what it keeps holds from that later instant, so a decision between the
    two checks for itself."""
    with _admitted_once(sqlite_db, clock=_Ticking(T0)) as (clock, admission):
        checks = _checks(monkeypatch)
        read_at: list[datetime] = []
        real = limit_read.known_params

        def params(lane: Any, req: Any, before: datetime, before_us: int | None = None) -> dict[str, Any]:
            read_at.append(before)
            return real(lane, req, before, before_us)

        monkeypatch.setattr(limit_read, "known_params", params)
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d1", clock.now()) is None
        assert checks[0] == 1 and len(read_at) == 1
        clock.ticking = False
        clock.set(read_at[0] + timedelta(microseconds=500))  # after its read's instant, before its check's
        assert _denial(admission, "d2", clock.now()) is None
        assert checks[0] == 2
        clock.advance(timedelta(seconds=1))
        assert _denial(admission, "d3", clock.now()) is None
        assert checks[0] == 2  # and from its own instant on, kept


def _fresh_process(admission: Admission, turn: str, at: datetime) -> str | None:
    """What a process that knows and keeps nothing (the slow path) decides."""
    limit_read.forget_all()
    return _denial(admission, turn, at)


# An automation's id changed by another process moves another model onto the lane: its id is
# watched as its model is (a REPLACE's conflict delete fires no trigger; its update does).
@pytest.mark.parametrize(
    "sql",
    [
        pytest.param(
            "UPDATE fg_automations SET automation_id = 'tmp' WHERE automation_id = 'x';"
            "UPDATE fg_automations SET automation_id = 'x' WHERE automation_id = 'y';"
            "UPDATE fg_automations SET automation_id = 'y' WHERE automation_id = 'tmp';",
            id="ids-swapped",
        ),
        pytest.param("UPDATE OR REPLACE fg_automations SET automation_id = 'x' WHERE automation_id = 'y';", id="update-or-replace"),
    ],
)
def test_an_automation_renamed_onto_the_lane_brings_its_model(sqlite_db: str, sql: str) -> None:
    store = open_store(sqlite_db)
    try:
        clock = FixedClock(T0)
        _priced_lane(store, clock)
        add_automation(store, clock, "y", model="big")
        admission = Admission(store, clock)
        for turn in ("d0", "d1"):  # learnt, then kept
            clock.advance(timedelta(minutes=1))
            assert _denial(admission, turn, clock.now()) is None
        _other_process(sqlite_db, sql)
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d2", clock.now()) == "budget_exhausted"
        assert not _reserve(admission, "t2", clock).admitted
        assert _fresh_process(admission, "d3", clock.now()) == "budget_exhausted"
    finally:
        store.close()


# A trigger is intact only as the migration wrote it: one remade under its name with another
# body, or one whose body SQLite rewrote (the mark's table renamed in a hand rebuild), is not.
@pytest.mark.parametrize(
    "sql",
    [
        pytest.param(
            "DROP TRIGGER fg_limit_mark_starts_insert;"
            "CREATE TRIGGER fg_limit_mark_starts_insert AFTER INSERT ON fg_starts WHEN 0 BEGIN SELECT 1; END;",
            id="trigger-remade",
        ),
        pytest.param(
            "ALTER TABLE fg_limit_mark RENAME TO fg_limit_mark_old;"
            "CREATE TABLE fg_limit_mark (k INTEGER NOT NULL PRIMARY KEY, n BIGINT NOT NULL);"
            "INSERT INTO fg_limit_mark SELECT * FROM fg_limit_mark_old;",
            id="mark-table-rebuilt",
        ),
    ],
)
def test_a_trigger_remade_with_another_body_is_not_intact(sqlite_db: str, sql: str) -> None:
    store = open_store(sqlite_db)
    try:
        clock = FixedClock(T0)
        admission = _lane(store, clock)  # at most 2 starts a day
        assert _reserve(admission, "t1", clock).admitted
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d1", clock.now()) is None
        _other_process(sqlite_db, sql)
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d2", clock.now()) is None  # the version changed: read again
        _other_process(sqlite_db, _ANOTHER_START)  # which the remade trigger does not mark
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d3", clock.now()) == "count_exhausted"
        assert not admission.reserve(goal="g", agent="a", automation="x", turn_id="t3", trigger_time=clock.now()).admitted
        assert _fresh_process(admission, "d4", clock.now()) == "count_exhausted"
    finally:
        store.close()


def test_the_mark_table_dropped_denies(sqlite_db: str) -> None:
    with _admitted_once(sqlite_db) as (clock, admission):
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d1", clock.now()) is None
        _other_process(sqlite_db, "DROP TABLE fg_limit_mark;")
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d2", clock.now()) == "state_unavailable"
        assert not _reserve(admission, "t2", clock).admitted


def test_a_usage_row_whose_id_is_not_text_denies_on_every_path(sqlite_db: str) -> None:
    """A usage row the slow path cannot decode (its turn id a BLOB) fails the one-statement read
    too, though the read sums usage by groups and never returns the row's ids."""
    with _admitted_once(sqlite_db) as (clock, admission):
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d1", clock.now()) is None
        with sqlite3.connect(sqlite_db) as conn:
            cols = [r[1] for r in conn.execute("PRAGMA table_info(fg_usage)")]
        picked = ", ".join("CAST('t9' AS BLOB)" if c == "turn_id" else c for c in cols)
        _other_process(sqlite_db, f"INSERT INTO fg_usage ({', '.join(cols)}) SELECT {picked} FROM fg_usage WHERE turn_id = 't1';")
        clock.advance(timedelta(minutes=1))
        assert _denial(admission, "d2", clock.now()) == "state_unavailable"
        assert not _reserve(admission, "t2", clock).admitted
        assert _fresh_process(admission, "d3", clock.now()) == "state_unavailable"


def _mark(path: str) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT n FROM fg_limit_mark WHERE k = 0").fetchone()[0])


_START = (
    "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind) "
    "VALUES ('{turn}', {goal}, 'a', 'x', 1, 1, 'reserved', 'automatic')"
)
MARKED_WRITES = [
    pytest.param("'free'", "UPDATE fg_starts SET phase = 'confirmed' WHERE goal_id = 'free'", False, id="confirm-in-a-goal-without-limits"),
    pytest.param("'g'", "UPDATE fg_starts SET phase = 'confirmed' WHERE goal_id = 'g'", True, id="confirm-in-a-limited-goal"),
    pytest.param("'free'", "DELETE FROM fg_starts WHERE goal_id = 'free'", False, id="delete-in-a-goal-without-limits"),
    pytest.param("'free'", "UPDATE fg_starts SET goal_id = 'g' WHERE goal_id = 'free'", True, id="moved-into-a-limited-goal"),
]


@pytest.mark.parametrize(
    ("goal", "expected"),
    [
        pytest.param("'free'", False, id="a-goal-without-limits"),
        pytest.param("'g'", True, id="a-limited-goal"),
        pytest.param("x'00'", True, id="a-key-that-is-not-text"),
    ],
)
def test_a_start_replaces_the_mark_only_where_a_limit_may_read_it(sqlite_db: str, goal: str, expected: bool) -> None:
    """Migration 0033: a start (or usage row) in a goal no count or budget binds leaves the mark as
    it is (no limit read depends on it: a floor-only admission writes no page more); one in a
    limited goal, or with a damaged key, replaces it."""
    store = open_store(sqlite_db)
    try:
        _lane(store, FixedClock(T0))
        Policies(store, FixedClock(T0)).configure(
            Scope.parse("free/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o"
        )
    finally:
        store.close()
    before = _mark(sqlite_db)
    with contextlib.closing(sqlite3.connect(sqlite_db)) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(_START.format(turn="t-new", goal=goal))
        conn.commit()
    assert (_mark(sqlite_db) != before) is expected


@pytest.mark.parametrize(("goal", "sql", "expected"), MARKED_WRITES)
def test_a_changed_start_replaces_the_mark_only_where_a_limit_may_read_it(sqlite_db: str, goal: str, sql: str, expected: bool) -> None:
    store = open_store(sqlite_db)
    try:
        _lane(store, FixedClock(T0))
    finally:
        store.close()
    with contextlib.closing(sqlite3.connect(sqlite_db)) as conn:
        conn.execute(_START.format(turn="t-new", goal=goal))
        conn.commit()
    before = _mark(sqlite_db)
    with contextlib.closing(sqlite3.connect(sqlite_db)) as conn:
        conn.execute(sql)
        conn.commit()
    assert (_mark(sqlite_db) != before) is expected


def test_the_triggers_limited_goal_is_the_rule_admission_calls_limited() -> None:
    """The triggers' condition (migration 0033, as ``_upgrade`` checks it) is ``limited_rule``
    compiled: a limit kind added to one and not the other would leave its goal's writes unmarked."""
    from sqlalchemy.dialects import sqlite

    from floorgate.admission import _schema as s
    from floorgate.admission._upgrade import _LIMITED_GOAL
    from floorgate.admission.decide.facts import limited_rule

    assert f"({limited_rule(s.rules).compile(dialect=sqlite.dialect())})" == _LIMITED_GOAL
    assert all(_LIMITED_GOAL in sql for table, sql in LIMIT_MARK_TRIGGERS.values() if table in ("fg_starts", "fg_usage"))
