"""The hot path's statement text as the driver sends it (``Store.bind``): the database's own
numbered form (``$n``, ``?n``), rendered once per statement, so psycopg never parses a statement
again at a call, however long it is (a limited lane's one read is longer than psycopg's parse
cache takes), and sqlite3 looks no parameter up by name."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from basics import T0

from floorgate.admission import Admission, FixedClock, Policies, Scope, Store
from floorgate.admission.limits import LimitsChange
from floorgate.admission.usage import Prices
from floorgate.admission.windows import parse_window

from helpers import add_automation

NAMED = "SELECT :a, CAST(:b AS BIGINT), :a::text, x.y FROM t AS x WHERE x.c = :b_c"


@pytest.mark.parametrize(
    ("dialect", "text", "args"),
    [
        pytest.param("sqlite", "SELECT ?1, CAST(?2 AS BIGINT), ?1::text, x.y FROM t AS x WHERE x.c = ?3", (1, 2, 3), id="sqlite-numbered"),
        pytest.param(
            "postgresql", "SELECT $1, CAST($2 AS BIGINT), $1::text, x.y FROM t AS x WHERE x.c = $3", (1, 2, 3), id="postgresql-numbered"
        ),
    ],
)
def test_bind_numbers_each_name_once_in_first_use_order(dialect: str, text: str, args: Any) -> None:
    fake: Any = Store.__new__(Store)
    fake.dialect, fake._native = dialect, {}
    params = {"b_c": 3, "a": 1, "b": 2, "unused": 9}
    assert fake.bind(NAMED, params) == (text, args)
    assert fake.bind(NAMED, {"a": 4, "b": 5, "b_c": 6})[1] == (4, 5, 6)


def test_a_limited_lanes_decisions_parse_no_statement_text(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    if store.dialect != "postgresql":
        pytest.skip("psycopg's parse of named parameters is PostgreSQL's")
    import psycopg._queries as queries

    clock = FixedClock(T0)
    day = parse_window("1d")
    limits = LimitsChange(max_starts=50, budget_tokens=10_000, budget_usd=Decimal(5), estimate_tokens=10, per=day)
    Policies(store, clock).configure(Scope.parse("g/a"), min_interval=timedelta(hours=1), expected_revision=0, owner_ref="o", limits=limits)
    Prices(store, clock).set("m", Decimal(3), expected_revision=0, owner_ref="o")
    add_automation(store, clock, "x", model="m")
    admission = Admission(store, clock)

    def reserve(turn: str) -> Any:
        return admission.reserve(goal="g", agent="a", automation="x", turn_id=turn, trigger_time=clock.now())

    assert reserve("t1").admitted  # the lane is now known limited: its next decisions are one statement each
    parsed: list[int] = []
    original = queries._query2pg_nocache

    def counting(query: bytes, *args: Any, **kwargs: Any) -> Any:
        parsed.append(len(query))
        return original(query, *args, **kwargs)

    monkeypatch.setattr(queries, "_query2pg_nocache", counting)
    for k in range(3):
        clock.advance(timedelta(minutes=1))
        denied = reserve(f"d{k}")
        assert (denied.admitted, denied.reason.value) == (False, "interval_wait")
    clock.advance(timedelta(hours=1))
    assert reserve("t2").admitted
    assert parsed == []
