"""The corrupt-state table: every column of every table admission, readback and the host read, set to
NULL, a wrong type (SQLite keeps any value a hand edit writes), a negative value, 2^62 and a time far
in the future, on both backends. Whatever the damage: admission never admits the damaged lane, no
command prints a traceback, the host holds at most the damaged automation while it plans the other,
and what the host holds, readback holds too (and says why).

One store per backend is seeded once for the module with every NOT NULL dropped (a table rebuilt by
hand without its constraints); each case damages one value of the ``bad`` automation's rows, checks,
then puts the value back and proves the store is exactly as seeded again (the checks wrote nothing).
Damaged files (truncated, empty, scribbled) are at the end.
"""

from __future__ import annotations

import json
import random
import re
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from basics import T0, pg_or_skip, pg_schema_url, psycopg_dsn
from hostile import DOCUMENTED_EXITS, dump
from sqlalchemy import BigInteger, Boolean, Integer, text

from floorgate.admission import (
    Admission,
    Approvals,
    Automations,
    Events,
    FixedClock,
    HostPolicies,
    HostPolicy,
    Missions,
    Policies,
    Principals,
    Reason,
    Scope,
    Store,
    TimerBindings,
    WakeState,
    open_store,
)
from floorgate.admission import _schema as schema
from floorgate.admission._schema import metadata
from floorgate.admission._types import UtcMicros, from_row
from floorgate.admission.liveness import HookAnswers
from floorgate.admission.ticks import Tick, TickLog
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime.host import RuntimeConfig

from cli import run_cli
from helpers import NEAR_9999_US, add_automation, floor, host_running

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
NOW = T0 + timedelta(minutes=1)
IDS = ("good", "bad")

# The row of each table that belongs to ``bad`` (global tables: the one row seeded there).
WHERE = {
    "fg_rules": "agent_id = 'bad'",
    "fg_rule_history": "agent_id = 'bad'",
    "fg_starts": "turn_id = 's-bad'",
    "fg_automations": "automation_id = 'bad'",
    "fg_wake_state": "automation_id = 'bad'",
    "fg_ticks": "automation_id = 'bad'",
    "fg_turns": "turn_id = 't-bad'",
    "fg_timer_bindings": "automation_id = 'bad'",
    "fg_missions": "automation_id = 'bad'",
    "fg_approvals": "mission_id IN (SELECT mission_id FROM fg_missions WHERE automation_id = 'bad')",
    "fg_hook_answers": "automation_id = 'bad'",
    "fg_hosts": "1 = 1",
    "fg_principals": "1 = 1",
    "fg_settings": "1 = 1",
    "fg_events": "subject LIKE '%bad%'",
    "fg_webhooks": "1 = 1",
    "fg_deliveries": "event_id IN (SELECT event_id FROM fg_events WHERE subject LIKE '%bad%')",
}
# Rows of every automation at once, or of the whole deployment: the host may hold everything.
GLOBAL = {"fg_hosts", "fg_principals", "fg_settings", "fg_events", "fg_webhooks", "fg_deliveries"}
# What admission decides from: damage here denies the lane ``state_unavailable``.
ADMISSION_INPUTS = {
    ("fg_rules", "min_interval_us"),
    ("fg_rules", "revision"),
    ("fg_rules", "agent_id"),
    ("fg_rules", "automation_id"),
    ("fg_starts", "goal_id"),
    ("fg_starts", "agent_id"),
    ("fg_starts", "automation_id"),
    ("fg_starts", "anchor_us"),
    ("fg_starts", "trigger_us"),
}
# A key that is NULL could be any agent's: admission denies every lane it could cover, and so
# the host holds them (the good one too).
UNATTRIBUTABLE = {("fg_rules", "goal_id"), ("fg_rules", "agent_id"), ("fg_starts", "goal_id"), ("fg_starts", "agent_id")}
# On SQLite a key rewritten to a BLOB (a wrong type) cannot be attributed either: it reads as NULL does.
FAR_FUTURE_US = NEAR_9999_US


