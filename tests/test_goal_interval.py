"""A goal rule's floor across agents (``--across agents``): one start-to-start series over all the
goal's agents, on SQLite and PostgreSQL, with exact boundaries (one microsecond before the goal's
next eligible time: denied; at it: admitted), manual runs bypassing it, and every readback giving
the same exact time and naming the goal. (Racing processes: tests/test_concurrency_limits.py.)"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from basics import T0
from sqlalchemy import text
from test_hostile_state import relax

from floorgate.admission import Admission, FixedClock, Policies, Reason, Scope, Store, open_store
from floorgate.admission import _limit_read as limit_read
from floorgate.admission import _locks as locks
from floorgate.admission.clock import iso
from floorgate.admission.decide._sql import compiled
from floorgate.admission.decide.facts import FACT
from floorgate.admission.limits import LimitsChange
from floorgate.admission.store import lock_id
from floorgate.admission.unit import UnitOfWork
from floorgate.admission.windows import parse_window

from cli import run_cli
from helpers import add_automation, journal_entry

FLOOR = timedelta(minutes=15)
US = timedelta(microseconds=1)


def _goal_floor(policies: Policies, *, across: bool = True, interval: timedelta = FLOOR) -> None:
    policies.configure(
        Scope.parse("g"),
        min_interval=interval,
        expected_revision=0,
        owner_ref="o",
        limits=LimitsChange(across_agents=True) if across else None,
    )


# (id, across agents, the second start's agent and automation, its offset after the first, admitted)
BOUNDARIES = [
    ("other-agent-1us-before", True, ("b", "y"), FLOOR - US, False),
    ("other-agent-at", True, ("b", "y"), FLOOR, True),
    ("other-agent-agent-wide-1us-before", True, ("b", None), FLOOR - US, False),
    ("other-agent-agent-wide-at", True, ("b", None), FLOOR, True),
    ("same-agent-other-lane-1us-before", True, ("a", "y"), FLOOR - US, False),
    ("same-agent-other-lane-at", True, ("a", "y"), FLOOR, True),
    ("per-agent-other-agent-admitted", False, ("b", "y"), timedelta(seconds=1), True),
    ("per-agent-same-agent-1us-before", False, ("a", "y"), FLOOR - US, False),
]


@pytest.mark.parametrize(("across", "second", "offset", "admitted"), [c[1:] for c in BOUNDARIES], ids=[c[0] for c in BOUNDARIES])
def test_the_goal_floor_counts_from_any_agents_start(
    policies: Policies,
    admission: Admission,
    clock: FixedClock,
    across: bool,
    second: tuple[str, str | None],
    offset: timedelta,
    admitted: bool,
) -> None:
    _goal_floor(policies, across=across)
    first = admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0)
    assert first.admitted and first.reason is Reason.ELIGIBLE
    clock.set(T0 + offset)
    agent, automation = second
    decision = admission.reserve(goal="g", agent=agent, automation=automation, turn_id="t2", trigger_time=T0 + offset)
    assert decision.admitted is admitted, decision.detail
    if not admitted:
        assert decision.reason is Reason.INTERVAL_WAIT
        assert decision.next_eligible_at == T0 + FLOOR  # exact, to the microsecond
        if across and agent != "a":
            assert "across the agents of goal g" in decision.detail


def test_the_goal_floor_is_start_to_start_over_the_latest_start(policies: Policies, admission: Admission, clock: FixedClock) -> None:
    """The series counts from the goal's latest start: a second agent's start moves it for all."""
    _goal_floor(policies)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    clock.set(T0 + FLOOR)
    assert admission.reserve(goal="g", agent="b", automation="y", turn_id="t2", trigger_time=T0 + FLOOR).admitted
    clock.set(T0 + 2 * FLOOR - US)
    late = admission.reserve(goal="g", agent="a", automation="x", turn_id="t3", trigger_time=T0 + 2 * FLOOR - US)
    assert (late.admitted, late.reason, late.next_eligible_at) == (False, Reason.INTERVAL_WAIT, T0 + 2 * FLOOR)
    clock.set(T0 + 2 * FLOOR)
    assert admission.reserve(goal="g", agent="c", automation="z", turn_id="t4", trigger_time=T0 + 2 * FLOOR).admitted


def test_a_longer_agent_floor_still_binds_its_own_agent(policies: Policies, admission: Admission, clock: FixedClock) -> None:
    """The goal floor across agents adds to the agent's own floors; the later time binds and the
    detail names the floor that binds."""
    _goal_floor(policies)
    policies.configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o")
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    clock.set(T0 + FLOOR)
    denied = admission.reserve(goal="g", agent="a", automation="x", turn_id="t2", trigger_time=T0 + FLOOR)
    assert (denied.reason, denied.next_eligible_at) == (Reason.INTERVAL_WAIT, T0 + timedelta(hours=1))
    assert "across the agents" not in denied.detail
    assert admission.reserve(goal="g", agent="b", automation="y", turn_id="t3", trigger_time=T0 + FLOOR).admitted


def test_manual_runs_bypass_the_goal_floor(policies: Policies, admission: Admission, clock: FixedClock) -> None:
    _goal_floor(policies)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    clock.set(T0 + timedelta(minutes=1))
    manual = admission.reserve(goal="g", agent="b", automation="y", turn_id="t2", trigger_time=clock.now(), manual_reason="owner asked")
    assert (manual.admitted, manual.reason) == (True, Reason.MANUAL)
    assert manual.detail == "manual run bypassed the interval"
    # The manual start is the goal's latest: the next automatic start counts from it.
    clock.set(T0 + timedelta(minutes=1) + FLOOR - US)
    denied = admission.reserve(goal="g", agent="c", automation="z", turn_id="t3", trigger_time=clock.now())
    assert (denied.reason, denied.next_eligible_at) == (Reason.INTERVAL_WAIT, T0 + timedelta(minutes=1) + FLOOR)


def test_every_readback_gives_the_goals_exact_next_time(policies: Policies, admission: Admission, clock: FixedClock) -> None:
    _goal_floor(policies)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    clock.set(T0 + FLOOR - US)
    one = admission.eligibility("g", "b", "y")
    assert (one.status, one.reason, one.next_eligible_at) == ("interval_wait", Reason.INTERVAL_WAIT, T0 + FLOOR)
    assert one.detail == "floor 15m across the agents of goal g not yet elapsed since the goal's last start"
    assert one.floor is not None and one.floor.goal_floor == FLOOR
    lanes = [("g", "b", "y"), ("g", "b", None), ("g", "c", "z")]
    assert {lane: e.next_eligible_at for lane, e in admission.eligibility_many(lanes).items()} == dict.fromkeys(lanes, T0 + FLOOR)
    assert {lane: e.detail for lane, e in admission.eligibility_many(lanes).items()} == dict.fromkeys(lanes, one.detail)
    assert admission.next_eligible_many(lanes) == dict.fromkeys(lanes, T0 + FLOOR)
    clock.set(T0 + FLOOR)
    assert admission.eligibility("g", "b", "y").status == "eligible"


def test_without_across_readback_is_per_agent(policies: Policies, admission: Admission, clock: FixedClock) -> None:
    _goal_floor(policies, across=False)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    clock.set(T0 + timedelta(minutes=1))
    assert admission.eligibility("g", "b", "y").status == "eligible"
    assert admission.next_eligible_many([("g", "b", "y")]) == {("g", "b", "y"): None}
    floor = admission.eligibility("g", "a", "x").floor
    assert floor is not None and floor.goal_floor == timedelta(0) and "goal_floor" not in floor.model_dump(exclude_unset=True)


def test_the_cli_readbacks_say_the_floor_counts_across_agents(sqlite_db: str) -> None:
    """``policy show``, ``status``, ``automation show`` and ``automation preview``: the goal floor
    across agents, named, and the exact next eligible time (the CLI reads the system clock)."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    clock = FixedClock(now)
    with open_store(sqlite_db) as store:
        _goal_floor(Policies(store, clock))
        add_automation(store, clock, "x", agent="a", schedule="DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=5")
        add_automation(store, clock, "y", agent="b", schedule="DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=5")
        assert Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=now).admitted
    at, named = iso(now + FLOOR), "floor 15m across the agents of goal g not yet elapsed since the goal's last start"
    shown = json.loads(run_cli("policy", "show", "g/b/y", "--json", db=sqlite_db).stdout)
    assert shown["eligibility"] == {"status": "interval_wait", "next_eligible_at": at, "detail": named}
    assert (shown["effective"]["goal_floor_seconds"], shown["effective"]["rules"][0]["across_agents"]) == (900, True)
    text = run_cli("policy", "show", "g/b/y", db=sqlite_db).stdout
    assert "effective floor for g/b/y: 15m across the agents of goal g (from g 15m across agents r1)" in text
    assert f"next eligible at {at} ({named})" in text
    status = {a["automation"]: a for a in json.loads(run_cli("status", "--json", db=sqlite_db).stdout)["automations"]}
    assert status["y"]["next_eligible_at"] == at
    assert named in run_cli("status", db=sqlite_db).stdout
    show = run_cli("automation", "show", "y", db=sqlite_db).stdout
    assert "floor:          15m across the agents of goal g" in show and f"next eligible:  {at}" in show
    preview = run_cli("automation", "preview", "y", db=sqlite_db).stdout
    assert "floor 15m across the agents of goal g" in preview
    fires = json.loads(run_cli("automation", "preview", "y", "--json", db=sqlite_db).stdout)
    assert fires["goal_floor_seconds"] == 900
    assert next(f for f in fires["fires"] if f["admitted"])["runs_at"] == at


