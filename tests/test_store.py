"""The store boundary: migrations, schema version, URL handling, failing closed."""

from __future__ import annotations

import pytest
from basics import T0, raw_sql

from floorgate.admission import Admission, FixedClock, InvalidInput, Reason, SchemaTooNew, StoreUnavailable, open_store
from floorgate.admission.store import resolve_url

HEAD = "0033"


def test_open_migrates_once_and_records_the_version(db_url: str) -> None:
    with open_store(db_url) as store:
        assert raw_sql(store, "SELECT version_num FROM fg_alembic_version") == [(HEAD,)]
    with open_store(db_url) as store:  # reopening is a no-op
        assert raw_sql(store, "SELECT version_num FROM fg_alembic_version") == [(HEAD,)]


def test_a_newer_schema_is_refused_and_not_written(db_url: str) -> None:
    with open_store(db_url) as store:
        raw_sql(store, "UPDATE fg_alembic_version SET version_num = '0099'")
        before = raw_sql(store, "SELECT COUNT(*) FROM fg_starts")
    with pytest.raises(SchemaTooNew, match="0099"):
        open_store(db_url)
    from sqlalchemy import create_engine, text

    from floorgate.admission.store import resolve_url as ru

    engine = create_engine(ru(db_url))
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM fg_alembic_version")).scalar_one() == "0099"
        assert [tuple(r) for r in conn.execute(text("SELECT COUNT(*) FROM fg_starts"))] == before
    engine.dispose()


def test_lost_tables_deny_as_state_unavailable(db_url: str) -> None:
    with open_store(db_url) as store:
        raw_sql(store, "DROP TABLE fg_rules")
        clock = FixedClock(T0)
        admission = Admission(store, clock)
        d = admission.reserve(goal="g", agent="a", automation=None, turn_id="t", trigger_time=T0)
        assert not d.admitted and d.reason is Reason.STATE_UNAVAILABLE
        assert admission.eligibility("g", "a").status == "unavailable"


def test_unreachable_postgres_is_store_unavailable() -> None:
    with pytest.raises(StoreUnavailable):
        open_store("postgresql://nobody@127.0.0.1:1/none")


@pytest.mark.parametrize(
    "url, expected",
    [
        ("state/fg.db", "sqlite:///state/fg.db"),
        ("postgresql://u@h/db", "postgresql+psycopg://u@h/db"),
        ("sqlite:////abs/fg.db", "sqlite:////abs/fg.db"),
    ],
)
def test_url_forms(url: str, expected: str) -> None:
    assert resolve_url(url) == expected


def test_default_url_reads_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("FLOORGATE_DB", "/tmp/elsewhere.db")
    assert resolve_url(None) == "sqlite:////tmp/elsewhere.db"
    monkeypatch.delenv("FLOORGATE_DB")
    assert resolve_url(None) == "sqlite:///floorgate.db"


@pytest.mark.parametrize("url", [":memory:", "sqlite://", "mysql://x@h/db", "/no/such/dir/fg.db"])
def test_bad_urls_are_invalid_input(url: str) -> None:
    with pytest.raises(InvalidInput) as err:
        open_store(url)
    assert err.value.field == "db"


def test_a_write_on_a_read_only_postgresql_user_names_the_access_it_lacks(store) -> None:  # type: ignore[no-untyped-def]
    """Reads work for a user that may only SELECT; a write says which access is missing."""
    if store.dialect != "postgresql":
        pytest.skip("database roles are PostgreSQL's (a SQLite file's access is the file system's)")
    import psycopg
    from basics import pg_schema_of, psycopg_dsn

    from cli import run_cli

    pg_url = store.url
    assert run_cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", db=pg_url).returncode == 0
    schema = pg_schema_of(pg_url)
    role = f"fg_ro_{schema[-8:]}"
    with psycopg.connect(psycopg_dsn(pg_url), autocommit=True) as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')
        conn.execute(f'CREATE ROLE "{role}" LOGIN')
        conn.execute(f'GRANT USAGE ON SCHEMA "{schema}" TO "{role}"')
        conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA "{schema}" TO "{role}"')
    try:
        read_only = pg_url.replace("://postgres@", f"://{role}@", 1)
        assert read_only != pg_url
        shown = run_cli("policy", "show", "g/a", "--json", db=read_only)
        assert shown.returncode == 0, shown.stderr
        refused = run_cli("policy", "set", "g/a", "--min-interval", "2h", "--revision", "1", "--owner-ref", "o", db=read_only)
        assert refused.returncode == 1 and "needs SELECT, INSERT, UPDATE and DELETE" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1
    finally:
        with psycopg.connect(psycopg_dsn(pg_url), autocommit=True) as conn:
            conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA "{schema}" FROM "{role}"')
            conn.execute(f'REVOKE ALL ON SCHEMA "{schema}" FROM "{role}"')
            conn.execute(f'DROP ROLE "{role}"')
