"""``floorgate usage``: the usage ledger newest first, by scope, since and limit; each turn's USD as
reported, priced at the owner's price (marked) or unpriced; a total per state; JSON exact and text
to the second; bad flags one line and exit 2; a damaged row a store error, never a partial table.
Both backends. The command reads the system clock, so the ledger is written at times around now."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import event, insert, update

from floorgate.admission import FixedClock, Store
from floorgate.admission import _schema as s
from floorgate.admission.clock import iso
from floorgate.admission.usage import Prices, Usage, hold

from cli import run_cli

NOW = datetime.now(UTC).replace(microsecond=0)
AT = {
    "t-old": NOW - timedelta(days=3),  # g/a/x held, m1: priced
    "t-held": NOW - timedelta(hours=2) + timedelta(microseconds=123456),  # g/a/x held, m1: priced
    "t-rep": NOW - timedelta(hours=1),  # g/a/y settled with a reported cost
    "t-unp": NOW - timedelta(minutes=30),  # g/b/x settled, m2 has no price: unpriced
    "t-other": NOW - timedelta(minutes=10),  # h/a/x unknown, m1: its estimate priced
}
ALL = ["t-other", "t-unp", "t-rep", "t-held", "t-old"]


@pytest.fixture
def ledger(store: Store) -> Store:
    clock = FixedClock(NOW)
    usage = Usage(store, clock)
    for turn, lane, estimate, model in (
        ("t-old", ("g", "a", "x"), 1000, "m1"),
        ("t-held", ("g", "a", "x"), 40000, "m1"),
        ("t-rep", ("g", "a", "y"), 30000, None),
        ("t-unp", ("g", "b", "x"), 20000, "m2"),
        ("t-other", ("h", "a", "x"), 7000, "m1"),
    ):
        clock.set(AT[turn])
        assert usage.hold(turn, *lane, estimate, model)
    clock.set(NOW)
    usage.settle("t-rep", tokens=900, usd_micros=123456)
    usage.settle("t-unp", tokens=1200)
    usage.settle("t-other", tokens=None)
    Prices(store, clock).set("m1", Decimal(3), expected_revision=0, owner_ref="alice")
    return store


def _doc(store: Store, *argv: str) -> dict[str, Any]:
    result = run_cli("usage", *argv, "--json", db=store.url)
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def _rows(store: Store, *argv: str) -> list[list[str]]:
    """The text table's rows as cells (columns are two or more spaces apart), past the header."""
    result = run_cli("usage", *argv, db=store.url)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["AT", "TURN", "LANE", "STATE", "TOKENS", "USD", "MODEL", "SOURCE"]
    return [re.split(r"\s{2,}", line) for line in lines[1:] if not line.startswith(("total ", "("))]


@pytest.mark.parametrize(
    ("argv", "turns"),
    [
        pytest.param((), ALL, id="every-lane-newest-first"),
        pytest.param(("g",), ["t-unp", "t-rep", "t-held", "t-old"], id="goal"),
        pytest.param(("g/a",), ["t-rep", "t-held", "t-old"], id="agent"),
        pytest.param(("g/a/x",), ["t-held", "t-old"], id="automation"),
        pytest.param(("--goal", "g", "--agent", "b"), ["t-unp"], id="scope-by-flags"),
        pytest.param(("nobody",), [], id="goal-without-usage"),
        pytest.param(("--since", "1d"), ["t-other", "t-unp", "t-rep", "t-held"], id="since-duration"),
        pytest.param(("g", "--since", iso(NOW - timedelta(minutes=90))), ["t-unp", "t-rep"], id="since-instant"),
        pytest.param(("g", "--since", iso(AT["t-held"])), ["t-unp", "t-rep", "t-held"], id="since-is-inclusive"),
        pytest.param(("--limit", "2"), ["t-other", "t-unp"], id="limit-keeps-the-newest"),
        pytest.param(("g", "--since", "1d", "--limit", "1"), ["t-unp"], id="scope-since-limit"),
    ],
)
def test_scope_since_and_limit_select_the_newest_entries(ledger: Store, argv: tuple[str, ...], turns: list[str]) -> None:
    assert [e["turn"] for e in _doc(ledger, *argv)["entries"]] == turns
    if turns:
        assert [row[1] for row in _rows(ledger, *argv)] == turns


def test_the_limit_defaults_to_50_and_a_full_page_says_so(store: Store) -> None:
    usage = Usage(store, FixedClock(NOW))
    for i in range(51):
        usage.hold(f"t{i:02}", "g", "a", "x", 10, None)
    assert len(_doc(store)["entries"]) == 50
    text = run_cli("usage", "--limit", "52", db=store.url).stdout  # all 51: not a full page
    assert "(the newest" not in text and len(_rows(store, "--limit", "52")) == 51
    assert run_cli("usage", db=store.url).stdout.splitlines()[-1] == "(the newest 50; --limit N or --since for more or fewer)"


