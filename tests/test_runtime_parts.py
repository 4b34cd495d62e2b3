"""The host runtime's collaborators on their own: the work queue its turn workers and admit group
take from, the tick records, and the tick path re-planning through the timers it is given."""

from __future__ import annotations

import threading
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from basics import T0

from floorgate.admission import FixedClock, Store, TickLog
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime._admit_queue import Admitters, Admitting
from floorgate.scheduler.runtime._plan import PlanInputs
from floorgate.scheduler.runtime._tick_log import TickRecords
from floorgate.scheduler.runtime._ticking import Ticking
from floorgate.scheduler.runtime._turn_pool import TurnPool
from floorgate.scheduler.runtime._work_queue import WorkQueue
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from helpers import add_automation, floor

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"


@pytest.mark.parametrize(
    ("drop", "returned", "left_for_workers"),
    [
        pytest.param(False, [], ["a", "b"], id="stop-keeps-queued-jobs-for-the-workers"),
        pytest.param(True, ["a", "b"], [], id="stop-drops-and-returns-queued-jobs"),
    ],
)
def test_a_stopped_work_queue_takes_no_more_and_hands_out_what_is_left(
    drop: bool, returned: list[str], left_for_workers: list[str]
) -> None:
    starts: list[int] = []
    queue: WorkQueue[str] = WorkQueue(lambda: starts.append(1))
    assert queue.put("a") and queue.put("b")
    assert queue.stop(drop=drop) == returned
    assert not queue.put("c")  # refused once stopped
    assert queue.take(5) == left_for_workers
    assert queue.take(5) == []  # stopped and empty: the worker returns instead of waiting
    assert starts == [1]  # the workers were started once, at the first job


def test_a_work_queue_take_waits_for_a_job_and_counts_it_under_the_lock() -> None:
    queue: WorkQueue[str] = WorkQueue(lambda: None)
    counted: list[int] = []
    got: list[list[str]] = []
    worker = threading.Thread(target=lambda: got.append(queue.take(2, counted.append)))
    worker.start()
    queue.put("a")
    worker.join(timeout=10)
    assert got == [["a"]] and counted == [1]


def test_tick_records_know_the_latest_tick_buffered_or_stored(store: Store) -> None:
    records = TickRecords("h1", TickLog(store))
    assert records.last_ticked("x") is None
    records.record("x", T0 + timedelta(hours=1), T0, "denied", "interval_wait")
    records.merge({"x": T0})  # an older time never lowers what is known
    assert records.last_ticked("x") == T0 + timedelta(hours=1)
    records.flush()
    assert records.buffered() == []
    fresh = TickRecords("h2", TickLog(store))  # another host: only what is stored
    fresh.refresh(["x"])
    assert fresh.last_ticked("x") == T0 + timedelta(hours=1) and fresh.problem("x") is None


def test_tick_records_that_cannot_be_written_stay_buffered(store: Store) -> None:
    class Down(TickLog):
        def append(self, ticks: Any) -> None:
            raise OSError("the store is down")

    records = TickRecords("h1", Down(store))
    records.record("x", T0, T0, "skipped", "overlap")
    with pytest.raises(OSError):
        records.flush()
    assert [(t.automation_id, t.reason) for t in records.buffered()] == [("x", "overlap")]
    assert records.last_ticked("x") == T0


class _Plans:
    """A ``TimerPlans`` that keeps what the tick path asked of it."""

    def __init__(self, host: HostRuntime) -> None:
        self.host = host
        self.asked: list[tuple[str, PlanInputs | None]] = []

    def replan_after_tick(self, automation_id: str, inputs: PlanInputs | None = None, *, turn_ended: bool = False) -> None:
        self.asked.append((automation_id, inputs))

    def backoff(self) -> Any:
        return self.host.backoff()


def test_a_denied_tick_re_plans_its_timer_from_the_decision_through_the_timers_it_was_given(store: Store, tmp_path: Path) -> None:
    """The tick path reaches the host's timers only through ``TimerPlans``: a denial hands them the
    lane's next eligible time as the decision said it (no read of the store to re-plan)."""
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    add_automation(store, clock, schedule=EVERY_15M)
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    assert not isinstance(host, Ticking) and not isinstance(host, TickRecords)  # collaborators, not mixins
    host.sync()
    plans = _Plans(host)
    host.ticking.plans = plans
    assert host.tick("x").decision == "admitted"
    clock.advance(timedelta(minutes=15))
    plans.asked.clear()
    tick = host.tick("x")
    assert (tick.decision, tick.reason) == ("denied", "interval_wait")
    [(automation_id, inputs)] = plans.asked
    assert automation_id == "x" and inputs is not None
    assert inputs.next_eligible_at == T0 + timedelta(hours=1)


