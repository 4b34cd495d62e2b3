"""The ticks that may admit, on their way to a reservation: where a floor or limit applies, one
agent's at a time (``Siblings``; a tick no rule governs goes on at once); reserved by the admitter
threads, agents in turn (``Admitters``), and on SQLite, where the store has one writer, in groups
of one durable commit each (``AdmitGroups``)."""

from __future__ import annotations

import logging
import threading
from collections import deque
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


class Admitters:
    """``workers`` threads reserving queued ticks, never two of one agent at once, agents in turn.

    Every reservation of an agent takes that agent's lock for its whole transaction, so two
    threads on one agent's ticks run one after the other while the other agents wait behind them
    (a burst is queued lane by lane, agent by agent). Here a thread takes the oldest tick of the
    next agent no other thread is reserving for, and the agent goes to the back of the line.

    Contract: ``submit`` queues until ``stop`` (False after: the caller decides it another way);
    ``run`` never raises (the job records its own failures); ``stop`` takes no more and returns
    once every queued tick was reserved. Threads start with the first tick.
    """

    def __init__(self, run: Callable[[Admitting], None], workers: int, name: str = "floorgate-admit") -> None:
        self._run = run
        self._workers = workers
        self._name = name
        self._cond = threading.Condition()
        self._queued: dict[tuple[str, str], deque[Admitting]] = {}  # an agent's ticks not taken yet
        self._ready: deque[tuple[str, str]] = deque()  # agents with queued ticks and no thread on them
        self._busy: set[tuple[str, str]] = set()  # agents a thread is reserving for
        self._threads: list[threading.Thread] = []
        self._stopped = False

    def submit(self, admitting: Admitting) -> bool:
        """Queue it behind its agent's; False once stopped (nothing queued)."""
        key = agent_of(admitting)
        with self._cond:
            if self._stopped:
                return False
            if not self._threads:
                for i in range(self._workers):
                    thread = threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True)
                    thread.start()
                    self._threads.append(thread)
            queued = self._queued.get(key)
            if queued is None:
                queued = self._queued[key] = deque()
                if key not in self._busy:
                    self._ready.append(key)
            queued.append(admitting)
            self._cond.notify()
        return True

    def stop(self) -> None:
        """Take no more; the queued ones are still reserved before this returns."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def _work(self) -> None:
        while True:
            with self._cond:
                while not self._ready and not (self._stopped and not self._queued):
                    self._cond.wait()
                if not self._ready:  # stopped, nothing queued: every agent's ticks were taken
                    return
                key = self._ready.popleft()
                queued = self._queued[key]
                admitting = queued.popleft()
                if not queued:
                    del self._queued[key]
                self._busy.add(key)
            try:
                self._run(admitting)
            except BaseException:  # the job records its own failures; the thread never dies
                log.exception("reserving a tick failed")
            finally:
                with self._cond:
                    self._busy.discard(key)
                    if key in self._queued:  # its next tick waits at the back of the line
                        self._ready.append(key)
                        self._cond.notify()
                    elif self._stopped and not self._queued:
                        self._cond.notify_all()


class Siblings:
    """The ruled ticks that may admit, one agent at a time (a tick no rule governs never waits
    here: nothing a sibling starts changes its decision): while one tick of an agent is being decided
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