@pytest.mark.parametrize(
    ("turn", "state", "tokens_text", "usd_text", "tokens", "usd", "basis"),
    [
        pytest.param("t-held", "held", "est 40000", "$0.12 (priced)", None, "0.12", "priced", id="held-estimate-priced"),
        pytest.param("t-rep", "settled", "900", "$0.123456", 900, "0.123456", "reported", id="settled-cost-reported"),
        pytest.param("t-unp", "settled", "1200", "unpriced", 1200, None, "unpriced", id="settled-unpriced"),
        pytest.param("t-other", "unknown", "est 7000", "$0.021 (priced)", None, "0.021", "priced", id="unknown-estimate-priced"),
    ],
)
def test_each_entry_shows_its_tokens_and_usd_as_a_budget_counts_them(
    ledger: Store, turn: str, state: str, tokens_text: str, usd_text: str, tokens: int | None, usd: str | None, basis: str
) -> None:
    entry = next(e for e in _doc(ledger)["entries"] if e["turn"] == turn)
    assert (entry["state"], entry["tokens"], entry["usd"], entry["usd_basis"]) == (state, tokens, usd, basis)
    row = next(r for r in _rows(ledger) if r[1] == turn)
    assert row[3:6] == [state, tokens_text, usd_text]


def test_one_total_per_state_held_apart_from_settled(ledger: Store) -> None:
    doc = _doc(ledger)
    assert doc["totals"] == [
        {"state": "held", "turns": 2, "tokens": 41000, "usd": "0.123", "unpriced_turns": 0},
        {"state": "settled", "turns": 2, "tokens": 2100, "usd": "0.123456", "unpriced_turns": 1},
        {"state": "unknown", "turns": 1, "tokens": 7000, "usd": "0.021", "unpriced_turns": 0},
    ]
    lines = run_cli("usage", db=ledger.url).stdout.splitlines()
    assert lines[-3:] == [
        "total held: 2 turns, est 41000 tokens, $0.123",
        "total settled: 2 turns, 2100 tokens, $0.123456 (+1 unpriced)",
        "total unknown: 1 turn, est 7000 tokens, $0.021",
    ]


def test_json_has_the_exact_instant_and_text_the_second_in_utc(ledger: Store) -> None:
    at = AT["t-held"]
    entry = next(e for e in _doc(ledger, "g/a/x", "--since", "1d")["entries"])
    assert entry["at"] == iso(at) and entry["at"].endswith(".123456Z")
    assert _rows(ledger, "g/a/x", "--since", "1d")[0][0] == f"{at:%Y-%m-%d %H:%M:%S} UTC"
    assert _doc(ledger, "--since", "2026-12-01T00:00:00.5+01:00")["since"] == "2026-11-30T23:00:00.500000Z"


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        pytest.param(("--since", "yesterday"), "--since", id="since-words"),
        pytest.param(("--since", "0s"), "--since", id="since-no-time"),
        pytest.param(("--since", "2026-12-01T00:00"), "--since", id="since-without-offset"),
        pytest.param(("--since", "2026-13-01T00:00Z"), "--since", id="since-no-such-date"),
        pytest.param(("--limit", "0"), "--limit", id="limit-zero"),
        pytest.param(("--limit", "10001"), "--limit", id="limit-over-the-cap"),
        pytest.param(("--limit", "-3"), "--limit", id="limit-negative"),
        pytest.param(("--limit", "ten"), "--limit", id="limit-words"),
        pytest.param(("g/a/x/y",), "scope", id="scope-too-deep"),
        pytest.param(("bad goal",), "goal", id="scope-bad-id"),
        pytest.param(("--goal", "g", "--automation", "x"), "--agent", id="automation-without-agent"),
        pytest.param(("g", "--goal", "g"), "scope", id="scope-twice"),
    ],
)
def test_bad_input_is_one_line_naming_the_flag_and_exit_2(ledger: Store, argv: tuple[str, ...], field: str) -> None:
    result = run_cli("usage", *argv, db=ledger.url)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    assert len(result.stderr.splitlines()) == 1 and field in result.stderr, result.stderr


