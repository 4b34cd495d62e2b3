"""A worker process for the concurrency tests: reserve in lock-step rounds, report decisions."""

from __future__ import annotations

from datetime import timedelta

from basics import T0

from floorgate.admission import Admission, FixedClock, open_store


def race(url: str, worker: int, rounds: int, floor_s: int, barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = open_store(url)
    clock = FixedClock(T0)
    admission = Admission(store, clock)
    try:
        for r in range(rounds):
            clock.set(T0 + r * timedelta(seconds=floor_s))  # each round is a fresh window
            barrier.wait(timeout=60)
            decision = admission.reserve(
                goal="g",
                agent="a",
                automation=f"x{worker % 2}",
                turn_id=f"w{worker}-r{r}",
                trigger_time=clock.now() + timedelta(microseconds=worker),
            )
            if decision.admitted:
                admission.confirm(decision.turn_id)
            results.put((r, worker, decision.admitted, decision.reason.value))
    finally:
        store.close()


def race_limits(url: str, worker: int, rounds: int, agent: str, barrier, results, step_s: int = 1, known: bool = False) -> None:  # type: ignore[no-untyped-def]
    """Reserve one lane of its own per worker (``agent``'s automation ``x<worker>``), all workers at
    the same instant each round (``step_s`` seconds apart), under the limits or floors set by the
    test; report decisions. ``known``: each worker learns its lane's limits first (a denial's read,
    nothing written), so its first reservation is already the known lane's (on PostgreSQL, guarded
    by its plain read: ``admission._limit_guard``)."""
    store = open_store(url)
    clock = FixedClock(T0)
    admission = Admission(store, clock)
    try:
        if known:
            admission.denial(goal="g", agent=agent, automation=f"x{worker}", turn_id=f"w{worker}-learn", trigger_time=T0)
        for r in range(rounds):
            clock.set(T0 + r * timedelta(seconds=step_s))
            barrier.wait(timeout=60)
            decision = admission.reserve(
                goal="g", agent=agent, automation=f"x{worker}", turn_id=f"w{worker}-r{r}", trigger_time=clock.now()
            )
            results.put((r, worker, decision.admitted, decision.reason.value))
    finally:
        store.close()