def test_an_index_serves_the_goals_latest_start(store: Store) -> None:
    """The goal anchor fact walks ix_fg_starts_goal_anchor backwards: no scan, no sort (migration 0029),
    even where this goal's starts are the oldest and the planner would guess them spread evenly."""
    # 20 goals' starts; goal g's are the oldest, so walking every start backwards would pass the others'.
    rows = [
        {"t": f"t{i}", "g": "g" if i < 100 else f"g{i % 20}", "a": f"a{i % 7}", "x": f"x{i % 3}", "us": 1_000_000 + i} for i in range(2000)
    ]
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind)"
                " VALUES (:t, :g, :a, :x, :us, :us, 'confirmed', 'automatic')"
            ),
            rows,
        )
    _goal_floor(Policies(store, FixedClock(T0)))  # goal g's floor counts across its agents; g1's does not
    with store.engine.begin() as conn:
        # This store's tables only: a database-wide ANALYZE on PostgreSQL waits on (and can deadlock
        # with) the schemas other test workers create and drop meanwhile.
        conn.exec_driver_sql("ANALYZE fg_starts")
        conn.exec_driver_sql("ANALYZE fg_rules")
    sql = compiled(FACT["goal_anchor"].expr, store.dialect)
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            plan = " | ".join(str(r[-1]) for r in conn.execute(text("EXPLAIN QUERY PLAN SELECT " + sql), {"g": "g"}))
            assert "ix_fg_starts_goal_anchor" in plan and "TEMP B-TREE" not in plan and "SCAN fg_starts" not in plan, plan
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")  # a table this small would be read whole otherwise
            plan = " | ".join(str(r[0]) for r in conn.execute(text("EXPLAIN SELECT " + sql), {"g": "g"}))
            assert "ix_fg_starts_goal_anchor" in plan and "Sort" not in plan, plan
        assert conn.execute(text("SELECT " + sql), {"g": "g"}).scalar() == 1_000_099
        assert conn.execute(text("SELECT " + sql), {"g": "g1"}).scalar() is None  # read only for a goal with such a rule