@pytest.mark.parametrize("typed", ["2026-12-01", "2026-12-01T10:00"], ids=["a-date", "a-local-time"])
def test_an_instant_without_an_offset_names_one_that_works(ledger: Store, typed: str) -> None:
    refused = run_cli("usage", "--since", typed, db=ledger.url)
    assert refused.returncode == 2 and "has no UTC offset" in refused.stderr, refused.stderr
    suggested = re.search(r"e\.g\. (\S+)$", refused.stderr.strip())
    assert suggested is not None and suggested.group(1).startswith(typed), refused.stderr
    assert run_cli("usage", "--since", suggested.group(1), db=ledger.url).returncode == 0


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param({"state": "spent"}, id="unknown-state"),
        pytest.param({"estimate_tokens": -1}, id="negative-estimate"),
        pytest.param({"state": "settled", "tokens": None, "usd_micros": None}, id="settled-without-amounts"),
        pytest.param({"source": "guess"}, id="unknown-source"),
    ],
)
def test_a_damaged_row_is_a_store_error_never_a_partial_table(ledger: Store, damage: dict[str, Any]) -> None:
    row = {"turn_id": "t-bad", "goal_id": "g", "agent_id": "a", "automation_id": "x", "at_us": NOW - timedelta(minutes=5)}
    row |= {"state": "held", "model": None, "estimate_tokens": 10, "tokens": None, "usd_micros": None, "source": "admission"}
    with ledger.engine.begin() as conn:
        conn.execute(insert(s.usage).values(**(row | damage)))
    for argv in ((), ("g/a/x",), ("--json",)):
        result = run_cli("usage", *argv, db=ledger.url)
        assert result.returncode == 1, result.stderr
        assert "store unavailable" in result.stderr and "t-bad" in result.stderr
        assert "entries" not in result.stdout and "TURN" not in result.stdout
    assert [e["turn"] for e in _doc(ledger, "h")["entries"]] == ["t-other"]  # another scope is not damaged


def test_a_damaged_price_is_a_store_error(ledger: Store) -> None:
    with ledger.engine.begin() as conn:
        conn.execute(update(s.model_prices).values(usd_per_mtok_micros=-5))
    result = run_cli("usage", db=ledger.url)
    assert (result.returncode, result.stdout) == (1, "") and "store unavailable" in result.stderr


def test_an_empty_ledger_is_one_line(store: Store) -> None:
    assert run_cli("usage", db=store.url).stdout == "no usage recorded\n"
    assert _doc(store, "--since", "2026-12-01T00:00Z") == {"entries": [], "totals": [], "since": "2026-12-01T00:00:00Z", "limit": 50}


@pytest.mark.parametrize(
    ("scope", "index"),
    [
        pytest.param((), "ix_fg_usage_at", id="every-lane"),
        pytest.param(("g",), "ix_fg_usage_goal_at", id="goal"),
        pytest.param(("g", "a1"), "ix_fg_usage_agent_at", id="agent"),
        pytest.param(("g", "a1", "x2"), "ix_fg_usage_agent_at", id="automation"),
    ],
)
def test_the_listing_walks_an_index_backwards(store: Store, scope: tuple[str, ...], index: str) -> None:
    """The ledger's read is bounded by its index: no scan of the table, no sort of all of it (only
    of ties on ``at_us``, by turn id, as the index hands them over)."""
    rows = [  # goal g's rows are the oldest: walking every row backwards would pass the others'
        {"turn_id": f"t{i}", "goal_id": "g" if i >= 1900 else f"g{i % 20}", "agent_id": f"a{i % 2}", "automation_id": f"x{i % 3}"}
        | {"at_us": NOW - timedelta(seconds=i), "state": "held", "estimate_tokens": 1, "source": "admission"}
        for i in range(2000)
    ]
    with store.engine.begin() as conn:
        conn.execute(insert(s.usage), rows)
        # This store's tables only: a database-wide ANALYZE on PostgreSQL waits on (and can deadlock
        # with) the schemas other test workers create and drop meanwhile.
        conn.exec_driver_sql("ANALYZE fg_usage")
    seen: list[tuple[str, Any]] = []

    def keep(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
        if "fg_usage" in statement:
            seen.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", keep)
    try:
        entries, _ = Usage(store).ledger(scope, since=None, limit=10)
    finally:
        event.remove(store.engine, "before_cursor_execute", keep)
    assert len(entries) == 10 and entries == sorted(entries, key=lambda e: e.at, reverse=True)
    [(statement, parameters)] = seen
    with store.engine.connect() as conn:
        if store.dialect == "sqlite":
            plan = " | ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, parameters))
            assert index in plan and "TEMP B-TREE FOR ORDER BY" not in plan, plan
        else:
            conn.exec_driver_sql("SET enable_seqscan = off")  # a table this small would be read whole otherwise
            conn.exec_driver_sql("SET enable_bitmapscan = off")  # (a bitmap scan returns rows out of the index's order)
            plan = " | ".join(str(r[0]) for r in conn.exec_driver_sql("EXPLAIN " + statement, parameters))
            assert index in plan and "Backward" in plan and not re.search(r"(^|->)\s*Sort\b", plan), plan


def test_a_lane_without_an_automation_is_shown_as_goal_and_agent(store: Store) -> None:
    # A hook's lane or a bare admit holds usage with no automation: its lane reads g/a, not g/a/.
    with store.write() as conn:  # as the admission of a lane without an automation holds it
        assert hold(conn, "t-bare", "g", "a", "", NOW, 500, None)
    [row] = _rows(store)
    assert row[1:3] == ["t-bare", "g/a"]
