"""The host's tick path: what a denied tick costs at the database (counted, never timed), and a
denial decided while every turn worker is busy with a long turn.

Round trips are counted where the database sees them: on PostgreSQL every ReadyForQuery the server
sends through a counting proxy (a simple query, or a Sync of the extended protocol); on SQLite
every statement the library runs (its trace callback), BEGIN and COMMIT included. A change that
adds a read to a denied tick shows up here as a failing count.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from basics import T0, pg_schema_of, raw_sql
from pg_proxy import CountingProxy
from sqlalchemy import event

from floorgate.admission import Admission, Automations, FixedClock, Journal, Store, StoreUnavailable, SystemClock, TickLog, open_store
from floorgate.admission import _locks as locks
from floorgate.admission.store import lock_id
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime import recovery
from floorgate.scheduler.runtime._turn_pool import TurnPool
from floorgate.scheduler.runtime.executor import DEFAULT_LEASE, TurnExecutor
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from helpers import add_automation, floor, wait_for

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"


@contextmanager
def counted_store(db_url: str) -> Iterator[tuple[Store, Callable[[], int]]]:
    """A second store on ``db_url`` whose round trips are counted, and the counter."""
    if "://" not in db_url:
        statements: list[str] = []
        store = open_store(db_url)
        store.engine.dispose()  # every connection from here on is made, and traced, below
        event.listen(store.engine, "connect", lambda conn, _record: conn.set_trace_callback(statements.append))
        try:
            yield store, lambda: len(statements)
        finally:
            store.close()
        return
    rest = db_url.split("://", 1)[1]
    userinfo, _, hostpart = rest.rpartition("@")
    hostport, _, database = hostpart.partition("/")
    host, _, port = hostport.partition(":")
    proxy = CountingProxy((host, int(port or 5432)))
    database = database.split("?", 1)[0]
    user = f"{userinfo}@" if userinfo else ""
    url = f"postgresql://{user}127.0.0.1:{proxy.port}/{database}?sslmode=disable&gssencmode=disable"
    url += f"&options=-csearch_path%3D{pg_schema_of(db_url)}"
    store = open_store(url)
    try:
        yield store, lambda: proxy.round_trips
    finally:
        store.close()
        proxy.close()


def test_a_denied_tick_costs_one_read_beside_its_denial(store: Store, db_url: str, tmp_path: Path, bench_row: Any) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    add_automation(store, clock, schedule=EVERY_15M)
    with counted_store(db_url) as (counted, round_trips):
        host = Floorgate(counted, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
        host.sync()  # armed, so every decision re-plans its timer too
        assert host.tick("x").decision == "admitted"
        clock.advance(timedelta(minutes=15))
        assert host.tick("x").decision == "denied"  # the first denial judges the lane's rules
        clock.advance(timedelta(minutes=15))
        before = round_trips()
        tick = host.tick("x")
        tick_cost = round_trips() - before
        assert (tick.decision, tick.reason) == ("denied", "interval_wait"), tick
        admission = Admission(counted, clock)
        before = round_trips()
        bare = admission.reserve(goal="g", agent="a", automation="x", turn_id="bare", trigger_time=clock.now())
        bare_cost = round_trips() - before
        assert not bare.admitted
    # Once the host knows the automation and its rules, a denied tick is the tick's facts (one
    # statement) and the denial inside the managed turn's begin, which costs what a bare denial does.
    assert tick_cost == bare_cost + 1, (tick_cost, bare_cost)
    assert bare_cost >= 1, bare_cost  # the counter saw the denial's statement: the counts are not 0 == 0
    bench_row(
        f"denied tick: round trips vs the bare denial's ({store.dialect})",
        f"{tick_cost} vs {bare_cost}",
        "<= 2x",
        tick_cost <= 2 * bare_cost,
    )


def test_denied_ticks_commit_nothing_and_are_recorded_together_in_one_commit(store: Store, db_url: str, tmp_path: Path) -> None:
    """A burst's denied ticks make no commit when they are decided; the tick log records them all
    in one transaction (so a burst never serializes one durable commit per denial)."""
    if "://" in db_url:
        pytest.skip("counts SQLite's COMMIT statements, the fsyncs a burst would otherwise serialize")
    clock = FixedClock(T0)
    admission = Admission(store, clock)
    ids = [f"x{i}" for i in range(5)]
    for i, automation_id in enumerate(ids):
        floor(store, clock, f"g/a{i}", timedelta(hours=1))
        add_automation(store, clock, automation_id=automation_id, schedule=EVERY_15M, agent=f"a{i}")
        assert admission.reserve(goal="g", agent=f"a{i}", automation=automation_id, turn_id=f"t{i}", trigger_time=clock.now()).admitted
        admission.confirm(f"t{i}")
    clock.advance(timedelta(minutes=15))
    statements: list[str] = []
    counted = open_store(db_url)
    counted.engine.dispose()  # every connection from here on is made, and traced, below
    event.listen(counted.engine, "connect", lambda conn, _record: conn.set_trace_callback(statements.append))
    try:
        host = Floorgate(counted, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))
        decided = [host.tick(automation_id) for automation_id in ids]
        assert [(t.decision, t.reason) for t in decided] == [("denied", "interval_wait")] * len(ids), decided
        at_decision = sum(1 for sql in statements if sql.strip().upper().startswith("COMMIT"))
        host.flush()
        at_flush = sum(1 for sql in statements if sql.strip().upper().startswith("COMMIT")) - at_decision
    finally:
        counted.close()
    assert (at_decision, at_flush) == (0, 1), statements
    assert all([t.decision for t in TickLog(store).recent(a)] == ["denied"] for a in ids)


def _group_host(store: Store, tmp_path: Path, agents: list[str]) -> tuple[HostRuntime, list[Any]]:
    """A host over automations x0.. on ``agents`` (floored, never started), and their ticks that
    may admit, decided up to the reservation (what the admitters queue)."""
    clock = SystemClock()
    for agent in sorted(set(agents)):
        floor(store, clock, f"g/{agent}", timedelta(hours=1))  # type: ignore[arg-type]
    for i, agent in enumerate(agents):
        add_automation(store, clock, automation_id=f"x{i}", schedule="every 1s", agent=agent)  # type: ignore[arg-type]
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))
    queued = [host.ticking._tick_once(f"x{i}") for i in range(len(agents))]
    assert all(type(q).__name__ == "Admitting" for q in queued), queued
    return host, queued


def test_a_group_of_reservations_commits_once_and_admits_one_per_window(store: Store, db_url: str, tmp_path: Path) -> None:
    """SQLite: the ticks queued for admission are reserved in one write transaction (one durable
    commit for the group), and two ticks of one agent in the same group still give one start."""
    if "://" in db_url:
        pytest.skip("groups are SQLite's (one writer); PostgreSQL reserves each tick on its own")
    host, queued = _group_host(store, tmp_path, ["a0", "a1", "a2", "a3", "a3"])
    assert host.ticking.groups is not None
    statements: list[str] = []
    host.store.engine.dispose()  # connections from here on are traced
    event.listen(host.store.engine, "connect", lambda conn, _record: conn.set_trace_callback(statements.append))
    handed: list[str] = []
    host.ticking._hand_off = lambda pending: handed.append(pending.automation_id)  # type: ignore[method-assign]
    host.ticking._admit_group(queued)
    commits = sum(1 for sql in statements if sql.strip().upper().startswith("COMMIT"))
    assert commits == 1, [sql for sql in statements if sql.strip().upper().startswith(("BEGIN", "COMMIT"))]
    assert sorted(handed) == ["x0", "x1", "x2", "x3"], handed  # x4 shares x3's agent: its floor denies it
    with host.ticking._lock:
        assert [(t.automation_id, t.decision) for t in host.records.buffered()] == [("x4", "denied")]
        assert host.ticking._running == {"x0": 1, "x1": 1, "x2": 1, "x3": 1, "x4": 0}  # claims held until the turns run
    starts = Admission(store).starts(goal="g")
    assert sorted(s.automation_id for s in starts) == ["x0", "x1", "x2", "x3"]  # type: ignore[type-var]
    assert {r.turn_id for r in Journal(store).unsettled(None)} == {s.turn_id for s in starts}


def test_a_group_whose_commit_fails_admits_none_of_its_ticks(store: Store, db_url: str, tmp_path: Path) -> None:
    """A group's commit fails: no start and no journal row stay, no turn is handed over, every tick
    of it is recorded as an error and its claim released."""
    if "://" in db_url:
        pytest.skip("groups are SQLite's")
    host, queued = _group_host(store, tmp_path, ["a0", "a1", "a2"])
    unit = host.store.unit

    @contextmanager
    def failing() -> Iterator[Any]:
        with unit() as conn:
            yield conn
            raise StoreUnavailable("disk I/O error (injected at commit)")

    host.store.unit = failing  # type: ignore[method-assign]
    handed: list[str] = []
    host.ticking._hand_off = lambda pending: handed.append(pending.automation_id)  # type: ignore[method-assign]
    host.ticking._admit_group(queued)
    assert handed == []
    assert Admission(store).starts(goal="g") == [] and Journal(store).unsettled(None) == []
    with host.ticking._lock:
        assert sorted((t.automation_id, t.decision, t.reason) for t in host.records.buffered()) == [
            (f"x{i}", "error", "StoreUnavailable") for i in range(3)
        ]
        assert host.ticking._running == {"x0": 0, "x1": 0, "x2": 0} and host.ticking._inflight == set()


def test_a_denial_is_decided_while_every_turn_worker_runs_a_long_turn(store: Store, tmp_path: Path) -> None:
    """One turn worker, held by a turn that runs until the test lets it end: fires of another
    automation, inside its floor, are still decided (denied) and recorded while that turn runs."""
    clock = SystemClock()
    go = tmp_path / "go"
    long_turn = f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)"
    add_automation(store, clock, automation_id="long", schedule="every 1s", script=long_turn, agent="busy", timeout=120)  # type: ignore[arg-type]
    add_automation(store, clock, automation_id="floored", schedule="every 1s", agent="idle")  # type: ignore[arg-type]
    floor(store, clock, "g/idle", timedelta(days=1))  # type: ignore[arg-type]
    admission = Admission(store, clock)
    assert admission.reserve(
        goal="g", agent="idle", automation="floored", turn_id="earlier", trigger_time=clock.now() - timedelta(minutes=1)
    ).admitted
    admission.confirm("earlier")
    host = Floorgate(store, clock=clock).host_runtime(
        RuntimeConfig(state_dir=tmp_path / "state", workers=1, flush_every=timedelta(hours=1))
    )
    journal = Journal(store, clock)

    def buffered(automation_id: str, decision: str) -> list[Any]:
        with host.ticking._lock:
            return [t for t in host.records.buffered() if t.automation_id == automation_id and t.decision == decision]

    def fire_floored() -> None:
        """A fire inside the floor (its timer waits for the floor, so the test makes one)."""
        host.scheduler.modify_job("floored", next_run_time=datetime.now(timezone.utc))

    host.start()
    try:
        running = wait_for(lambda: next((r for r in journal.unsettled("long") if r.child_pid), None), what="the long turn to launch")
        assert host.ticking.turns.running() == 1  # the only turn worker is taken
        for n in (1, 2):
            fire_floored()
            wait_for(lambda n=n: len(buffered("floored", "denied")) >= n, what=f"denial {n} while the long turn runs")  # type: ignore[misc]
        still = journal.get(running.turn_id)
        assert still is not None and still.verdict is None, "the long turn ended before the denials were decided"
        assert buffered("long", "admitted") == []  # its tick is recorded once it settles
        go.touch()
        wait_for(lambda: buffered("long", "admitted"), what="the long turn to settle")
    finally:
        go.touch()
        host.stop()
    recorded = TickLog(store).recent("floored", 50)
    assert [(t.decision, t.reason) for t in recorded] == [("denied", "interval_wait")] * 2, recorded
    assert [s.turn_id for s in admission.starts(automation="floored")] == ["earlier"]


@contextmanager
def writes_held(store: Store, db_url: str, goal: str, agent: str) -> Iterator[None]:
    """Another connection holds what an admission of ``goal/agent`` must wait for: SQLite's write
    lock (BEGIN IMMEDIATE), or on PostgreSQL the agent's advisory lock."""
    if store.dialect == "sqlite":
        con = sqlite3.connect(store.engine.url.database, isolation_level=None)
        con.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            con.rollback()
            con.close()
        return
    with store.engine.connect() as conn:
        conn.exec_driver_sql(f"SELECT pg_advisory_lock({lock_id(locks.agent(goal, agent))})")
        try:
            yield
        finally:
            conn.exec_driver_sql(f"SELECT pg_advisory_unlock({lock_id(locks.agent(goal, agent))})")
            conn.commit()