# A damaged across flag on the goal's rule (SQLite keeps any value; PostgreSQL's column refuses all
# but NULL, once a hand rebuild dropped its NOT NULL): the goal's lanes deny, another goal's admit.
FLAGS = [("two", "2", "sqlite"), ("text", "'yes'", "sqlite"), ("null", "NULL", "postgresql")]


@pytest.mark.parametrize(("value", "backend"), [f[1:] for f in FLAGS], ids=[f[0] for f in FLAGS])
def test_a_damaged_across_flag_fails_closed(store: Store, value: str, backend: str) -> None:
    if store.dialect != backend:
        pytest.skip(f"{backend} only")
    clock = FixedClock(T0)
    _goal_floor(Policies(store, clock))
    if value == "NULL":
        store = relax(store, "fg_rules", "across_agents")
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE fg_rules SET across_agents = {value} WHERE goal_id = 'g'")
    admission = Admission(store, clock)
    denied = admission.reserve(goal="g", agent="b", automation="y", turn_id="t1", trigger_time=T0)
    assert (denied.admitted, denied.reason) == (False, Reason.STATE_UNAVAILABLE)
    assert admission.eligibility("g", "b", "y").status == "unavailable"
    assert admission.reserve(goal="h", agent="b", automation="y", turn_id="t2", trigger_time=T0).admitted


