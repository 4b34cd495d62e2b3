"""The facts as Core expressions, compiled once per dialect, and the ``turn`` fact's decoder.

The per-lane read walks indexes only (every leg a search of an index, on SQLite and PostgreSQL),
the compiled statements take no parameter a caller does not set, the turn comes back as a row
whose decoder fails closed on anything floorgate would not have written, and each plain fact lands
in the ``Facts`` field it declares.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import literal, select, text

from floorgate.admission import Store
from floorgate.admission._facts import FACTS_SQL, GUARDED_FACTS_SQL, decode_facts, facts_params, keyed_in_bulk
from floorgate.admission._reserve_sql import RESERVE_SQL
from floorgate.admission.decide._sql import compiled
from floorgate.admission.decide.facts import FACT, FACTS, PLAIN, Fact, TurnFacts, turn_row
from floorgate.admission.decisions import Phase
from floorgate.admission.errors import CorruptState

GOOD = [
    ("no start", None, None),
    ("a reserved start", '["reserved", "g", "a", "x", 5]', TurnFacts(Phase.RESERVED, "g/a/x", 5)),
    ("a confirmed start of an agent", '["confirmed", "g", "a", "", 0]', TurnFacts(Phase.CONFIRMED, "g/a/", 0)),
    ("an older start without a phase", '[null, "g", "a", "x", 7]', TurnFacts(Phase.CONFIRMED, "g/a/x", 7)),
    ("PostgreSQL's spacing", '["reserved", "g", "a", "x", 5]\n', TurnFacts(Phase.RESERVED, "g/a/x", 5)),
]


@pytest.mark.parametrize(("value", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_the_turn_fact_decodes(value: str | None, expected: TurnFacts | None) -> None:
    assert turn_row(value, "t1") == expected


BAD = [
    ("the old joined text", "reserved/g/a/x/5"),
    ("an object", '{"phase": "reserved"}'),
    ("bytes", b'["reserved", "g", "a", "x", 5]'),
    ("a short row", '["reserved", "g", "a", 5]'),
    ("a long row", '["reserved", "g", "a", "x", 5, 6]'),
    ("a NULL goal", '["reserved", null, "a", "x", 5]'),
    ("a NULL agent", '["reserved", "g", null, "x", 5]'),
    ("a NULL automation", '["reserved", "g", "a", null, 5]'),
    ("a NULL anchor", '["reserved", "g", "a", "x", null]'),
    ("a numeric agent", '["reserved", "g", 7, "x", 5]'),
    ("an anchor as text", '["reserved", "g", "a", "x", "5"]'),
    ("a real anchor", '["reserved", "g", "a", "x", 5.0]'),
    ("a boolean anchor", '["reserved", "g", "a", "x", true]'),
    ("a negative anchor", '["reserved", "g", "a", "x", -1]'),
    ("an anchor beyond the bound", '["reserved", "g", "a", "x", 221845392000000000]'),
    ("an unknown phase", '["paused", "g", "a", "x", 5]'),
    ("a numeric phase", '[1, "g", "a", "x", 5]'),
]


@pytest.mark.parametrize("value", [c[1] for c in BAD], ids=[c[0] for c in BAD])
def test_a_malformed_turn_fact_fails_closed(value: object) -> None:
    with pytest.raises(CorruptState):
        turn_row(value, "t1")


def test_a_statement_with_a_parameter_no_caller_sets_is_refused() -> None:
    """A Python value left in a fact's expression would compile to an anonymous parameter."""
    with pytest.raises(ValueError, match="parameters no caller sets"):
        compiled(select(FACT["limited"].expr + literal(1)), "sqlite")


def _plan(store: Store, sql: str) -> list[str]:
    params = facts_params("g", "a", "x", "t1", 5)
    with store.engine.begin() as conn:
        if store.dialect == "sqlite":
            return [str(r[-1]) for r in conn.execute(text("EXPLAIN QUERY PLAN " + sql), params)]
        conn.exec_driver_sql("SET LOCAL enable_seqscan = off")  # only an index-less read falls back to one
        return [str(r[0]) for r in conn.execute(text("EXPLAIN (COSTS OFF) " + sql), params)]