def test_a_tick_that_may_admit_waits_for_the_write_lock_off_the_deciders(store: Store, db_url: str, tmp_path: Path) -> None:
    """While an admission waits for the store's write lock, the timer's job that fired it has
    returned (its reservation waits on an admitter), and a tick of another lane, inside its floor,
    is denied from its plain read meanwhile; once the lock is free the first tick is admitted."""
    clock = SystemClock()
    add_automation(store, clock, automation_id="free", schedule="every 1s", agent="a1")  # type: ignore[arg-type]
    add_automation(store, clock, automation_id="floored", schedule="every 1s", agent="a2")  # type: ignore[arg-type]
    for agent in ("a1", "a2"):
        floor(store, clock, f"g/{agent}", timedelta(days=1))  # type: ignore[arg-type]
    admission = Admission(store, clock)
    earlier = clock.now() - timedelta(minutes=1)
    assert admission.reserve(goal="g", agent="a2", automation="floored", turn_id="earlier", trigger_time=earlier).admitted
    admission.confirm("earlier")
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))

    def buffered(automation_id: str) -> list[tuple[str, str]]:
        with host.ticking._lock:
            return [(t.decision, t.reason) for t in host.records.buffered() if t.automation_id == automation_id]

    try:
        with writes_held(store, db_url, "g", "a1"):
            job = threading.Thread(target=host.ticking._tick, args=("free",))  # what APScheduler's thread runs
            job.start()
            job.join(timeout=20)  # the lock is held far longer than this join would need
            assert not job.is_alive(), "the timer's job waited for the write lock"
            host.ticking._tick("floored")
            assert buffered("floored") == [("denied", "interval_wait")]
            assert admission.starts(automation="free") == [] and buffered("free") == []
        wait_for(lambda: admission.starts(automation="free"), what="the admission once the lock is free")
    finally:
        host.stop()  # the admitted turn settles, and every tick is flushed
    recorded = {a: [(t.decision, t.reason) for t in TickLog(store).recent(a)] for a in ("free", "floored")}
    assert recorded == {"free": [("admitted", "succeeded")], "floored": [("denied", "interval_wait")]}, recorded


