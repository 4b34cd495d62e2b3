"""The host's turn workers: admitted turns run here, never on the threads that decide ticks.

A tick is decided (envelope precheck, reserve, the denial and its tick record) on APScheduler's
own threads, which never wait for a turn; only an admitted reservation is handed here. A bounded
number of workers run the turns in the order they were admitted. When every worker is busy, the
reservation waits in the queue: it is already durable, journaled under this runner's claim, so
it is never dropped, and its lease is renewed while it waits so that no recoverer (this host's or
another's) takes it over. The anchor is the reservation time, as for any reservation.

While a burst's decisions are being reserved (``hold``, until as many ``release``), the workers
start no new turn, for at most ``HOLD_SECONDS`` each: a turn's bookkeeping would take the store
and the interpreter from the decisions still waiting, and each of them may admit or deny a start
that a waiting turn does not change. Running turns go on.

``stop`` lets the running turns finish and settle, and returns the reservations that never
started: they stay journaled under the claim of a runner that is exiting, so recovery resumes
them (at once on this machine, whose runner pid is then gone; elsewhere once the lease lapses).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ._work_queue import WorkQueue

log = logging.getLogger("floorgate.run")

HOLD_SECONDS = 5.0  # the longest a queued turn waits for the decisions before it (see ``hold``)


class TurnPool:
    """``workers`` threads running submitted turns first in, first out.

    ``renew(turn_ids)`` extends the claims of the turns still waiting; it is called every
    ``renew_every`` seconds while any wait (its failures are logged and retried next time).
    """

    def __init__(self, workers: int, renew: Callable[[list[str]], None], renew_every: float, *, name: str = "floorgate-turn") -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self._workers = workers
        self._renew = renew
        self._renew_every = renew_every
        self._name = name
        self._queue: WorkQueue[tuple[str, Callable[[], None]]] = WorkQueue(self._start)
        self._running = 0  # under the queue's lock
        self._holds = 0  # under the queue's lock: decisions being reserved (``hold``)
        self._halt = threading.Event()  # the renewer's own signal: a notify on the queue is for a worker
        self._threads: list[threading.Thread] = []

    def submit(self, turn_id: str, run: Callable[[], None]) -> bool:
        """Queue ``run`` (the turn ``turn_id``); False once stopped (nothing queued: the caller
        leaves the reservation to recovery)."""
        return self._queue.put((turn_id, run))

    def hold(self) -> None:
        """A decision is being reserved: start no new turn until it is released (bounded)."""
        with self._queue.lock:
            self._holds += 1

    def release(self) -> None:
        """That decision was reserved (or denied); the workers go on once none is held."""
        with self._queue.lock:
            self._holds -= 1
            done = self._holds == 0
        if done:
            self._queue.wake()

    def accepting(self) -> bool:
        """Whether turns may still be submitted (until ``stop``)."""
        with self._queue.lock:
            return not self._queue.stopped

    def running(self) -> int:
        """How many turns the workers are running now."""
        with self._queue.lock:
            return self._running

    def waiting(self) -> list[str]:
        """The turn ids admitted but not started yet, oldest first."""
        return [turn_id for turn_id, _ in self._queue.queued()]

    def stop(self) -> list[str]:
        """Take no more turns, wait for the running ones, and return those never started."""
        left = [turn_id for turn_id, _ in self._queue.stop(drop=True)]
        with self._queue.lock:
            self._halt.set()
            threads = list(self._threads)
        for thread in threads:
            thread.join()
        return left

    def _start(self) -> None:  # under the queue's lock
        for i in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)
        renewer = threading.Thread(target=self._renew_loop, name=f"{self._name}-leases", daemon=True)
        renewer.start()
        self._threads.append(renewer)

    def _held(self) -> bool:  # under the queue's lock
        return self._holds > 0

    def _taken(self, count: int) -> None:  # under the queue's lock
        self._running += count

    def _work(self) -> None:
        # Nothing: stopped, and nothing left that may start.
        while taken := self._queue.take(1, self._taken, paused=self._held, pause_for=HOLD_SECONDS):
            _, run = taken[0]
            try:
                run()
            except BaseException:  # the caller's job records its own failures; a worker never dies
                log.exception("a turn worker's job failed")
            finally:
                with self._queue.lock:
                    self._running -= 1

    def _renew_loop(self) -> None:
        while not self._halt.wait(self._renew_every):
            waiting = self.waiting()
            if waiting:
                try:
                    self._renew(waiting)
                except Exception as exc:
                    log.warning("renewing the claims of %d waiting turns failed, retrying: %s", len(waiting), exc)
