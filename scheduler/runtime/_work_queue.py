"""A first-in, first-out queue of jobs for a host's worker threads (turn workers, the admit group).

Contract: ``put`` queues until ``stop``; ``take`` blocks until there is a job or the queue is
stopped, and returns nothing only when it is stopped and empty, so that its worker exits after
the last queued job. The queue starts its workers itself, once, when the first job is put.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class WorkQueue(Generic[T]):
    """Jobs ``put`` in order, ``take``-n by the workers ``start`` starts (under the lock, once it
    has returned: a start that raised is tried again by the next ``put``).

    ``lock`` is the queue's condition: a caller counts its own running jobs under it (``taken``).
    """

    def __init__(self, start: Callable[[], None]) -> None:
        self._start = start
        self._started = False
        self._jobs: deque[T] = deque()
        self.lock = threading.Condition()
        self.stopped = False

    def put(self, job: T) -> bool:
        """Queue ``job``; False once stopped (nothing queued)."""
        with self.lock:
            if self.stopped:
                return False
            if not self._started:
                self._start()  # a start that raises is tried again by the next put
                self._started = True
            self._jobs.append(job)
            self.lock.notify()
        return True

    def take(
        self, most: int = 1, taken: Callable[[int], None] | None = None, *, paused: Callable[[], bool] | None = None, pause_for: float = 0.0
    ) -> list[T]:
        """Wait for jobs and take at most ``most`` (``taken(count)`` runs under the lock); an empty
        list once stopped with nothing left: the worker returns. ``paused`` (read under the lock):
        while it is true, queued jobs wait too, at most ``pause_for`` seconds (woken by ``wake``)."""
        with self.lock:
            until: float | None = None
            while not self.stopped:
                if not self._jobs:
                    self.lock.wait()
                    continue
                if paused is None or not paused():
                    break
                now = time.monotonic()
                until = now + pause_for if until is None else until
                if now >= until:
                    break
                self.lock.wait(until - now)
            jobs = [self._jobs.popleft() for _ in range(min(most, len(self._jobs)))]
            if jobs and taken is not None:
                taken(len(jobs))
            return jobs

    def wake(self) -> None:
        """Wake the workers waiting for a pause to end (it ended)."""
        with self.lock:
            self.lock.notify_all()

    def queued(self) -> list[T]:
        """The jobs not taken yet, oldest first."""
        with self.lock:
            return list(self._jobs)

    def stop(self, *, drop: bool) -> list[T]:
        """Take no more jobs; ``drop``: the queued ones are removed (and returned) instead of
        being left for the workers."""
        with self.lock:
            self.stopped = True
            left = list(self._jobs) if drop else []
            if drop:
                self._jobs.clear()
            self.lock.notify_all()
            return left