def test_stop_settles_the_running_turn_and_leaves_waiting_ones_resumable(store: Store, tmp_path: Path) -> None:
    """Two admitted turns, one worker: stop lets the running one settle, and the one still waiting
    stays journaled under the stopped runner's claim, which recovery then resumes."""
    clock = SystemClock()
    go = tmp_path / "go"
    started = tmp_path / "started"
    long_turn = f"import os, time\nopen({str(started)!r}, 'a').write('x')\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)"
    for automation_id, agent in (("first", "a1"), ("second", "a2")):
        floor(store, clock, f"g/{agent}", timedelta(hours=1))  # type: ignore[arg-type]
        add_automation(store, clock, automation_id=automation_id, schedule="every 1s", script=long_turn, agent=agent, timeout=120)  # type: ignore[arg-type]
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", workers=1))
    journal = Journal(store, clock)
    host.start()
    try:
        wait_for(lambda: host.ticking.turns.running() == 1 and host.ticking.turns.waiting(), what="one turn running and one waiting")
        waiting = host.ticking.turns.waiting()
        # Its claim lapses (a renewal lost to a store blip): this host's recovery must not resume
        # it a second time beside the queued one.
        raw_sql(store, "UPDATE fg_turns SET lease_expires_us = 0 WHERE turn_id = :t", {"t": waiting[0]})
        host.recover()
        assert host.ticking.turns.waiting() == waiting
        stopper = threading.Thread(target=host.stop)
        stopper.start()
        wait_for(lambda: not host.ticking.turns.accepting(), what="the turn pool to stop taking turns")
        go.touch()
        stopper.join(timeout=60)
        assert not stopper.is_alive()
    finally:
        go.touch()
        host.stop()
    records = {r.turn_id: r for r in journal.recent("first", 10) + journal.recent("second", 10)}
    ran = [r for r in records.values() if r.verdict is not None]
    left = [r for r in records.values() if r.verdict is None]
    assert [r.verdict.status for r in ran] == ["succeeded"], records  # type: ignore[union-attr]
    assert [r.turn_id for r in left] == waiting[:1] and left[0].phase == "journaled", records
    assert started.read_text() == "x"  # the waiting turn never launched
    # Recovery resumes it once the claim lapses (at once on this machine after the process exits).
    later = FixedClock(SystemClock().now() + DEFAULT_LEASE + timedelta(seconds=1))
    found = recovery.recover(store, later)
    assert [r.turn_id for r in found.resumable] == [left[0].turn_id]
    automation = Automations(store).get(left[0].automation_id)
    outcome = TurnExecutor(store, state_dir=tmp_path / "state", clock=later).run(automation, turn_id=left[0].turn_id)
    assert outcome.decision is not None and outcome.decision.reason.value == "resumed" and outcome.verdict.status == "succeeded"


