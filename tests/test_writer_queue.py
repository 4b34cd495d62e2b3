"""The SQLite writer queue of one process: a thread marked ``first()`` (a host's admissions) takes
it before the threads that were already waiting without the mark (a turn's bookkeeping)."""

from __future__ import annotations

import threading

from floorgate.admission.store import WriterQueue

from helpers import wait_for


def test_a_marked_writer_goes_before_writers_already_waiting() -> None:
    queue = WriterQueue()
    assert queue.acquire(5)  # held by this thread
    order: list[str] = []
    waiting = threading.Semaphore(0)

    def writer(name: str, marked: bool) -> None:
        def take() -> None:
            waiting.release()
            assert queue.acquire(30)
            order.append(name)
            queue.release()

        if marked:
            with queue.first():
                take()
        else:
            take()

    threads = [threading.Thread(target=writer, args=(f"turn-{i}", False)) for i in range(3)]
    for t in threads:
        t.start()
        waiting.acquire()
    wait_for(lambda: len(queue._cond._waiters) == 3)  # type: ignore[attr-defined]
    admit = threading.Thread(target=writer, args=("admission", True))
    admit.start()
    waiting.acquire()
    wait_for(lambda: queue._urgent == 1)
    queue.release()
    for t in [*threads, admit]:
        t.join(30)
    assert order[0] == "admission" and sorted(order[1:]) == ["turn-0", "turn-1", "turn-2"], order


def test_the_queue_is_reentrant_and_times_out_for_another_thread() -> None:
    queue = WriterQueue()
    assert queue.acquire(1) and queue.acquire(1)  # a nested write on one thread
    other: list[bool] = []
    t = threading.Thread(target=lambda: other.append(queue.acquire(0.05)))
    t.start()
    t.join(10)
    assert other == [False]
    queue.release()
    queue.release()
    t = threading.Thread(target=lambda: other.append(queue.acquire(1)))
    t.start()
    t.join(10)
    assert other == [False, True]