def test_the_per_lane_read_searches_indexes_only(store: Store) -> None:
    plan = _plan(store, FACTS_SQL[store.dialect])
    reads = [line for line in plan if "fg_starts" in line or "fg_rules" in line]
    assert reads, plan
    if store.dialect == "sqlite":
        assert all(line.startswith("SEARCH ") for line in reads), plan
    else:
        # Each scan of a table is an index scan with a condition on the index (not a full one).
        scans = [i for i, line in enumerate(plan) if " on fg_starts" in line or " on fg_rules" in line]
        assert len(scans) >= 5, plan  # the rules, the turn, both anchors, the trigger, the duplicate
        assert all("Index" in plan[i] and plan[i + 1].strip().startswith("Index Cond") for i in scans), plan


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
@pytest.mark.parametrize("guarded", [False, True], ids=["plain", "relaxed"])
def test_the_per_lane_read_reads_the_rules_once_and_sends_no_echo(dialect: str, guarded: bool) -> None:
    """The facts that are aggregates over the applicable rules (the rules' rows, whether any
    carries a count or budget) come from one read of those rules, and the limit code the caller
    already holds is not sent to the store and back."""
    sql = (GUARDED_FACTS_SQL if guarded else FACTS_SQL)[dialect]
    assert len(re.findall(r"automation_id IN \('', :xr\)", sql)) == 1, sql
    assert ":lim" not in sql


def test_the_relaxed_read_adds_only_its_guard(store: Store) -> None:
    """The relaxed store's read searches the same indexes for the same facts, plus its guard's legs."""
    plain, guarded = _plan(store, FACTS_SQL[store.dialect]), _plan(store, GUARDED_FACTS_SQL[store.dialect])
    assert len(guarded) > len(plain)
    assert _indexes(plain) <= _indexes(guarded)


def _indexes(plan: list[str]) -> set[str]:
    return {m for line in plan for m in re.findall(r"(?:INDEX|using) (\w+)", line)}


def _distinct(fact: Fact, used: set[object]) -> object:
    """A value of ``fact``'s type that its decoder accepts and no other fact of the row has."""
    pool: list[object] = [f"v{k}" for k in range(50)] if fact.pg_type == "text" else [*range(100, 150), 2, 1, 0]
    for value in pool:
        if value in used:
            continue
        try:
            if fact.decode is not None:
                fact.decode(value, "g/a")
        except CorruptState:
            continue
        used.add(value)
        return value
    raise AssertionError(f"no value for fact {fact.name}")  # pragma: no cover - the pool covers every type


def test_each_plain_fact_is_decoded_into_its_own_field() -> None:
    """The decoder puts each plain fact's column into the ``Facts`` field the fact names (derived
    from ``decide.facts.PLAIN``: a new fact needs no edit here or in ``_facts``)."""
    row: list[object] = [None] * len(FACTS)
    used: set[object] = set()
    expected = {}
    for fact in PLAIN:
        expected[fact.name] = row[FACTS.index(fact)] = _distinct(fact, used)
    facts = decode_facts(row, "g", "a", "x", "t1")
    assert {f.name: getattr(facts, str(f.field)) for f in PLAIN} == expected
    assert (facts.turn_phase, facts.limits, facts.floor.rules) == (None, (), ())


def test_a_plain_fact_the_bulk_read_cannot_match_to_lanes_is_refused() -> None:
    """In the bulk read a plain fact is matched to lanes by its per-row form's key columns: a fact
    without such a form would read as NULL for every lane there, so it is refused at import."""
    dup = FACT["duplicate"]
    per_row = dup.per_row
    assert per_row is not None
    assert keyed_in_bulk(dup)[0] == "duplicate"
    for broken in (None, per_row._replace(grouped=False), per_row._replace(keys=("turn_id",))):
        with pytest.raises(ImportError, match="per-row form"):
            keyed_in_bulk(dup._replace(per_row=broken))


def _seed_goal(store: Store, first: int, count: int) -> None:
    """``count`` confirmed starts of goal g by other agents than the lane's (agent a)."""
    rows = [{"t": f"h{i}", "a": f"other{i % 50}", "us": 10**12 + i} for i in range(first, first + count)]
    with store.engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind, "
                "manual_reason, confirmed_at_us) VALUES (:t, 'g', :a, 'x', :us, :us, 'confirmed', 'automatic', NULL, :us)"
            ),
            rows,
        )