def test_the_turn_pool_runs_every_turn_it_takes_and_renews_the_waiting_ones() -> None:
    """Each submitted turn reaches a worker (the lease renewer never takes a worker's wake-up),
    and while one turn holds the only worker, the claims of those waiting are renewed."""
    renewed: list[list[str]] = []
    renewing = threading.Event()

    def renew(turn_ids: list[str]) -> None:
        renewed.append(turn_ids)
        renewing.set()

    pool = TurnPool(1, renew, renew_every=0.05)
    try:
        for n in range(20):  # one after another: the worker is back waiting before each submit
            ran = threading.Event()
            assert pool.submit(f"t{n}", ran.set)
            assert ran.wait(10), f"turn t{n} never reached a worker"
        release = threading.Event()
        assert pool.submit("long", lambda: release.wait(30))
        assert pool.submit("waiting", lambda: None)
        assert renewing.wait(10), "the waiting turn's claim was never renewed"
        assert ["waiting"] in renewed and all("long" not in ids for ids in renewed)
        release.set()
    finally:
        left = pool.stop()
    assert left in ([], ["waiting"])
    assert not pool.submit("after", lambda: None)


def test_renewing_waiting_turns_extends_only_this_runners_journaled_claims(store: Store, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    for automation_id in ("w1", "w2", "w3"):
        add_automation(store, clock, automation_id=automation_id, agent=automation_id)
    executor = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
    admitted = [executor.begin(Automations(store).get(a)) for a in ("w1", "w2", "w3")]
    turn_ids = [a.turn_id for a in admitted]  # type: ignore[union-attr]
    raw_sql(store, "UPDATE fg_turns SET owner_id = 'elsewhere:1:x' WHERE turn_id = :t", {"t": turn_ids[2]})  # taken over
    journal = Journal(store, clock)
    later = T0 + timedelta(minutes=5)
    assert journal.renew_waiting(turn_ids, executor.owner, later) == 2
    leases = {t: journal.get(t).lease_expires for t in turn_ids}  # type: ignore[union-attr]
    assert leases[turn_ids[0]] == leases[turn_ids[1]] == later
    assert leases[turn_ids[2]] != later


def test_ticks_of_one_agent_wait_for_its_first_decision_and_are_denied_from_a_read_after_it(store: Store, tmp_path: Path) -> None:
    """Five lanes of one agent under an agent floor fire at once: one of them goes on to a
    reservation, the other four wait for it and are then denied from one plain read each (one
    ``begin`` in all, not five); another agent's tick is never held by them."""
    clock = SystemClock()
    floor(store, clock, "g/a", timedelta(hours=1))  # type: ignore[arg-type]
    for i in range(5):
        add_automation(store, clock, automation_id=f"x{i}", schedule="every 1s", agent="a")  # type: ignore[arg-type]
    add_automation(store, clock, automation_id="other", schedule="every 1s", agent="b")  # type: ignore[arg-type]
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))
    dispatched: list[Any] = []
    host.ticking._dispatch = dispatched.append  # type: ignore[method-assign]
    begun: list[str] = []
    begin = host.executor.begin

    def counted_begin(automation: Any, **kw: Any) -> Any:
        begun.append(automation.automation_id)
        return begin(automation, **kw)

    host.executor.begin = counted_begin  # type: ignore[method-assign]
    handed: list[str] = []
    host.ticking._hand_off = lambda pending: handed.append(pending.automation_id)  # type: ignore[method-assign]
    for automation_id in ["x0", "x1", "x2", "other", "x3", "x4"]:
        host.ticking._tick(automation_id)
    assert [d.automation_id for d in dispatched] == ["x0", "other"]
    host.ticking._admit_queued(dispatched[0])
    assert (begun, handed) == (["x0"], ["x0"])
    with host.ticking._lock:
        assert sorted((t.automation_id, t.decision, t.reason) for t in host.records.buffered()) == [
            (f"x{i}", "denied", "interval_wait") for i in range(1, 5)
        ]
        assert host.ticking._running == {"x0": 1, "x1": 0, "x2": 0, "x3": 0, "x4": 0, "other": 1}  # the waiters' claims released
    assert [d.automation_id for d in dispatched] == ["x0", "other"]  # no sibling went on to a reservation
    assert [s.automation_id for s in Admission(store).starts(goal="g")] == ["x0"]


def test_ticks_of_one_agent_that_no_rule_limits_go_on_to_their_reservations_together(store: Store, tmp_path: Path) -> None:
    """Without a floor or limit on the lane, its goal or its agent, no start can change a sibling's
    decision: none of them waits for another's, and each is decided by its own ``begin``."""
    clock = SystemClock()
    for i in range(3):
        add_automation(store, clock, automation_id=f"x{i}", schedule="every 1s", agent="a")  # type: ignore[arg-type]
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state", flush_every=timedelta(hours=1)))
    dispatched: list[Any] = []
    host.ticking._dispatch = dispatched.append  # type: ignore[method-assign]
    for i in range(3):
        host.ticking._tick(f"x{i}")
    assert [d.automation_id for d in dispatched] == ["x0", "x1", "x2"]
    handed: list[str] = []
    host.ticking._hand_off = lambda pending: handed.append(pending.automation_id)  # type: ignore[method-assign]
    for admitting in dispatched:
        host.ticking._admit_queued(admitting)
    assert handed == ["x0", "x1", "x2"] and host.records.buffered() == []
    assert host.ticking.siblings._waiting == {}  # no decision of agent a was ever held in flight
