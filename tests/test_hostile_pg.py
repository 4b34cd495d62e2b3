"""PostgreSQL faults on the admission path: a dropped connection or a server that refuses new ones
denies ``state_unavailable`` / reads ``unavailable`` (never a raw driver error), and a stalled
holder of an agent's lock yields a prompt denial instead of blocking every admission behind it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import timedelta

import psycopg
import pytest
from basics import T0, pg_or_skip, pg_schema_url, psycopg_dsn
from pg_proxy import Proxy

from floorgate.admission import Admission, FixedClock, Store, open_store
from floorgate.admission.decisions import Reason
from floorgate.admission.errors import StoreUnavailable
from floorgate.admission.store import lock_id

from helpers import floor


@pytest.fixture
def pg_schema() -> Iterator[tuple[str, str]]:
    """(base URL, schema): an empty schema of its own on the test server."""
    base = pg_or_skip()
    schema = f"fgt_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield base, schema
    finally:
        with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _through(proxy: Proxy, base: str, schema: str) -> str:
    host = base.split("://", 1)[1].split("/", 1)
    user = host[0].split("@")[0] + "@" if "@" in host[0] else ""
    return pg_schema_url(f"postgresql://{user}127.0.0.1:{proxy.port}/{host[1].split('?')[0]}", schema)


OPS = {
    "reserve": lambda adm, n: adm.reserve(goal="g", agent="a", automation=None, turn_id=f"t{n}", trigger_time=T0 + timedelta(hours=n)),
    "reserve-no-rule": lambda adm, n: adm.reserve(goal="g", agent="b", automation=None, turn_id=f"u{n}", trigger_time=T0),
    "confirm": lambda adm, n: adm.confirm("t0"),
    "eligibility": lambda adm, n: adm.eligibility("g", "a"),
}


@pytest.mark.parametrize("down", [False, True], ids=["dropped", "dropped-and-refusing"])
@pytest.mark.parametrize("op", list(OPS))
def test_a_dropped_connection_fails_closed_without_a_driver_error(pg_schema: tuple[str, str], op: str, down: bool) -> None:
    base, schema = pg_schema
    proxy = Proxy(_psycopg_target(base))
    store = open_store(_through(proxy, base, schema))
    try:
        clock = FixedClock(T0)
        floor(store, clock, "g/a", timedelta(hours=1))
        adm = Admission(store, clock)
        assert adm.reserve(goal="g", agent="a", automation=None, turn_id="t0", trigger_time=T0).admitted
        clock.advance(timedelta(hours=2))
        proxy.cut()
        proxy.down = down
        # The first call finds its connection dropped; while the server refuses, so does the next.
        for n in (1, 2) if down else (1,):
            try:
                result = OPS[op](adm, n)
            except StoreUnavailable:
                assert op == "confirm"  # confirm reports an unreadable store by raising it
                continue
            if op == "eligibility":
                assert (result.status, result.reason) == ("unavailable", Reason.STATE_UNAVAILABLE)
            else:
                assert (result.admitted, result.reason) == (False, Reason.STATE_UNAVAILABLE)
        proxy.down = False
        assert OPS[op](adm, 3) is not None  # and it recovers once the server is back
    finally:
        store.close()
        proxy.close()


def _psycopg_target(base: str) -> tuple[str, int]:
    info = psycopg.conninfo.conninfo_to_dict(psycopg_dsn(base))
    return str(info.get("host") or "127.0.0.1"), int(info.get("port") or 5432)


def _holder(base: str, schema: str, sql: str) -> psycopg.Connection:
    """Another process's transaction, left open after ``sql`` (a stalled reserver)."""
    conn = psycopg.connect(psycopg_dsn(base))
    conn.execute(f'SET search_path TO "{schema}"')
    conn.execute(sql)
    return conn


def test_a_stalled_holder_of_the_agents_lock_yields_a_prompt_state_unavailable(pg_schema: tuple[str, str]) -> None:
    base, schema = pg_schema
    store: Store = open_store(pg_schema_url(base, schema), lock_timeout_ms=200)
    agent = f"a-{uuid.uuid4().hex[:8]}"  # advisory locks are server-wide: a key no other test takes
    try:
        clock = FixedClock(T0)
        floor(store, clock, f"g/{agent}", timedelta(hours=1))
        adm = Admission(store, clock)
        held = _holder(base, schema, f"SELECT pg_advisory_xact_lock({lock_id(f'agent/g/{agent}')})")
        try:
            decision = adm.reserve(goal="g", agent=agent, automation=None, turn_id="t1", trigger_time=T0)
            assert (decision.admitted, decision.reason) == (False, Reason.STATE_UNAVAILABLE)
            assert "lock" in decision.detail and "denied" in decision.detail
            assert adm.eligibility("g", agent).status == "eligible"  # readback takes no lock: the floor has elapsed
        finally:
            held.close()
        assert adm.reserve(goal="g", agent=agent, automation=None, turn_id="t1", trigger_time=T0).admitted
        # A row lock: confirming waits on the start row another transaction holds.
        held = _holder(base, schema, "SELECT * FROM fg_starts WHERE turn_id = 't1' FOR UPDATE")
        try:
            with pytest.raises(StoreUnavailable, match="lock"):
                adm.confirm("t1")
        finally:
            held.close()
        assert adm.confirm("t1").status == "confirmed"
    finally:
        store.close()