@pytest.mark.parametrize("across", [False, True], ids=["per-agent", "across-agents"])
def test_another_agents_damaged_anchor_holds_the_goal_only_across_agents(store: Store, across: bool) -> None:
    """The goal's latest start is read only for a goal whose floor counts across agents: there another
    agent's unreadable anchor makes the lane unavailable (fail closed); elsewhere it is not this lane's."""
    if store.dialect != "sqlite":
        pytest.skip("PostgreSQL's column type refuses the value")
    clock = FixedClock(T0)
    _goal_floor(Policies(store, clock), across=across)
    with store.engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind)"
            " VALUES ('t0', 'g', 'b', 'y', 1, 'yesterday', 'confirmed', 'automatic')"
        )
    assert Admission(store, clock).eligibility_many([("g", "a", "x")])[("g", "a", "x")].status == ("unavailable" if across else "eligible")
    decision = Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0)
    assert (decision.admitted, decision.reason) == ((False, Reason.STATE_UNAVAILABLE) if across else (True, Reason.ELIGIBLE))


def test_the_server_function_folds_the_goal_floor(store: Store) -> None:
    """PostgreSQL's fg_facts folds the goal floor from the goal's rule set across agents itself:
    another agent's start holds this agent's lane to the microsecond, a microsecond before the
    goal's next eligible time and at it."""
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's function only")
    clock = FixedClock(T0)
    _goal_floor(Policies(store, clock))
    assert Admission(store, clock).reserve(goal="g", agent="b", automation="y", turn_id="t1", trigger_time=T0).admitted
    decide = text("SELECT outcome FROM fg_facts('g', 'a', 'x', 'x', 't2', 1, :now, NULL, false, 0)")
    with store.engine.connect() as conn:
        anchor = conn.execute(text("SELECT anchor_us FROM fg_starts WHERE turn_id = 't1'")).scalar_one()
        due = anchor + FLOOR // US
        assert [conn.execute(decide, {"now": now}).scalar() for now in (due - 1, due)] == ["deny", "insert"]


def _advisory_locks(unit: UnitOfWork) -> set[int]:
    """The advisory locks (their bigint keys) the unit's PostgreSQL transaction holds."""
    held = unit.connection.exec_driver_sql(
        "SELECT (CAST(classid AS bigint) << 32) | CAST(objid AS bigint) FROM pg_locks"
        " WHERE locktype = 'advisory' AND objsubid = 1 AND pid = pg_backend_pid() AND granted"
    )
    return {row[0] for row in held}