@dataclass(frozen=True)
class Damage:
    table: str
    column: str
    kind: str  # null, wrong-type, negative, huge, far-future
    sql: str  # the value as a SQL literal

    @property
    def damages_admission(self) -> bool:
        """Whether admission decides from this value and it is out of range (2^31 - 1 is a valid revision)."""
        return (self.table, self.column) in ADMISSION_INPUTS and self.sql != str(2**31 - 1)

    @property
    def id(self) -> str:
        return f"{self.table}.{self.column}-{self.kind}"


def _damages(dialect: str) -> list[Damage]:
    out: list[Damage] = []
    for table in metadata.sorted_tables:
        if table.name not in WHERE:
            continue
        for column in table.columns:
            if column.primary_key and column.autoincrement is True:
                continue  # a row id: SQLite assigns it, and refuses anything but an integer
            if column.primary_key and dialect == "postgresql":
                kinds: list[tuple[str, str]] = []  # a PostgreSQL key can never be NULL
            else:
                kinds = [("null", "NULL")]
            integer = isinstance(column.type, (Integer, BigInteger, UtcMicros))
            if integer:
                big = 2**62 if isinstance(column.type, (BigInteger, UtcMicros)) else 2**31 - 1
                kinds += [("negative", "-1"), ("huge", str(big))]
                if isinstance(column.type, UtcMicros):
                    kinds.append(("far-future", str(FAR_FUTURE_US)))
                if dialect == "sqlite":
                    kinds.append(("wrong-type", "'not a number'"))
            elif isinstance(column.type, Boolean):
                if dialect == "sqlite":
                    kinds += [("wrong-type", "'maybe'"), ("huge", "7")]
            elif dialect == "sqlite":
                kinds += [("wrong-type", "x'00ff'")]
            out += [Damage(table.name, column.name, kind, sql) for kind, sql in kinds]
    return out


def _seed(store: Store) -> None:
    """Two automations, each with every kind of row a store holds; ``bad`` is the one damaged."""
    clock = FixedClock(T0)
    events = Events(store, clock)
    events.add_webhook("http://127.0.0.1:9/hook", ["floor_changed", "ask_pending", "ask_decided"])
    for x in IDS:
        add_automation(store, clock, x, agent=x, schedule=EVERY_15M)
        floor(store, clock, f"g/{x}", timedelta(minutes=30))
        floor(store, clock, f"g/{x}/{x}", timedelta(hours=1))
        Automations(store, clock).save_wake_state(WakeState(automation_id=x, backoff_step=1, backoff_wake_at=T0))
        TickLog(store).append([Tick(automation_id=x, nominal_at=T0, actual_at=T0, decision="admitted", reason="eligible", host="h")])
        admission = Admission(store, clock)
        assert admission.reserve(goal="g", agent=x, automation=x, turn_id=f"s-{x}", trigger_time=T0).admitted
        admission.confirm(f"s-{x}")
        mission = Missions(store, clock).open(x, "g", x)
        ask = Approvals(store, clock).ask(mission.mission_id, f"g/{x}/{x}", "max_turns", 3)
        Approvals(store, clock).decide(ask.approval_id, True, scope_now=f"g/{x}/{x}")
        HookAnswers(store).record(x, admitted=True, at=T0)
        TimerBindings(store).set_desired(x, "apscheduler", EVERY_15M, False, None, T0)
        with store.engine.begin() as conn:  # a settled turn, as the executor leaves one
            conn.execute(
                text(
                    "INSERT INTO fg_turns (turn_id, automation_id, goal_id, agent_id, attempt, kind, runner_host, runner_pid, "
                    "started_at_us, deadline_us, phase, status, retryable, exit_code, settled_at_us, mission_id) VALUES "
                    "(:t, :x, 'g', :x, 1, 'automatic', 'h', 1, :at, :deadline, 'settled', 'succeeded', false, 0, :at, :m)"
                ),
                {
                    "t": f"t-{x}",
                    "x": x,
                    "at": int(T0.timestamp() * 1e6),
                    "deadline": int(T0.timestamp() * 1e6) + 60_000_000,
                    "m": mission.mission_id,
                },
            )
    host_running(store, clock)
    Principals(store, clock).add("alice", "owner")
    HostPolicies(store, clock).set(HostPolicy(catch_up=timedelta(minutes=5)), expected_revision=0, owner_ref="o")


