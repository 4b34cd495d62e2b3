"""One owner per turn: claims taken and released in the database, reservation and journal in one
commit, and recovery that finds every orphan. Races use real ``floorgate turn run`` processes."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from basics import T0, raw_sql
from sqlalchemy import event
from test_executor import crashed

from floorgate.admission import Admission, FixedClock, Journal, Phase, SystemClock, open_store
from floorgate.admission.journal import ClaimLost
from floorgate.scheduler.cli import main as cli
from floorgate.scheduler.runtime.executor import PAUSE_ENV, TurnExecutor
from floorgate.scheduler.runtime.recovery import Recovered, orphaned, recover

from helpers import add_automation, floor, wait_for

TURN = "t-1"


def waiting_host(marks: Path, release: Path) -> str:
    """A host that records its launch, then runs until ``release`` exists (at most 60 s)."""
    return (
        f"import os, time\nopen({str(marks)!r}, 'a').write('launch\\n')\n"
        f"d = time.monotonic() + 60\nwhile not os.path.exists({str(release)!r}) and time.monotonic() < d: time.sleep(0.05)"
    )


def turn_run(db_url: str, state: Path, *extra: str, pause: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env.pop(PAUSE_ENV, None)
    if pause is not None:
        env[PAUSE_ENV] = pause
    return subprocess.Popen(
        [sys.executable, "-m", "floorgate", "turn", "run", "x", "--db", db_url, "--state-dir", str(state), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def launches(marks: Path) -> int:
    return len(marks.read_text().splitlines()) if marks.exists() else 0


def rows(db_url: str) -> list[tuple]:  # type: ignore[type-arg]
    """Every start and journal row, leaving out the lease a live runner keeps renewing."""
    with open_store(db_url) as store:
        starts = raw_sql(store, "SELECT * FROM fg_starts ORDER BY turn_id")
        turns = raw_sql(store, "SELECT turn_id, phase, status, owner_id, child_pid, attempt FROM fg_turns ORDER BY turn_id")
    return starts + turns


def setup(db_url: str, script: str, *, floor_for: timedelta | None = timedelta(hours=1)) -> None:
    clock = SystemClock()
    with open_store(db_url) as store:
        if floor_for is not None:
            floor(store, clock, "g/a", floor_for)  # type: ignore[arg-type]
        add_automation(store, clock, script=script, timeout=120)  # type: ignore[arg-type]


# -- two runners, one turn id ----------------------------------------------------------------------
def test_a_second_runner_of_a_live_turn_is_refused_and_the_first_verdict_stands(db_url: str, tmp_path: Path) -> None:
    marks, release = tmp_path / "marks", tmp_path / "release"
    setup(db_url, waiting_host(marks, release))
    first = turn_run(db_url, tmp_path / "s1", "--turn", TURN)
    try:
        wait_for(lambda: launches(marks) == 1, what="the first runner's host")
        before = rows(db_url)
        code, out, err = finish(turn_run(db_url, tmp_path / "s2", "--turn", TURN))
        assert code == 3, (out, err)
        assert out.count("\n") == 1 and f":{first.pid}:" in out and "lease until" in out, out  # one line naming the live owner
        assert rows(db_url) == before  # the second runner wrote nothing
    finally:
        release.write_text("go")
    code, out, err = finish(first)
    assert code == 0 and "succeeded" in out, (out, err)
    assert launches(marks) == 1
    with open_store(db_url) as store:
        assert Journal(store).get(TURN).verdict.status == "succeeded"


def test_a_second_runner_while_the_first_pauses_before_launch_never_launches_twice(db_url: str, tmp_path: Path) -> None:
    marks, pause = tmp_path / "marks", tmp_path / "paused"
    setup(db_url, f"open({str(marks)!r}, 'a').write('launch\\n')")
    first = turn_run(db_url, tmp_path / "s1", "--turn", TURN, pause=f"reserved:{pause}")
    try:
        wait_for(pause.exists, what="the first runner to pause after reserving")
        code, out, err = finish(turn_run(db_url, tmp_path / "s2", "--turn", TURN))
        assert code == 3 and "owned by live runner" in out and "journaled" in out, (out, err)
        assert launches(marks) == 0
    finally:
        Path(f"{pause}.go").write_text("go")
    code, out, err = finish(first)
    assert code == 0, (out, err)
    assert launches(marks) == 1


# -- crashes between reserve and launch ------------------------------------------------------------
def crash_after_reserve(db_url: str, tmp_path: Path) -> int:
    """A ``turn run`` SIGKILLed after its reservation committed, before confirm; returns its pid."""
    pause = tmp_path / "paused"
    runner = turn_run(db_url, tmp_path / "s0", "--turn", TURN, pause=f"reserved:{pause}")
    wait_for(pause.exists, what="the runner to pause after reserving")
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=30)
    with open_store(db_url) as store:
        assert Admission(store).start(TURN).phase is Phase.RESERVED
        assert Journal(store).get(TURN).phase == "journaled"  # the same commit as the reservation
    return runner.pid


def test_sigkill_between_reserve_and_launch_is_resumed_by_the_next_turn_run(db_url: str, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    setup(db_url, f"open({str(marks)!r}, 'a').write('launch\\n')")
    crash_after_reserve(db_url, tmp_path)
    with open_store(db_url) as store:
        anchor = Admission(store).start(TURN).anchor_at
    code, out, err = finish(turn_run(db_url, tmp_path / "s1"))  # the next cron fire, no turn id
    assert code == 0 and f"resuming turn {TURN}" in out, (out, err)
    assert launches(marks) == 1
    with open_store(db_url) as store:
        start = Admission(store).start(TURN)
        assert start.phase is Phase.CONFIRMED and start.anchor_at == anchor  # resumed, the anchor unmoved
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts WHERE phase = 'reserved'") == [(0,)]
    listed = subprocess.run([sys.executable, "-m", "floorgate", "turn", "show", TURN, "--db", db_url], capture_output=True, text=True)
    assert listed.returncode == 0 and "settled, succeeded (completed)" in listed.stdout, listed


def children_of(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (a runner's held host, forked and not yet exec'd)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(pid) and not fields.get("State", "").startswith("Z"):
            found.append(int(entry.name))
    return found


def test_sigkill_while_the_host_is_held_runs_nothing_and_leaves_the_turn_resumable(db_url: str, tmp_path: Path) -> None:
    marks, pause = tmp_path / "marks", tmp_path / "paused"
    setup(db_url, f"open({str(marks)!r}, 'a').write('launch\\n')")
    runner = turn_run(db_url, tmp_path / "s0", "--turn", TURN, pause=f"held:{pause}")
    wait_for(pause.exists, what="the runner to pause with its host spawned held")
    held = children_of(runner.pid)
    assert held, "the host process exists before the confirmation commits"
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=30)
    wait_for(lambda: not any(Path(f"/proc/{pid}").exists() for pid in held), what="the held host to die unrun")
    assert launches(marks) == 0  # its program never ran: nothing was paid for
    with open_store(db_url) as store:
        assert Admission(store).start(TURN).phase is Phase.RESERVED
        assert Journal(store).get(TURN).phase == "journaled"  # resumable, never launched
    code, out, err = finish(turn_run(db_url, tmp_path / "s1"))
    assert code == 0 and f"resuming turn {TURN}" in out, (out, err)
    assert launches(marks) == 1


def test_two_recoverers_of_one_crashed_turn_run_it_at_most_once(db_url: str, tmp_path: Path) -> None:
    marks, release = tmp_path / "marks", tmp_path / "release"
    setup(db_url, waiting_host(marks, release))
    crash_after_reserve(db_url, tmp_path)
    recoverers = [turn_run(db_url, tmp_path / f"r{i}") for i in range(2)]  # each recovers, then resumes
    try:
        wait_for(lambda: launches(marks) >= 1, what="the resumed turn")
        # The loser is refused (the claim is live) or, once the winner holds it, denied by the floor.
        loser = wait_for(lambda: next((p for p in recoverers if p.poll() is not None), None), what="the losing recoverer")
        assert loser.returncode == 3, finish(loser)
    finally:
        release.write_text("go")
    results = sorted(finish(p)[0] for p in recoverers)
    assert results == [0, 3]
    assert launches(marks) == 1
    with open_store(db_url) as store:
        assert raw_sql(store, "SELECT turn_id, phase, status FROM fg_turns") == [(TURN, "settled", "succeeded")]
        assert Admission(store).start(TURN).phase is Phase.CONFIRMED


# -- a failing --state-dir -------------------------------------------------------------------------
def test_an_unusable_state_dir_is_one_line_and_writes_nothing(db_url: str, tmp_path: Path) -> None:
    setup(db_url, "pass")
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    for state in (a_file, tmp_path / ("n" * 300)):
        out, err = io.StringIO(), io.StringIO()
        code = cli.run(["turn", "run", "x", "--db", db_url, "--state-dir", str(state)], out=out, err=err)
        assert code == 2, (out.getvalue(), err.getvalue())
        assert err.getvalue().count("\n") == 1 and "state_dir" in err.getvalue() and "Traceback" not in err.getvalue()
    with open_store(db_url) as store:
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_turns") == [(0,)]


def test_a_state_dir_failing_after_the_reservation_settles_the_turn(db_url: str, tmp_path: Path) -> None:
    marks, pause, state = tmp_path / "marks", tmp_path / "paused", tmp_path / "state"
    setup(db_url, f"open({str(marks)!r}, 'a').write('launch\\n')")
    runner = turn_run(db_url, state, "--turn", TURN, pause=f"reserved:{pause}")
    wait_for(pause.exists, what="the runner to pause after reserving")
    logs = state / "logs" / "x"
    for child in logs.iterdir():
        child.unlink()
    logs.rmdir()
    logs.write_text("not a directory any more")
    Path(f"{pause}.go").write_text("go")
    code, out, err = finish(runner)
    assert code == 5 and "failed (log_unwritable, infra, retryable)" in out and out.count("\n") == 1, (out, err)
    assert "Traceback" not in err
    assert launches(marks) == 0
    with open_store(db_url) as store:
        record = Journal(store).get(TURN)
        assert record.verdict.stop_reason == "log_unwritable" and record.verdict.retryable
        assert Admission(store).start(TURN).phase is Phase.CONFIRMED  # settled, never left reserved
    listed = subprocess.run([sys.executable, "-m", "floorgate", "starts", "--db", db_url, "--json"], capture_output=True, text=True)
    assert [s["phase"] for s in json.loads(listed.stdout)["starts"]] == ["confirmed"], listed


# -- leases ----------------------------------------------------------------------------------------
def test_an_expired_claim_from_another_machine_is_taken_over_once(store, tmp_path) -> None:
    clock = FixedClock(T0)
    marks = tmp_path / "marks"
    floor(store, clock, "g/a", timedelta(hours=1))
    automation = add_automation(store, clock, script=f"open({str(marks)!r}, 'a').write('launch\\n')")
    crashed(store, clock, TURN, "other-machine:4242:abc")  # its lease: 30 s from T0
    journal = Journal(store, clock)
    assert recover(store, clock).resumable == []  # a live lease elsewhere: hands off
    early = TurnExecutor(store, state_dir=tmp_path / "s", clock=clock).run(automation, turn_id=TURN)
    assert early.verdict.stop_reason == "turn_owned" and "other-machine:4242:abc" in early.detail and launches(marks) == 0
    assert journal.get(TURN).owner_id == "other-machine:4242:abc"
    clock.advance(timedelta(seconds=31))
    assert [r.turn_id for r in recover(store, clock).resumable] == [TURN]
    stale = journal.get(TURN)
    runners = [TurnExecutor(store, state_dir=tmp_path / "s", clock=clock) for _ in range(2)]
    won = runners[0].run(automation, turn_id=TURN)
    assert won.decision.reason.value == "resumed" and won.verdict.status == "succeeded"
    assert journal.take_over(stale, "late-recoverer", clock.now() + timedelta(seconds=30), runner_host="h:1", runner_pid=1) is None
    assert runners[1].run(automation, turn_id=TURN).replayed and launches(marks) == 1


def _take_over(url: str, index: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0 + timedelta(minutes=1))
    with open_store(url) as store:
        journal = Journal(store, clock)
        record = journal.get(TURN)
        barrier.wait(timeout=60)
        won = journal.take_over(record, f"racer-{index}", clock.now() + timedelta(seconds=30), runner_host="h:1", runner_pid=1)
        results.put(won is not None)


def test_processes_racing_to_take_over_one_expired_claim_have_one_winner(db_url: str) -> None:
    clock = FixedClock(T0)
    with open_store(db_url) as store:
        add_automation(store, clock)
        crashed(store, clock, TURN, "other-machine:4242:abc", phase="launched")
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(6), ctx.Queue()
    procs = [ctx.Process(target=_take_over, args=(db_url, i, barrier, results)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
        assert p.exitcode == 0
    wins = [results.get(timeout=10) for _ in procs]
    assert wins.count(True) == 1
    with open_store(db_url) as store:
        assert Journal(store).get(TURN).owner_id.startswith("racer-")


def test_a_running_turn_renews_its_lease_and_stops_when_the_claim_is_lost(store, tmp_path) -> None:
    marks, release = tmp_path / "marks", tmp_path / "release"
    clock = SystemClock()
    automation = add_automation(store, clock, script=waiting_host(marks, release))  # type: ignore[arg-type]
    lease = timedelta(seconds=0.6)
    runner = TurnExecutor(store, state_dir=tmp_path / "s", clock=clock, lease=lease)
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_catch(lambda: runner.run(automation, turn_id=TURN))))
    thread.start()
    journal = Journal(store, clock)
    try:
        wait_for(lambda: launches(marks) == 1, what="the host")
        first = journal.get(TURN)
        renewed = wait_for(lambda: (r := journal.get(TURN)).lease_expires > first.lease_expires + lease and r, what="a renewal")
        assert not orphaned(renewed, clock.now())
        assert journal.take_over(renewed, "thief", clock.now() + timedelta(minutes=5), runner_host="h:1", runner_pid=1) is not None
        thread.join(timeout=30)  # the next renewal finds the claim gone and stops the host
    finally:
        release.write_text("go")
        thread.join(timeout=30)
    assert isinstance(outcome[0], ClaimLost) and "thief" in str(outcome[0])
    record = journal.get(TURN)
    assert record.owner_id == "thief" and record.verdict is None  # the lost runner wrote nothing more


def _catch(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except Exception as exc:  # the test inspects it
        return exc


# -- recovery finds reservations too, and is cheap when there is nothing -----------------------------
def test_a_reservation_without_a_journal_row_is_settled_and_external_reservations_are_left_alone(store) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g", timedelta(hours=1))
    add_automation(store, clock)
    admission = Admission(store, clock)
    admission.reserve(goal="g", agent="a", automation="x", turn_id="old-runner", trigger_time=T0)  # an older floorgate crashed here
    admission.reserve(goal="g", agent="b", automation="ext", turn_id="external", trigger_time=T0)  # floorgate admit for an app
    assert recover(store, clock).settled == []  # within the grace an older runner may still journal it
    clock.advance(timedelta(seconds=31))
    settled = recover(store, clock).settled
    assert [(r.turn_id, r.verdict.stop_reason) for r in settled] == [("old-runner", "orphaned_reservation")]
    assert admission.start("old-runner").phase is Phase.CONFIRMED  # never refunded
    assert admission.start("external").phase is Phase.RESERVED
    assert recover(store, clock).settled == []  # settled once


def test_recovery_with_nothing_pending_is_one_query(store) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g", timedelta(hours=1))
    add_automation(store, clock)
    Admission(store, clock).reserve(goal="g", agent="b", automation="ext", turn_id="external", trigger_time=T0)
    clock.advance(timedelta(hours=1))  # the external reservation is old: still not recovery's to settle
    statements: list[str] = []
    event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    assert recover(store, clock) == Recovered([], [])
    assert [q for q in statements if q != "BEGIN"] == statements[-1:], statements  # one round trip
    if store.dialect == "sqlite":
        with store.read() as conn:
            plan = [row[-1] for row in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statements[-1], (0,))]
        assert not [step for step in plan if step.startswith("SCAN")], plan  # every table through an index


# -- one unit of work, and older data ----------------------------------------------------------------
def test_the_journal_row_commits_with_the_reservation_or_neither_does(store, tmp_path) -> None:
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    automation = add_automation(store, clock)
    if store.dialect == "sqlite":
        raw_sql(store, "CREATE TRIGGER fail_turns BEFORE INSERT ON fg_turns BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    else:
        raw_sql(store, "CREATE FUNCTION fail_turns() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql")
        raw_sql(store, "CREATE TRIGGER fail_turns BEFORE INSERT ON fg_turns FOR EACH ROW EXECUTE FUNCTION fail_turns()")
    runner = TurnExecutor(store, state_dir=tmp_path / "s", clock=clock)
    failed = runner.run(automation, turn_id=TURN)
    assert failed.decision.reason.value == "state_unavailable" and not failed.decision.admitted
    assert Admission(store, clock).start(TURN) is None  # the journal write failed, so no reservation either
    raw_sql(store, "DROP TRIGGER fail_turns" + ("" if store.dialect == "sqlite" else " ON fg_turns"))
    assert runner.run(automation, turn_id=TURN).verdict.status == "succeeded"


def test_the_migration_claims_older_turns_and_never_reruns_one_that_may_have_spawned(db_url: str) -> None:
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.script import ScriptDirectory

    from floorgate.admission import store as store_module

    clock = FixedClock(T0)
    with open_store(db_url) as store:
        floor(store, clock, "g/a", timedelta(hours=1))
        add_automation(store, clock)
        journal, admission = Journal(store, clock), Admission(store, clock)
        for turn_id, confirm in (("legacy-reserved", False), ("legacy-confirmed", True)):
            clock.advance(timedelta(hours=2))
            admission.reserve(goal="g", agent="a", automation="x", turn_id=turn_id, trigger_time=clock.now())
            if confirm:
                admission.confirm(turn_id)  # the old code's crash window: confirmed, then maybe spawned
        script = ScriptDirectory(str(store_module._MIGRATIONS), version_locations=[str(store_module._MIGRATIONS)])
        cfg = Config()
        downgrade = EnvironmentContext(cfg, script, fn=lambda rev, _c: script._downgrade_revs("0005", rev), destination_rev="0005")
        with store.write() as conn, downgrade as env:  # back to 0005, then an older floorgate journals both turns
            env.configure(connection=conn, version_table=store_module._VERSION_TABLE)
            env.run_migrations()
        for turn_id in ("legacy-reserved", "legacy-confirmed"):
            raw_sql(
                store,
                "INSERT INTO fg_turns (turn_id, automation_id, goal_id, agent_id, attempt, kind, runner_host, runner_pid, "
                "started_at_us, deadline_us, phase) VALUES (:t, 'x', 'g', 'a', 1, 'automatic', 'old-machine:77', 77, 0, 5, 'journaled')",
                {"t": turn_id},
            )
    with open_store(db_url) as store:  # upgraded again
        journal = Journal(store, clock)
        reserved, confirmed = journal.get("legacy-reserved"), journal.get("legacy-confirmed")
        assert (reserved.phase, reserved.owner_id) == ("journaled", "old-machine:77:legacy")
        assert confirmed.phase == "confirmed"
        result = recover(store, clock)  # both leases ended at their deadlines
        assert [r.turn_id for r in result.resumable] == ["legacy-reserved"]
        assert [(r.turn_id, r.verdict.stop_reason) for r in result.settled] == [("legacy-confirmed", "unknown_outcome")]


def test_two_hosts_recovering_one_crashed_turn_run_it_once_and_settle_it_once(db_url: str, tmp_path: Path) -> None:
    """Two real `floorgate run` hosts start beside a turn whose runner was SIGKILLed after its
    reservation: both recover it at start, only one claim wins, and it runs and settles once."""
    from helpers import start_host, stop

    marks = tmp_path / "marks"
    setup(db_url, f"open({str(marks)!r}, 'a').write('launch\\n')")
    crash_after_reserve(db_url, tmp_path)
    hosts = [start_host(db_url, tmp_path / f"host{i}") for i in range(2)]
    try:

        def settled():  # type: ignore[no-untyped-def]
            with open_store(db_url) as store:
                record = Journal(store).get(TURN)
            return record if record is not None and record.verdict is not None else None

        record = wait_for(settled, what="the resumed turn's settlement")
        time.sleep(3)  # both hosts have run recovery at start and once more (--poll 1s): nothing else may launch
    finally:
        results = [stop(h) for h in hosts]
    assert [code for code, _ in results] == [0, 0], results
    assert launches(marks) == 1
    assert record.verdict.status == "succeeded"
    with open_store(db_url) as store:
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_turns WHERE turn_id = :t AND phase = 'settled'", {"t": TURN}) == [(1,)]
        assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts WHERE phase = 'reserved'") == [(0,)]


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param((), id="cron-fire"),
        # A manual run bypasses only the interval: the owner's overlap rule still holds.
        pytest.param(("--manual-reason", "owner asked"), id="manual-run"),
    ],
)
def test_a_run_while_a_turn_of_the_automation_runs_is_skipped_as_overlap(db_url: str, tmp_path: Path, extra: tuple[str, ...]) -> None:
    marks, release = tmp_path / "marks", tmp_path / "release"
    setup(db_url, waiting_host(marks, release), floor_for=None)  # no floor: only the overlap rule can skip it
    first = turn_run(db_url, tmp_path / "s1")
    try:
        wait_for(lambda: launches(marks) == 1, what="the first turn's host")
        code, out, err = finish(turn_run(db_url, tmp_path / "s2", *extra))  # another process
        assert code == 3 and "overlap" in out, (out, err)
        assert launches(marks) == 1
    finally:
        release.write_text("go")
    assert finish(first)[0] == 0