@pytest.mark.parametrize("across", [True, False], ids=["across-agents", "per-agent"])
def test_the_locked_admission_takes_the_goals_lock_where_its_floor_counts_across_agents(store: Store, across: bool) -> None:
    """PostgreSQL's fg_admit takes the goal's lock before the agent's where the goal's floor counts
    across agents, and only there (agents of other goals, or of a goal whose floor is per agent, do
    not wait on each other); the unit notes it. SQLite's writer holds the whole file."""
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's advisory locks only")
    clock = FixedClock(T0)
    _goal_floor(Policies(store, clock), across=across)
    with store.unit() as unit:
        decision = Admission(store, clock).reserve(
            goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0, journal=journal_entry("t1", T0), unit=unit
        )
        advisory, keys = _advisory_locks(unit), unit.held
    assert decision.admitted, decision.detail
    assert lock_id(locks.agent("g", "a")) in advisory
    assert (lock_id(locks.goal("g")) in advisory, locks.goal("g") in keys) == (across, across)


def test_a_goal_floor_across_agents_denies_where_the_goals_lock_cannot_be_taken(store: Store) -> None:
    """A unit that already holds an agent's lock cannot take a goal's after it (admission's lock
    order): its reservation under a goal floor across agents is denied, never admitted under the
    agent's lock alone, and nothing is written."""
    if store.dialect != "postgresql":
        pytest.skip("PostgreSQL's lock order only (SQLite's writer holds the whole file)")
    clock = FixedClock(T0)
    _goal_floor(Policies(store, clock))
    admission = Admission(store, clock)
    with store.unit() as unit:
        unit.lock(locks.agent("g", "0"))  # an agent's key, before this agent's: the goal's would come after it
        decision = admission.reserve(
            goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0, journal=journal_entry("t1", T0), unit=unit
        )
    assert (decision.admitted, decision.reason) == (False, Reason.STATE_UNAVAILABLE)
    assert "goal g's floor counts across agents but its lock was not held" in decision.detail
    assert admission.start("t1") is None


def _known_limited_lane(store: Store) -> Admission:
    """Lane g/a/x with a count of its own under a goal floor across agents, admitted once so that
    this process knows it (its next decision reads its limits in one statement), the clock at the
    goal's next eligible time."""
    limit_read.forget_all()
    clock = FixedClock(T0)
    policies = Policies(store, clock)
    _goal_floor(policies)
    policies.configure(Scope.parse("g/a"), expected_revision=0, owner_ref="o", limits=LimitsChange(max_starts=100, per=parse_window("1d")))
    admission = Admission(store, clock)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t0", trigger_time=T0).admitted
    assert limit_read.known("g", "a", "x") is not None
    clock.set(T0 + FLOOR)
    return admission


def test_a_known_limited_lane_under_a_goal_floor_across_agents_takes_the_goals_lock(store: Store) -> None:
    """A lane with a count of its own under a goal floor across agents: once this process knows the
    lane (its first decision, by the slow path), its admission by the one-statement path still takes
    the goal's lock (before the agent's), so the goal's agents never race past its floor."""
    admission = _known_limited_lane(store)
    with store.unit() as unit:
        decision = admission.reserve(
            goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0 + FLOOR, journal=journal_entry("t1", T0 + FLOOR), unit=unit
        )
        keys = unit.held
        advisory = _advisory_locks(unit) if store.dialect == "postgresql" else {lock_id(locks.goal("g"))}
    assert decision.admitted, decision.detail
    assert locks.goal("g") in keys and lock_id(locks.goal("g")) in advisory


def test_a_known_limited_lane_under_a_goal_floor_across_agents_is_admitted_without_a_unit(store: Store) -> None:
    """The same lane admitted by a bare reservation (no unit of work: the known lane's plain
    transaction, its limits read in one statement under the goal's and the agent's locks): admitted
    once the goal's floor has passed, and another agent of the goal is denied inside it."""
    admission = _known_limited_lane(store)
    decision = admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0 + FLOOR)
    assert decision.admitted, decision.detail
    other = admission.reserve(goal="g", agent="b", automation="y", turn_id="t2", trigger_time=T0 + FLOOR)
    assert not other.admitted and other.reason.value == "interval_wait", other.detail