def test_a_timer_whose_trigger_cannot_be_computed_is_armed_as_failed_and_its_due_time_does_not_raise_again() -> None:
    """A pending trigger near the calendar's end makes its debounced due time overflow: the timer
    keeps the failure (the host holds that automation) and arming it never raises the same error,
    which would end the whole sync pass for every automation after it."""
    from datetime import datetime, timezone

    from floorgate.admission.automations import Debounce, WakeState
    from floorgate.admission.triggers import PendingTrigger
    from floorgate.hosts import Schedule
    from floorgate.scheduler.runtime._plan import Armed, Snapshot, WakeTrigger

    late = datetime(9999, 12, 31, 23, tzinfo=timezone.utc)
    inputs = PlanInputs(revision=1, wake=WakeState(automation_id="x"), next_eligible_at=None, trigger=PendingTrigger(late, late, 1))
    snapshot = Snapshot("x", Schedule.parse(EVERY_15M), inputs, None, timedelta(0), None, debounce=Debounce(quiet=timedelta(hours=2)))
    trigger = WakeTrigger(snapshot)
    assert trigger.get_next_fire_time(None, T0) is None
    assert isinstance(trigger.failure, OverflowError)
    armed = Armed(snapshot, trigger, 1)
    assert armed.trigger_at is None


def test_a_worker_start_that_fails_is_tried_again_by_the_next_put() -> None:
    """A queue whose workers could not start (no thread left) must not accept jobs no worker takes."""
    calls: list[int] = []

    def start() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("can't start new thread")

    queue: WorkQueue[str] = WorkQueue(start)
    with pytest.raises(RuntimeError):
        queue.put("a")
    assert queue.put("b") is True
    assert calls == [1, 1]


def _admitting(agent: str, lane: str) -> Any:
    """A tick that may admit, with only what ``Admitters`` reads of it (its agent)."""
    spec = SimpleNamespace(goal_id="g", agent_id=agent)
    return Admitting(lane, T0, T0, SimpleNamespace(automation=SimpleNamespace(spec=spec)), f"{lane}-turn")  # type: ignore[arg-type]


def test_admitters_never_take_two_ticks_of_one_agent_at_once_and_take_agents_in_turn() -> None:
    """Two threads, a burst queued agent by agent (a1, a2 of agent A, then b1): the second thread
    takes agent B's tick, not A's second one, which would only wait for the first one's lock."""
    started: list[str] = []
    both = threading.Barrier(2, timeout=10)
    seen = threading.Condition()

    def run(admitting: Any) -> None:
        with seen:
            started.append(admitting.automation_id)
            seen.notify_all()
        if admitting.automation_id in ("a1", "b1"):
            both.wait()  # each holds its thread until the other one started

    admitters = Admitters(run, workers=2)
    for lane, agent in (("a1", "A"), ("a2", "A"), ("b1", "B")):
        assert admitters.submit(_admitting(agent, lane))
    admitters.stop()  # every queued tick is still reserved before it returns
    assert sorted(started[:2]) == ["a1", "b1"] and started[2] == "a2"
    assert not admitters.submit(_admitting("A", "a3"))  # refused once stopped


def test_queued_turns_wait_for_the_decisions_held_and_start_once_released() -> None:
    """While a decision is held, a submitted turn waits in the queue (its worker is seen waiting
    on the hold), and starts once the last hold is released."""
    pool = TurnPool(1, lambda ids: None, renew_every=60)
    waiting_on_hold = threading.Event()
    held = pool._held

    def observed() -> bool:
        answer = held()
        if answer:
            waiting_on_hold.set()
        return answer

    pool._held = observed  # type: ignore[method-assign]
    ran = threading.Event()
    try:
        pool.hold()
        pool.hold()
        assert pool.submit("t1", ran.set)
        assert waiting_on_hold.wait(10), "the worker never waited for the held decisions"
        assert not ran.is_set() and pool.waiting() == ["t1"]
        pool.release()
        pool.release()
        assert ran.wait(10), "the turn never started once released"
    finally:
        pool.stop()
