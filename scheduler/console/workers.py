"""The console's fixed worker threads: every store call of a request runs on one of them.

The store keeps one dedicated connection per thread that uses its hot path, for the life of the
store; a thread pool that starts and retires threads (the event loop's default one does, and a new
loop per request starts new ones) would take a new connection per new thread until the pool is
exhausted. A fixed set of threads bounds the console's connections to their number.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
THREADS = 4


class Workers:
    """A fixed pool of ``THREADS`` threads that live as long as the app."""

    def __init__(self, threads: int = THREADS) -> None:
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="floorgate-console")

    async def __call__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` on a worker thread and await its result."""
        return await asyncio.get_running_loop().run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Start ``fn(*args, **kwargs)`` on a worker thread; it runs on whether or not anyone awaits it."""
        return self.pool.submit(fn, *args, **kwargs)

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
