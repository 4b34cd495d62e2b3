"""``eligibility_many`` (what ``status`` shows for every automation) is each lane's own readback.

It reads the facts of all lanes in bulk (``read_facts_many``: every rule once, the latest anchors
by GROUP BY), ``eligibility`` one lane at a time (``read_facts``, the statement reserve decides on).
Each case builds one store (floors at every scope, starts of several agents and lanes, manual
starts, a reduction, damaged rows) and requires the two to agree field by field for every lane, at
the level of the decoded facts too; a damaged row makes only its own lane or agent unavailable.
The bulk read's statements are counted: the same for 3 lanes as for 300.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from basics import T0, raw_sql
from sqlalchemy import text
from test_hostile_state import relax
from test_round_trips import on_the_wire

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store
from floorgate.admission._facts import read_facts, read_facts_many
from floorgate.admission.errors import StoreUnavailable
from floorgate.admission.gate import _NO_TRIGGER, _NO_TURN

from helpers import floor

H = timedelta(hours=1)
M = timedelta(minutes=1)
Lane = tuple[str, str, str | None]

LANES: list[Lane] = [
    ("g", "a", "x"),
    ("g", "a", "y"),
    ("g", "a", None),  # the agent-wide lane
    ("g", "b", "y"),
    ("g", "b", "z"),
    ("g", "nobody", "q"),  # rules of the goal, no start
    ("h", "c", "w"),  # another goal
    ("k", "d", "x"),  # a goal with no rules at all
]


def _history(store: Store, clock: FixedClock) -> None:
    """Floors at goal, agent and automation scope, starts of several agents and lanes, a manual
    start, an agent-wide start, and a reduction after the starts."""
    for path, interval in (("g", 10 * M), ("g/a", H), ("g/a/x", 2 * H), ("g/b/y", 3 * H), ("h/c", H), ("h/c/w", 30 * M)):
        floor(store, clock, path, interval)
    admission = Admission(store, clock)
    starts = [
        ("a-x", "g", "a", "x", None),
        ("a-y", "g", "a", "y", None),
        ("b-y", "g", "b", "y", None),
        ("b-z", "g", "b", "z", "owner asked"),  # manual, inside the floor
        ("a-all", "g", "a", None, "owner asked"),
        ("c-w", "h", "c", "w", None),
    ]
    for n, (turn, goal, agent, automation, manual) in enumerate(starts):
        if n:
            clock.advance(61 * M)  # past every agent floor: each automatic start is admitted
        decision = admission.reserve(
            goal=goal, agent=agent, automation=automation, turn_id=turn, trigger_time=clock.now(), manual_reason=manual
        )
        assert decision.admitted, (turn, decision.reason)
        admission.confirm(turn)
    rule = Policies(store, clock).configure(
        Scope.parse("g/a"), min_interval=45 * M, expected_revision=1, owner_ref="owner", allow_reduction=True
    )
    assert rule.revision == 2
    clock.advance(5 * M)  # c-w waits out its floor; the others have elapsed


def _sql(*statements: str) -> Callable[[Store], Store]:
    def edit(store: Store) -> Store:
        for statement in statements:
            raw_sql(store, statement)
        return store

    return edit


def _relaxed(table: str, column: str, *statements: str) -> Callable[[Store], Store]:
    def edit(store: Store) -> Store:
        return _sql(*statements)(relax(store, table, column))

    return edit


@dataclass(frozen=True)
class Case:
    id: str
    edit: Callable[[Store], Store]  # hand edits after the history; returns the store to read (reopened when relaxed)
    unavailable: frozenset[Lane] = frozenset()  # exactly these lanes read as unavailable
    sqlite_only: bool = False  # a NULL in a PostgreSQL primary key cannot exist


def _lanes(*lanes: Lane) -> frozenset[Lane]:
    return frozenset(lanes)


AGENT_A = _lanes(("g", "a", "x"), ("g", "a", "y"), ("g", "a", None))
CASES = [
    Case("intact history", _sql()),
    Case(
        "a lane rule with revision 0",
        _sql("UPDATE fg_rules SET revision = 0 WHERE agent_id = 'a' AND automation_id = 'x'"),
        _lanes(("g", "a", "x")),
    ),
    Case(
        "an agent rule with a negative floor",
        _sql("UPDATE fg_rules SET min_interval_us = -1 WHERE agent_id = 'b'"),
        _lanes(("g", "b", "y")),
    ),
    Case(
        "a goal rule beyond the cap",
        _sql("UPDATE fg_rules SET min_interval_us = 316224000000001 WHERE goal_id = 'g' AND agent_id = ''"),
        frozenset(lane for lane in LANES if lane[0] == "g"),
    ),
    Case(
        "a NULL floor",
        _relaxed("fg_rules", "min_interval_us", "UPDATE fg_rules SET min_interval_us = NULL WHERE agent_id = 'a' AND automation_id = 'x'"),
        _lanes(("g", "a", "x")),
    ),
    Case(
        "a rule whose automation is NULL",
        _relaxed("fg_rules", "automation_id", "UPDATE fg_rules SET automation_id = NULL WHERE agent_id = 'a' AND automation_id = 'x'"),
        AGENT_A,
        sqlite_only=True,
    ),
    Case(
        "an anchor beyond year 9000",
        _sql("UPDATE fg_starts SET anchor_us = 300000000000000000 WHERE turn_id = 'b-y'"),
        _lanes(("g", "b", "y"), ("g", "b", "z")),
    ),
    Case(
        "a trigger beyond year 9000",
        _sql("UPDATE fg_starts SET trigger_us = 300000000000000000 WHERE turn_id = 'c-w'"),
        _lanes(("h", "c", "w")),
    ),
    Case("a NULL anchor", _relaxed("fg_starts", "anchor_us", "UPDATE fg_starts SET anchor_us = NULL WHERE turn_id = 'a-y'"), AGENT_A),
    Case(
        "a NULL automation",
        _relaxed("fg_starts", "automation_id", "UPDATE fg_starts SET automation_id = NULL WHERE turn_id = 'a-x'"),
        AGENT_A,
    ),
    Case(
        "a NULL trigger",
        _relaxed("fg_starts", "trigger_us", "UPDATE fg_starts SET trigger_us = NULL WHERE turn_id = 'b-y'"),
        _lanes(("g", "b", "y")),
    ),
    Case(
        "a NULL agent",
        _relaxed("fg_starts", "agent_id", "UPDATE fg_starts SET agent_id = NULL WHERE turn_id = 'c-w'"),
        _lanes(("h", "c", "w")),
    ),
    # A start without an agent holds every agent's lane of its automation; the goal's other lanes
    # count its anchor as their agent's possible last start.
    Case(
        "a NULL agent in one automation of a goal",
        _relaxed("fg_starts", "agent_id", "UPDATE fg_starts SET agent_id = NULL WHERE turn_id = 'b-z'"),
        _lanes(("g", "b", "z")),
    ),
    Case(
        "a NULL agent of an agent-wide start",
        _relaxed("fg_starts", "agent_id", "UPDATE fg_starts SET agent_id = NULL WHERE turn_id = 'a-all'"),
        _lanes(("g", "a", None)),
    ),
    Case(
        "a NULL agent of a start in the goal's future",  # every other lane of g waits for the clock
        _relaxed(
            "fg_starts", "agent_id", "UPDATE fg_starts SET agent_id = NULL, anchor_us = anchor_us + 36000000000 WHERE turn_id = 'a-y'"
        ),
        _lanes(("g", "a", "y"), ("g", "b", "y")),
    ),
    Case("a NULL goal", _relaxed("fg_starts", "goal_id", "UPDATE fg_starts SET goal_id = NULL WHERE turn_id = 'c-w'"), frozenset(LANES)),
    Case("an intact relaxed store", _relaxed("fg_starts", "trigger_us")),
    # SQLite keeps a BLOB where text belongs; it never equals an id, so it reads like a NULL key.
    Case("a start whose goal is a BLOB", _sql("UPDATE fg_starts SET goal_id = x'00ff' WHERE turn_id = 'c-w'"), frozenset(LANES), True),
    Case(
        "a start whose agent is a BLOB",
        _sql("UPDATE fg_starts SET agent_id = x'00ff' WHERE turn_id = 'c-w'"),
        _lanes(("h", "c", "w")),
        True,
    ),
    Case("a start whose automation is a BLOB", _sql("UPDATE fg_starts SET automation_id = x'00ff' WHERE turn_id = 'a-x'"), AGENT_A, True),
    Case(
        "a lane rule whose automation is a BLOB",
        # valid UTF-8 (an invalid one fails the bulk rules read, so every lane reads unavailable)
        _sql("UPDATE fg_rules SET automation_id = x'626c6f62' WHERE agent_id = 'a' AND automation_id = 'x'"),
        AGENT_A,
        True,
    ),
    Case(
        "a goal rule whose automation is a BLOB",  # a goal-wide rule could be any agent's
        _sql("UPDATE fg_rules SET automation_id = x'626c6f62' WHERE goal_id = 'g' AND agent_id = ''"),
        frozenset(lane for lane in LANES if lane[0] == "g"),
        True,
    ),
    Case(
        "a start with the readback's placeholder trigger",  # lane g/a/x's duplicate_turn fact; not its latest
        _sql(
            "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind) "
            "VALUES ('dup', 'g', 'a', 'x', -1, 0, 'confirmed', 'automatic')"
        ),
    ),
    Case(
        "a start under the readback's placeholder turn id",
        _sql("UPDATE fg_starts SET turn_id = '/', phase = 'launched' WHERE turn_id = 'c-w'"),
        frozenset(LANES),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_bulk_eligibility_of_every_lane_is_its_own(store: Store, case: Case) -> None:
    if case.sqlite_only and store.dialect == "postgresql":
        pytest.skip("PostgreSQL keys are never NULL or a BLOB")
    clock = FixedClock(T0)
    _history(store, clock)
    fixture_store = store
    store = case.edit(store)
    try:
        admission = Admission(store, clock)
        with store.driver(write=False) as tx:
            bulk = read_facts_many(tx, LANES, _NO_TURN, _NO_TRIGGER)
        for lane in LANES:
            try:
                own: object = read_facts(store.autocommit, *lane, _NO_TURN, _NO_TRIGGER)
            except StoreUnavailable as exc:
                own = exc
            got = bulk[lane]
            if isinstance(own, StoreUnavailable):
                assert isinstance(got, StoreUnavailable) and str(got) == str(own), lane
            else:
                assert got == own, lane
        many = admission.eligibility_many(LANES)
        assert set(many) == set(LANES)
        for lane in LANES:
            single = admission.eligibility(*lane)
            assert many[lane].model_dump() == single.model_dump(), lane
        assert {lane for lane, e in many.items() if e.status == "unavailable"} == case.unavailable
        if not case.unavailable:  # the history itself holds every status readback can show
            assert {e.status for e in many.values()} == {"eligible", "interval_wait"}
    finally:
        if store is not fixture_store:  # relaxed: reopened
            store.close()


def _seed(store: Store, agents: int, lanes_per_agent: int) -> list[Lane]:
    """Agent floors and one start in every lane, written in one statement (as a restore would)."""
    clock = FixedClock(T0)
    lanes = [("g", f"a{i}", f"x{j}") for i in range(agents) for j in range(lanes_per_agent)]
    for i in range(agents):
        floor(store, clock, f"g/a{i}", H)
    rows = [{"t": f"t-{g}-{a}-{x}", "g": g, "a": a, "x": x, "at": 1_000_000 * n} for n, (g, a, x) in enumerate(lanes)]
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind) "
                "VALUES (:t, :g, :a, :x, :at, :at, 'confirmed', 'automatic')"
            ),
            rows,
        )
    return lanes


def test_the_bulk_eligibility_costs_the_same_statements_for_3_lanes_and_300(store: Store) -> None:
    lanes = _seed(store, agents=30, lanes_per_agent=10)
    admission = Admission(store, FixedClock(T0 + 2 * H))
    counts = {}
    for size in (3, 300):
        wanted = lanes if size == len(lanes) else [lanes[0], lanes[10], lanes[25]]  # three agents
        admission.eligibility_many(wanted)  # warm: connections opened, nothing cached that counts
        with on_the_wire(store) as counts[size]:
            found = admission.eligibility_many(wanted)
        assert len(found) == size and all(e.status == "eligible" for e in found.values())
    assert counts[3] == counts[300]
    assert counts[3]["commits"] == 0 and counts[3]["round_trips"] > 0  # counted, and none written