def _relax(store: Store) -> None:
    """Drop every NOT NULL of the fg_* tables, as a hand rebuild without constraints would."""
    if store.dialect == "postgresql":
        with store.engine.begin() as conn:
            for table in metadata.sorted_tables:
                for column in table.columns:
                    if not column.primary_key and not column.nullable:
                        conn.execute(text(f"ALTER TABLE {table.name} ALTER COLUMN {column.name} DROP NOT NULL"))
        return
    conn = sqlite3.connect(store.engine.url.database, isolation_level=None)
    conn.execute("PRAGMA writable_schema=ON")
    for name, sql in conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name LIKE 'fg_%'").fetchall():
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = ?", (re.sub(r" NOT NULL", "", sql), name))
    (version,) = conn.execute("PRAGMA schema_version").fetchone()
    conn.execute(f"PRAGMA schema_version={version + 1}")
    conn.execute("PRAGMA writable_schema=OFF")
    conn.close()


@dataclass
class Seeded:
    url: str
    store: Store
    state_dir: Path
    baseline: dict[str, list[tuple[Any, ...]]]


@pytest.fixture(scope="module")
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeded]:
    directory = tmp_path_factory.mktemp("corrupt")
    schema = None
    if request.param == "sqlite":
        url = str(directory / "floorgate.db")
    else:
        import psycopg

        base = pg_or_skip()
        schema = f"fgt_corrupt_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(psycopg_dsn(base), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = pg_schema_url(base, schema)
    store = open_store(url)
    _seed(store)
    _relax(store)
    store.close()
    store = open_store(url)
    assert store.relaxed
    try:
        yield Seeded(url, store, directory / "state", dump(store))
    finally:
        store.close()
        if schema is not None:
            import psycopg

            with psycopg.connect(psycopg_dsn(pg_or_skip()), autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _cases() -> list[Any]:
    """(backend, damage) for every damage the backend can hold (PostgreSQL keeps its column types)."""
    return [pytest.param(backend, d, id=f"{backend}-{d.id}") for backend in ("sqlite", "postgresql") for d in _damages(backend)]


def _no_traceback(result: Any, what: str) -> None:
    assert result.returncode in DOCUMENTED_EXITS, (what, result)
    assert "Traceback" not in result.stderr and "Traceback" not in result.stdout, (what, result.stderr[-2000:])
    if result.returncode in (1, 2):  # refused (3 and up are answers: denied, differs)
        assert len(result.stderr.strip().splitlines()) == 1, (what, result.stderr)


def _status_of(result: Any) -> dict[str, dict[str, Any]]:
    """automation id -> its entry in ``status --json`` ({} when the command refused)."""
    if result.returncode != 0:
        return {}
    return {a["automation"]: a for a in json.loads(result.stdout)["automations"]}


def _unreadable(entry: dict[str, Any] | None) -> bool:
    return entry is None or entry["hold"] == "unreadable" or entry["state"] in ("unavailable", "held")


@pytest.mark.parametrize(("seeded", "damage"), _cases(), indirect=["seeded"])
def test_damaged_value_never_admits_holds_only_its_automation_and_never_tracebacks(seeded: Seeded, damage: Damage) -> None:
    store = seeded.store
    # One row: the first of ``bad``'s (a key cannot collide with its neighbour's).
    row = "rowid" if store.dialect == "sqlite" else "ctid"
    where = f"{row} IN (SELECT {row} FROM {damage.table} WHERE {WHERE[damage.table]} LIMIT 1)"
    with store.engine.begin() as conn:
        damaged = conn.execute(text(f"UPDATE {damage.table} SET {damage.column} = {damage.sql} WHERE {where}")).rowcount
    try:
        assert damaged, f"the seed has no {damage.table} row for {where}"
        _check(seeded, damage)
    finally:
        _restore(seeded, damage.table)
    after = dump(store)  # put back exactly, and nothing the checks ran wrote a row
    changed = {
        t: (sorted(set(after[t]) - set(rows), key=repr), sorted(set(rows) - set(after[t]), key=repr))
        for t, rows in seeded.baseline.items()
        if after[t] != rows
    }
    assert not changed, repr(changed)


def _restore(seeded: Seeded, table: str) -> None:
    """Put ``table`` back as seeded (every row: a damaged key no longer finds its row)."""
    rows = seeded.baseline[table]
    with seeded.store.engine.begin() as conn:
        columns = list(conn.execute(text(f"SELECT * FROM {table} LIMIT 0")).keys())  # as ``dump`` reads them
        conn.execute(text(f"DELETE FROM {table}"))
        insert = text(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})")
        for row in rows:
            conn.execute(insert, dict(zip(columns, row, strict=True)))


