"""Retention on a fake clock, on SQLite and PostgreSQL: what goes (old ticks, settled turns,
delivered events, their turn logs) and what stays (every start, the latest tick of every
automation, the turn of every lane's latest start, the turns of a live mission, anything not
settled or not delivered); batches; the host's pass; a prune killed by SIGKILL; the CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import func, select, update
from test_wake import runtime

from floorgate.admission import Admission, Automations, FixedClock, Journal
from floorgate.admission import _schema as s
from floorgate.admission.events import EventKind, Events
from floorgate.admission.retention import Kept, Retention
from floorgate.admission.triggers import Triggers
from floorgate.scheduler.app.retention import HostPruner, PruneService

from helpers import add_automation, floor, wait_for

T_OLD = datetime(2026, 1, 5, 9, 0, tzinfo=timezone.utc)
DAYS_90 = timedelta(days=90)


def _count(store, table) -> int:  # type: ignore[no-untyped-def]
    with store.read() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())


def _history(store, tmp_path: Path, *, days: int = 120, lanes: tuple[str, ...] = ("x",), every: int = 10):  # type: ignore[no-untyped-def]
    """Real ticks and turns through a host on a fake clock: a turn of each lane every ``every``
    days for ``days`` days, then ``now`` is ``days`` after the first. Returns (clock, host)."""
    clock = FixedClock(T_OLD - timedelta(hours=1))
    for name in lanes:
        floor(store, clock, f"g/a/{name}", timedelta(hours=20))
        add_automation(store, clock, name, schedule="DTSTART:20260105T090000Z RRULE:FREQ=DAILY", script="print('turn output ' * 20)")
    host = runtime(store, clock, tmp_path, catch_up=timedelta(0))
    for day in range(0, days, every):
        clock.set(T_OLD + timedelta(days=day))
        for name in lanes:
            assert host.tick(name).decision == "admitted"
    host.flush()  # the tick log is written in batches
    clock.set(T_OLD + timedelta(days=days))
    return clock, host


def test_prune_keeps_what_floors_missions_and_readbacks_need(store, tmp_path) -> None:
    clock, _host = _history(store, tmp_path, lanes=("x", "y"))
    admission = Admission(store, clock)
    starts_before = admission.starts()
    eligibility_before = {n: admission.eligibility("g", "a", n).next_eligible_at for n in ("x", "y")}
    logs = sorted((tmp_path / "state" / "logs").rglob("*"))
    assert len([p for p in logs if p.is_file()]) == 24
    # A live mission holds its turns whatever their age: give one old turn of y an open mission.
    t, m = s.turns, s.missions
    with store.read() as conn:
        kept_by_mission = conn.execute(
            select(t.c.turn_id, t.c.mission_id).where(t.c.automation_id == "y").order_by(t.c.started_at_us)
        ).first()
    if kept_by_mission.mission_id is not None:
        with store.write() as conn:
            conn.execute(update(m).where(m.c.mission_id == kept_by_mission.mission_id).values(status="open"))
    # Events: one old and delivered (goes), one old with a pending and one with a dead delivery (stay).
    events = Events(store, clock)
    events.add_webhook("https://example.invalid/hook", [EventKind.TIMER_DRIFT])
    kind = EventKind.TIMER_DRIFT
    clock.set(T_OLD)
    ids = [events.note(kind, f"subject-{i}", {}, key=f"k{i}") for i in range(3)]
    clock.set(T_OLD + timedelta(days=120))
    d = s.deliveries
    with store.write() as conn:
        for event_id, state in zip(ids, ("delivered", "pending", "dead"), strict=True):
            conn.execute(update(d).where(d.c.event_id == event_id).values(state=state))
    assert _count(store, d) == 3

    report = PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False, batch=7)

    assert admission.starts() == starts_before  # every start stays
    assert {n: admission.eligibility("g", "a", n).next_eligible_at for n in ("x", "y")} == eligibility_before
    with store.read() as conn:
        left_turns = {r.turn_id: r for r in conn.execute(select(t))}
        left_ticks = list(conn.execute(select(s.ticks.c.automation_id, s.ticks.c.actual_us)))
        left_events = {r.event_id for r in conn.execute(select(s.events.c.event_id))}
    cutoff = clock.now() - DAYS_90
    assert all(tk.actual_us >= cutoff for tk in left_ticks)  # the latest tick of each is recent here
    assert {tk.automation_id for tk in left_ticks} == {"x", "y"}
    assert all(r.started_at_us >= cutoff or r.turn_id == kept_by_mission.turn_id for r in left_turns.values())
    if kept_by_mission.mission_id is not None:
        assert kept_by_mission.turn_id in left_turns
    assert ids[0] not in left_events and {ids[1], ids[2]} <= left_events
    assert _count(store, d) == 2  # the delivered event's delivery went with it
    files = [p for p in (tmp_path / "state" / "logs").rglob("*") if p.is_file()]
    assert len(files) == len(left_turns) and report.logs_deleted == 24 - len(left_turns)
    assert report.before.rows.turns == 24 and report.after.rows.turns == len(left_turns)
    assert report.before.log_bytes > report.after.log_bytes > 0
    assert report.batches > 1 and report.complete


def test_the_latest_tick_and_the_latest_starts_turn_stay_however_old(store, tmp_path) -> None:
    clock, _host = _history(store, tmp_path, days=5, every=1)
    admission = Admission(store, clock)
    last = admission.eligibility("g", "a", "x").last_start
    # A later turn that never started (refused before admission, e.g. by its envelope): the
    # automation's latest turn, but not its lane's latest start.
    clock.set(last.anchor_at + timedelta(hours=1))
    Journal(store, clock).begin(
        turn_id="x-refused", automation_id="x", goal_id="g", agent_id="a", attempt=1, kind="automatic", manual_reason=None,
        runner_host="h", runner_pid=1, deadline=clock.now() + timedelta(minutes=1), log_path=None,
    )  # fmt: skip
    with store.write() as conn:
        conn.execute(
            update(s.turns).where(s.turns.c.turn_id == "x-refused").values(phase="settled", status="denied", settled_at_us=clock.now())
        )
    clock.advance(timedelta(days=400))  # everything is far older than the limit
    PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False)
    with store.read() as conn:
        ticks = list(conn.execute(select(s.ticks.c.nominal_us)))
        turns = {r.turn_id for r in conn.execute(select(s.turns.c.turn_id))}
    assert [tk.nominal_us for tk in ticks] == [T_OLD + timedelta(days=4)]  # catch-up still knows the last tick
    assert turns == {last.turn_id, "x-refused"}  # the latest start's turn, and the latest turn
    assert len(admission.starts()) == 5


def test_a_pruned_turn_id_is_still_never_admitted_again(store, tmp_path) -> None:
    clock, host = _history(store, tmp_path, days=5, every=1)
    first = min(Admission(store, clock).starts(), key=lambda st: st.anchor_at).turn_id
    clock.advance(timedelta(days=400))
    PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False)
    with store.read() as conn:
        assert conn.execute(select(s.turns).where(s.turns.c.turn_id == first)).first() is None
    again = host.executor.run(Automations(store, clock).get("x"), turn_id=first)
    assert again.verdict.status == "denied" and again.decision is not None and again.decision.reason == "turn_already_started"


def test_a_dry_run_counts_and_writes_nothing(store, tmp_path) -> None:
    clock, _host = _history(store, tmp_path, days=100, every=5)
    service = PruneService(store, clock, tmp_path / "state")
    before = service.footprint()
    dry = service.prune(DAYS_90, dry_run=True)
    assert service.footprint() == before == dry.before == dry.after
    assert dry.deleted[Kept.TURNS] == 2 and dry.deleted[Kept.TICKS] == 2 and dry.logs_deleted == 2
    real = service.prune(DAYS_90, dry_run=False)
    assert real.deleted == dry.deleted and real.log_bytes_deleted == dry.log_bytes_deleted


def test_prune_removes_no_file_through_a_link_or_outside_the_logs(store, tmp_path) -> None:
    clock, _host = _history(store, tmp_path, days=100, every=5)
    t = s.turns
    with store.read() as conn:
        old = [r.log_path for r in conn.execute(select(t.c.log_path).where(t.c.started_at_us < clock.now() - DAYS_90))]
    assert len(old) == 2
    linked_to, outside = tmp_path / "precious", tmp_path / "other" / "deep" / "elsewhere.log"
    outside.parent.mkdir(parents=True)
    linked_to.write_text("keep me")
    outside.write_text("keep me too")
    os.unlink(old[0])
    os.symlink(linked_to, old[0])  # an old turn's log is now a link to a file outside
    with store.write() as conn:
        conn.execute(update(t).where(t.c.log_path == old[1]).values(log_path=str(outside)))

    report = PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False)

    assert report.deleted[Kept.TURNS] == 2 and report.logs_deleted == 0 and report.log_bytes_deleted == 0
    assert linked_to.read_text() == "keep me" and outside.read_text() == "keep me too"
    assert os.path.islink(old[0])  # the link itself is left as it is


def test_the_hosts_pass_prunes_a_few_batches_per_call_then_rests(store, tmp_path) -> None:
    clock, _host = _history(store, tmp_path, days=120, every=2)
    pruner = HostPruner(PruneService(store, clock, tmp_path / "state"), clock)
    pruner.BATCH, pruner.BATCHES_PER_CALL = 4, 2  # type: ignore[misc]
    assert pruner.step(timedelta(0)) is None  # retention off: nothing
    first = pruner.step(DAYS_90)
    assert first is not None and first.batches == 2 and not first.complete
    assert sum(first.deleted.values()) == 8
    while (report := pruner.step(DAYS_90)) is not None and not report.complete:
        pass
    assert pruner.step(DAYS_90) is None  # resting after a complete pass
    assert Retention(store, clock).prunable(clock.now() - DAYS_90) == dict.fromkeys(Kept, 0)
    clock.advance(HostPruner.REST)
    assert pruner.step(DAYS_90) is not None  # rested: the next pass runs


def test_prune_takes_no_admission_lock(store, tmp_path, monkeypatch) -> None:
    clock, _host = _history(store, tmp_path, days=100)
    taken: list[str | None] = []
    original = type(store)._lock

    def spy(self, conn, key):  # type: ignore[no-untyped-def]
        taken.append(key)
        return original(self, conn, key)

    monkeypatch.setattr(type(store), "_lock", spy)
    PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False, batch=2)
    assert taken and not [k for k in taken if k is not None and k.startswith("agent/")]


# -- the CLI and a real process --------------------------------------------------------------


def _cli_history(sqlite_db: str, tmp_path: Path) -> None:
    from floorgate.admission import open_store

    store = open_store(sqlite_db)
    try:
        _history(store, tmp_path, days=150)
    finally:
        store.close()


@pytest.mark.parametrize(
    ("argv", "field"),
    [
        (["--older-than", "soon"], "--older-than"),
        (["--older-than", "0d"], "--older-than"),
        (["--older-than", "12h"], "--older-than"),
        (["--older-than", "90d", "--batch", "0"], "--batch"),
        (["--older-than", "90d", "--batch", "many"], "--batch"),
    ],
    ids=["not-a-duration", "zero", "under-a-day", "batch-zero", "batch-text"],
)
def test_bad_prune_input_is_one_line_exit_2_and_deletes_nothing(sqlite_db: str, tmp_path, argv, field) -> None:  # type: ignore[no-untyped-def]
    from test_cli import cli, one_line_error

    _cli_history(sqlite_db, tmp_path)
    before = json.loads(
        cli("prune", "--older-than", "1d", "--dry-run", "--json", "--state-dir", str(tmp_path / "state"), db=sqlite_db).stdout
    )
    r = cli("prune", *argv, "--state-dir", str(tmp_path / "state"), db=sqlite_db)
    assert r.returncode == 2 and field in one_line_error(r)
    after = json.loads(
        cli("prune", "--older-than", "1d", "--dry-run", "--json", "--state-dir", str(tmp_path / "state"), db=sqlite_db).stdout
    )
    assert after["before"] == before["before"]


def test_prune_prints_sizes_before_and_after(sqlite_db: str, tmp_path) -> None:
    from test_cli import cli

    _cli_history(sqlite_db, tmp_path)
    r = cli("prune", "--older-than", "90d", "--json", "--state-dir", str(tmp_path / "state"), db=sqlite_db)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["before"]["turns"] > doc["after"]["turns"] >= 1 and doc["before"]["starts"] == doc["after"]["starts"] == 15
    assert (
        doc["before"]["log_bytes"] > doc["after"]["log_bytes"] and doc["deleted"]["turns"] == doc["before"]["turns"] - doc["after"]["turns"]
    )
    text = cli("prune", "--older-than", "90d", "--dry-run", "--state-dir", str(tmp_path / "state"), db=sqlite_db).stdout
    assert "would delete 0 ticks, 0 turns" in text and "log_bytes" in text


def test_a_prune_killed_by_sigkill_leaves_a_consistent_store(db_url: str, store, tmp_path) -> None:
    clock, _host = _history(store, tmp_path, days=200, lanes=("x", "y", "z"))
    events = Events(store, clock)
    events.add_webhook("https://example.invalid/hook", [EventKind.TIMER_DRIFT])
    clock.set(T_OLD)
    for i in range(400):
        events.note(EventKind.TIMER_DRIFT, f"s{i}", {}, key=f"e{i}")
    clock.set(T_OLD + timedelta(days=200))
    with store.write() as conn:
        conn.execute(update(s.deliveries).values(state="delivered"))
    ticks_before = _count(store, s.ticks)
    starts_before = Admission(store, clock).starts()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    script = (
        "import sys; from datetime import timedelta; from pathlib import Path;"
        "from floorgate.admission import FixedClock, open_store;"
        "from floorgate.scheduler.app.retention import PruneService;"
        "from test_retention import T_OLD;"
        "store = open_store(sys.argv[1]);"
        "PruneService(store, FixedClock(T_OLD + timedelta(days=200)), Path(sys.argv[2])).prune(timedelta(days=90), dry_run=False, batch=1)"
    )
    proc = subprocess.Popen([sys.executable, "-c", script, db_url, str(tmp_path / "state")], env=env)
    try:
        wait_for(lambda: _count(store, s.ticks) < ticks_before or proc.poll() is not None, what="a first batch committed")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGKILL  # killed in the middle, not finished
    retention = Retention(store, clock)
    left = retention.prunable(clock.now() - DAYS_90)
    assert left[Kept.TICKS] > 0 or left[Kept.TURNS] > 0 or left[Kept.EVENTS] > 0  # it was interrupted
    assert Admission(store, clock).starts() == starts_before
    with store.read() as conn:
        orphans = conn.execute(
            select(func.count()).select_from(s.deliveries).where(~s.deliveries.c.event_id.in_(select(s.events.c.event_id)))
        ).scalar_one()
        latest = {r.automation_id for r in conn.execute(select(s.ticks.c.automation_id).distinct())}
    assert orphans == 0 and latest == {"x", "y", "z"}
    PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False)  # the next prune finishes the job
    assert retention.prunable(clock.now() - DAYS_90) == dict.fromkeys(Kept, 0)


def test_a_running_host_prunes_by_its_host_policy(db_url: str, store, tmp_path) -> None:
    """A real ``floorgate run`` on the system clock: history from January is far older than 90 days."""
    from floorgate.admission import HostPolicies, HostPolicy

    from helpers import start_host, stop

    clock, _host = _history(store, tmp_path, days=60, every=5)
    before = Retention(store).prunable(datetime.now(timezone.utc) - DAYS_90)
    assert before[Kept.TURNS] == 11 and before[Kept.TICKS] == 11
    policies = HostPolicies(store, clock)
    policies.set(HostPolicy(catch_up=timedelta(0), retention=DAYS_90), expected_revision=policies.get().revision, owner_ref="test")
    logs = tmp_path / "state" / "logs"
    assert len([p for p in logs.rglob("*") if p.is_file()]) == 12
    proc = start_host(db_url, tmp_path / "state")
    try:
        wait_for(lambda: Retention(store).prunable(datetime.now(timezone.utc) - DAYS_90) == dict.fromkeys(Kept, 0), what="the host pruned")
    finally:
        code, log = stop(proc)
    assert code == 0, log
    assert _count(store, s.turns) == 1 and len(Admission(store, clock).starts()) == 12
    assert len([p for p in logs.rglob("*") if p.is_file()]) == 1


def test_served_triggers_go_and_pending_ones_stay_however_old(store, tmp_path) -> None:
    clock = FixedClock(T_OLD)
    add_automation(store, clock, "x", schedule="DTSTART:20260105T090000Z RRULE:FREQ=DAILY", script="true")
    triggers = Triggers(store, clock)
    for i in range(3):
        triggers.trigger("x", trigger_id=f"old-{i}")
    served_by = triggers.serve("x", "turn-1")
    clock.set(T_OLD + timedelta(minutes=5))
    triggers.trigger("x", trigger_id="old-pending")  # never served: it still has work to wake
    clock.set(T_OLD + timedelta(days=120))
    triggers.trigger("x", trigger_id="new-pending")
    report = PruneService(store, clock, tmp_path / "state").prune(DAYS_90, dry_run=False)
    assert served_by == 3 and report.deleted[Kept.TRIGGERS] == 3
    with store.read() as conn:
        left = sorted(conn.execute(select(s.triggers.c.trigger_id)).scalars())
    assert left == ["new-pending", "old-pending"]
    assert triggers.pending("x") is not None