def _work(store: Store, sql: str, *, filtered: bool = True) -> int:
    """What the per-lane read does, as a count: SQLite's virtual machine instructions (a progress
    handler called on each), PostgreSQL's rows read by the plan's nodes on fg_starts and fg_rules
    (EXPLAIN ANALYZE, ``_rows``). Independent of the machine's speed."""
    params = facts_params("g", "a", "x", "t1", 5)
    raw = store.engine.raw_connection()
    try:
        if store.dialect == "sqlite":
            steps = [0]

            def step() -> int:
                steps[0] += 1
                return 0

            conn = raw.driver_connection
            conn.set_progress_handler(step, 1)  # type: ignore[union-attr]
            try:
                conn.execute(sql, params).fetchall()  # type: ignore[union-attr]
            finally:
                conn.set_progress_handler(None, 1)  # type: ignore[union-attr]
            return steps[0]
        import psycopg

        cur = psycopg.RawCursor(raw.driver_connection)  # the store's own ``$n`` text, as its hot path sends it
        text, args = store.bind(sql, params)
        cur.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + text, args)
        plan = cur.fetchone()[0]
        raw.rollback()
        return _rows(plan, filtered=filtered)
    finally:
        raw.close()


def _rows(plan: list, *, filtered: bool = True) -> int:  # type: ignore[type-arg]
    """The rows an EXPLAIN ANALYZE plan's nodes on fg_starts and fg_rules read: those they
    produced and (``filtered``) those their filters removed."""

    def rows(node: dict) -> int:  # type: ignore[type-arg]
        read = node["Actual Rows"] + (node.get("Rows Removed by Filter", 0) if filtered else 0)
        own = read * node["Actual Loops"] if node.get("Relation Name") in ("fg_starts", "fg_rules") else 0
        return own + sum(rows(child) for child in node.get("Plans", []))

    return rows(plan[0]["Plan"])


@pytest.mark.parametrize("guarded", [False, True], ids=["plain read", "relaxed read"])
def test_the_per_lane_read_does_not_walk_the_goals_history(store: Store, guarded: bool) -> None:
    """A decision's read costs the same with 20 or 2,020 starts of the goal's other agents: without
    a goal floor across agents, the goal's latest start is not searched for at all (a condition
    tested on each of the goal's starts made every denial walk them: O(history))."""
    sql = (GUARDED_FACTS_SQL if guarded else FACTS_SQL)[store.dialect]
    # A relaxed PostgreSQL store's guard looks for starts with a NULL key, and the planner, without
    # statistics, filters the goal's starts for them: that store (its constraints removed by hand)
    # is held to the rows its plan produces only.
    filtered = not (guarded and store.dialect == "postgresql")
    _seed_goal(store, 0, 20)
    small = _work(store, sql, filtered=filtered)
    _seed_goal(store, 20, 2_000)
    large = _work(store, sql, filtered=filtered)
    assert large <= small + 50, (small, large)


@pytest.mark.parametrize("statement", ["facts", "reserve"])
def test_a_generic_plan_made_on_a_small_table_does_not_walk_the_goals_history(store: Store, statement: str) -> None:
    """PostgreSQL's prepared statements settle on a generic plan, made once, here while the goal
    had 20 starts and the table no statistics, then kept as it grows to 2,020: each search names
    the one index that gives its order, so no plan filters the goal's starts for the lane's (its
    trigger was once looked for among all of them, making every decision O(history))."""
    if store.dialect != "postgresql":
        pytest.skip("a generic plan is PostgreSQL's")
    import psycopg
    import psycopg.sql

    sql = FACTS_SQL["postgresql"] if statement == "facts" else RESERVE_SQL
    params = {**facts_params("g", "a", "x", "t1", 5), "now": 10, "kind": "automatic", "reason": None, "lock": 1, "goal_lock": None}
    params |= {"guarded": False, "lock_admitted": False}
    text_sql, args = store.bind(sql, params)
    types = ["boolean" if type(v) is bool else "bigint" if type(v) is int else "text" for v in args]
    _seed_goal(store, 0, 20)
    raw = store.engine.raw_connection()
    try:
        conn = raw.driver_connection
        conn.autocommit = True  # type: ignore[union-attr]
        cur = psycopg.RawCursor(conn)
        cur.execute("SET plan_cache_mode = force_generic_plan")
        cur.execute(f"PREPARE fg_generic ({', '.join(types)}) AS " + text_sql)
        # EXECUTE's arguments as literals (a utility statement's own parameters are not typed).
        values = ", ".join(psycopg.sql.Literal(v).as_string(conn) for v in args)
        explain = f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE fg_generic({values})"
        small = _rows(cur.execute(explain).fetchone()[0])  # the plan made and kept
        _seed_goal(store, 20, 2_000)
        large = _rows(cur.execute(explain).fetchone()[0])
        cur.execute("DEALLOCATE fg_generic")
    finally:
        raw.invalidate()  # its session's settings go with it
    assert large <= small + 50, (small, large)