def _first_of_column(damage: Damage) -> bool:
    """Every read command runs for one damage of each column (status runs for every damage)."""
    return next(d for d in _damages("sqlite") if (d.table, d.column) == (damage.table, damage.column)) == damage


def _check(seeded: Seeded, damage: Damage) -> None:
    store = seeded.store
    clock = FixedClock(NOW)
    admission = Admission(store, clock)
    decision = admission.reserve(goal="g", agent="bad", automation="bad", turn_id="new-bad", trigger_time=NOW)
    assert not decision.admitted, decision  # inside the floor, damaged or not: never admitted
    readback = admission.eligibility("g", "bad", "bad")
    if damage.damages_admission:
        assert decision.reason == Reason.STATE_UNAVAILABLE, decision
        assert readback.status == "unavailable", readback

    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=seeded.state_dir))
    host._guarded("sync", host.sync)  # as its loop runs it: a failed sync is logged and retried
    holds, armed = host.holds(), host.armed()
    if damage.table not in GLOBAL and not ((damage.table, damage.column) in UNATTRIBUTABLE and damage.kind in ("null", "wrong-type")):
        assert "good" not in holds and "good" in armed, (holds, armed)  # the others keep being planned
    assert not ("bad" in holds and "bad" in armed)

    result = run_cli("status", "--json", db=seeded.url)
    _no_traceback(result, "status")
    status = _status_of(result)
    if "bad" in holds:  # what the host holds, the readback holds and says why
        assert _unreadable(status.get("bad")), status.get("bad")
    if damage.damages_admission and "bad" in status:
        assert _unreadable(status["bad"]) or status["bad"]["eligibility"]["status"] == "unavailable", status["bad"]
    if not _first_of_column(damage):
        return
    for argv in (
        ["automation", "show", "bad"],
        ["automation", "list"],
        ["starts"],
        ["policy", "show", "g/bad/bad"],
        ["policy", "history", "g/bad/bad"],
        ["mission", "list"],
        ["settings", "show"],
        ["owner", "list"],
        ["notify", "list"],
        ["notify", "events"],
        ["automation", "preview", "bad"],
        ["automation", "diff", "bad"],
    ):
        _no_traceback(run_cli(*argv, db=seeded.url), " ".join(argv))


# -- damaged files -------------------------------------------------------------------------------


