"""The ticks that may admit, on their way to a reservation: one agent's at a time (``Siblings``),
and on SQLite, where the store has one writer, reserved in groups of one durable commit each
(``AdmitGroups``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import NamedTuple

from ._tick_inputs import TickInputs
from ._work_queue import WorkQueue

log = logging.getLogger("floorgate.run")


def groupable(admitting: Admitting) -> bool:
    """Whether its ``begin`` can write nothing outside the reservation's transaction (no backoff
    to advance, no mission to read and hold): only then may it join a group."""
    pre = admitting.inputs.pre
    return pre is not None and pre.refusal is None and admitting.inputs.wake.backoff_step == 0


class AdmitGroups:
    """One thread that takes the queued ticks that may admit in groups (of at most ``most``)."""

    def __init__(self, run: Callable[[list[Admitting]], None], first: Callable[[], AbstractContextManager[None]], most: int = 512) -> None:
        self._run = run
        self._first = first  # the store's: a group's reservations go before the turns' writes
        self._most = most
        self._queue: WorkQueue[Admitting] = WorkQueue(self._start)
        self._thread: threading.Thread | None = None

    def submit(self, admitting: Admitting) -> bool:
        """Queue it; False once stopped (the caller decides it another way)."""
        return self._queue.put(admitting)

    def stop(self) -> None:
        """Take no more; the queued ones are still decided before this returns."""
        self._queue.stop(drop=False)
        with self._queue.lock:
            thread = self._thread
        if thread is not None:
            thread.join()

    def _start(self) -> None:  # under the queue's lock
        self._thread = threading.Thread(target=self._work, name="floorgate-admit-group", daemon=True)
        self._thread.start()

    def _work(self) -> None:
        while group := self._queue.take(self._most):
            try:
                with self._first():
                    self._run(group)
            except BaseException:  # the job records its own failures; the thread never dies
                log.exception("reserving a group of ticks failed")


class Siblings:
    """The ticks that may admit, one agent at a time: while one tick of an agent is being decided
    (its reservation queued or running), its siblings on the same agent wait here; once that
    decision is committed they are read again (one plain read each), and those the read now denies
    are denied without taking the write lock. A burst of ten lanes under an agent floor then makes
    one serialized decision per agent, not ten."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, str], list[Admitting]] = {}  # present: one of the agent's is in flight

    def lead_or_wait(self, admitting: Admitting) -> bool:
        """True: no other tick of its agent is in flight, this one leads (decide it now); False:
        it waits for the leader's decision (``take`` hands it back)."""
        key = agent_of(admitting)
        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is None:
                self._waiting[key] = []
                return True
            waiting.append(admitting)
            return False

    def take(self, key: tuple[str, str]) -> list[Admitting]:
        """The leader of ``key`` was decided: the ticks that waited for it (the agent stays in
        flight until ``settle`` finds no more waiting)."""
        with self._lock:
            waiting = self._waiting.get(key, [])
            self._waiting[key] = []
            return waiting

    def lead(self, key: tuple[str, str], rest: list[Admitting]) -> None:
        """A waiter leads now; ``rest`` wait for it (ahead of any that came meanwhile)."""
        with self._lock:
            self._waiting.setdefault(key, [])[:0] = rest

    def settle(self, key: tuple[str, str]) -> bool:
        """No decision of ``key`` in flight any more, unless some tick came meanwhile (False: take again)."""
        with self._lock:
            if self._waiting.get(key):
                return False
            self._waiting.pop(key, None)
            return True


def agent_of(admitting: Admitting) -> tuple[str, str]:
    """The (goal, agent) whose decisions ``Siblings`` orders one at a time."""
    spec = admitting.inputs.automation.spec
    return (spec.goal_id, spec.agent_id or "")


class Admitting(NamedTuple):
    """A claimed tick that the plain read did not deny: ``begin`` decides it."""

    automation_id: str
    nominal: datetime
    fired_at: datetime
    inputs: TickInputs
    turn_id: str
