"""A first-in, first-out queue of jobs for a host's worker threads (turn workers, the admit group).

Contract: ``put`` queues until ``stop``; ``take`` blocks until there is a job or the queue is
stopped, and returns nothing only when it is stopped and empty, so that its worker exits after
the last queued job. The queue starts its workers itself, once, when the first job is put.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class WorkQueue(Generic[T]):
    """Jobs ``put`` in order, ``take``-n by the workers ``start`` starts (called once, under the lock).

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
                self._started = True
                self._start()
            self._jobs.append(job)
            self.lock.notify()
        return True

    def take(self, most: int = 1, taken: Callable[[int], None] | None = None) -> list[T]:
        """Wait for jobs and take at most ``most`` (``taken(count)`` runs under the lock); an empty
        list once stopped with nothing left: the worker returns."""
        with self.lock:
            while not self._jobs and not self.stopped:
                self.lock.wait()
            jobs = [self._jobs.popleft() for _ in range(min(most, len(self._jobs)))]
            if jobs and taken is not None:
                taken(len(jobs))
            return jobs

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