def _truncate_half(data: bytes) -> bytes:
    return data[: len(data) // 2]


def _truncate_header(data: bytes) -> bytes:
    return data[:100]


def _scribble_middle(data: bytes) -> bytes:
    rng = random.Random(10)  # fixed: the same bytes in every run
    middle = len(data) // 2
    return data[:middle] + bytes(rng.randrange(256) for _ in range(4096)) + data[middle + 4096 :]


def _scribble_every_page(data: bytes) -> bytes:
    rng = random.Random(11)
    out = bytearray(data)
    for page in range(4096, len(out), 4096):  # past the header: every page's content damaged
        for i in range(page + 100, min(page + 200, len(out))):
            out[i] = rng.randrange(256)
    return bytes(out)


def _scribble_header(data: bytes) -> bytes:
    return b"\xff" * 100 + data[100:]


FILE_DAMAGE = [
    pytest.param(lambda data: b"", id="zero-byte"),
    pytest.param(_truncate_half, id="truncated-half"),
    pytest.param(_truncate_header, id="truncated-to-header"),
    pytest.param(_scribble_middle, id="scribbled-middle"),
    pytest.param(_scribble_every_page, id="scribbled-every-page"),
    pytest.param(_scribble_header, id="scribbled-header"),
]
READ_AND_ADMIT = [
    ["admit", "--goal", "g", "--agent", "bad", "--automation", "bad", "--turn", "file-t"],
    ["admit", "--goal", "g", "--agent", "fresh", "--turn", "file-u"],
    ["status", "--json"],
    ["starts"],
    ["policy", "show", "g/bad"],
    ["automation", "list"],
    ["automation", "show", "bad"],
    ["turn", "run", "bad"],
    ["settings", "show"],
    ["notify", "events"],
]


@pytest.fixture(scope="module")
def seeded_file(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a seeded SQLite store, closed (its WAL checkpointed into the file)."""
    path = tmp_path_factory.mktemp("file") / "floorgate.db"
    store = open_store(str(path))
    _seed(store)
    # Floors no real clock leaves (the CLI reads the system clock): an admission is the damage's doing.
    for scope, revision in (("g/bad", 1), ("g/fresh", 0)):
        Policies(store, FixedClock(T0)).configure(
            Scope.parse(scope), min_interval=timedelta(days=3650), expected_revision=revision, owner_ref="o"
        )
    with store.engine.begin() as conn:  # a start of 'fresh' too: its floor counts from it
        conn.execute(
            text(
                "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind) "
                "VALUES ('s-fresh', 'g', 'fresh', '', :t, :t, 'confirmed', 'automatic')"
            ),
            {"t": int(T0.timestamp() * 1e6)},
        )
    store.close()
    return path.read_bytes()


@pytest.mark.parametrize("damage", FILE_DAMAGE)
def test_a_damaged_database_file_never_admits_and_no_command_tracebacks(seeded_file: bytes, tmp_path: Path, damage: Any) -> None:
    path = tmp_path / "floorgate.db"
    path.write_bytes(damage(seeded_file))
    for argv in READ_AND_ADMIT:
        result = run_cli(*argv, db=str(path))
        _no_traceback(result, " ".join(argv))
        if argv[0] == "admit" or argv[:2] == ["turn", "run"]:
            assert result.returncode != 0, (argv, result)  # damaged state never admits
    # A real process, as an operator runs it.
    proc = subprocess.run(
        [sys.executable, "-m", "floorgate", "--db", str(path), "admit", "--goal", "g", "--agent", "bad", "--turn", "proc-t"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
    )
    _no_traceback(proc, "a real 'floorgate admit'")
    assert proc.returncode != 0, proc


def test_a_record_field_with_no_column_must_be_given_never_defaulted() -> None:
    """``from_row`` reads every field from its column; a field with none (a ``Tick``'s times) is
    the caller's to give, and leaving it out is a programming error, not a silent default."""
    row = SimpleNamespace(**dict.fromkeys(schema.ticks.c.keys(), 0))
    with pytest.raises(TypeError, match=r"Tick has no column in fg_ticks for actual_at, nominal_at"):
        from_row(Tick, schema.ticks, row)
