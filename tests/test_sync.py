"""A host's sync reads what changed since its last poll: statements and rows counted at the driver
(never timed), on both backends, for stores of two sizes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from basics import T0
from sqlalchemy import event

from floorgate.admission import Admission, Automations, FixedClock, Store, Tick, TickLog, TimerBindings
from floorgate.hosts import Schedule
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from helpers import add_automation, floor

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
AGENTS = 4
SIZES = (12, 48)


class _CountingCursor:
    def __init__(self, cursor: Any, counts: dict[str, int]) -> None:
        self._cursor = cursor
        self._counts = counts

    def _rows(self, rows: Any) -> Any:
        self._counts["rows"] += len(rows) if isinstance(rows, list) else int(rows is not None)
        return rows

    def fetchone(self) -> Any:
        return self._rows(self._cursor.fetchone())

    def fetchmany(self, *args: Any) -> Any:
        return self._rows(self._cursor.fetchmany(*args))

    def fetchall(self) -> Any:
        return self._rows(self._cursor.fetchall())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextmanager
def counted(store: Store) -> Iterator[dict[str, int]]:
    """Statements sent and rows fetched through the store's engine while the block runs."""
    counts = {"statements": 0, "rows": 0}

    def after(conn, cursor, statement, parameters, context, executemany) -> None:  # type: ignore[no-untyped-def]
        counts["statements"] += 1
        context.cursor = _CountingCursor(cursor, counts)  # what the result fetches from

    event.listen(store.engine, "after_cursor_execute", after)
    try:
        yield counts
    finally:
        event.remove(store.engine, "after_cursor_execute", after)


def _host(store: Store, clock: FixedClock, tmp_path, size: int) -> HostRuntime:  # type: ignore[no-untyped-def]
    """``size`` automations over a few floored agents, each started once and ticked once, and a
    host that has synced once, long enough ago that none of it is a recent change."""
    goal = f"g{size}"
    for i in range(size):
        add_automation(store, clock, automation_id=f"auto-{i:03d}", schedule=EVERY_15M, goal=goal, agent=f"agent-{i % AGENTS}")
    admission = Admission(store, clock)
    for a in range(AGENTS):
        admission.reserve(goal=goal, agent=f"agent-{a}", automation=f"auto-{a:03d}", turn_id=f"seed-{goal}-{a}", trigger_time=T0)
    TickLog(store).append(
        [Tick(automation_id=f"auto-{i:03d}", nominal_at=T0, actual_at=T0, decision="denied", reason="seed", host="h") for i in range(size)]
    )
    clock.advance(timedelta(minutes=30))
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / f"state-{size}"))
    host.sync()
    assert len(host.armed()) == size
    return host


def _sync_counts(store: Store, tmp_path, size: int) -> dict[str, dict[str, int]]:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    host = _host(store, clock, tmp_path, size)
    out = {}
    try:
        clock.advance(timedelta(seconds=2))
        with counted(store) as out["idle"]:
            host.sync()
        automations = Automations(store, clock)
        automations.set_state("auto-001", "paused", note="owner")
        edited = automations.get("auto-002").spec.model_copy(
            update={"schedule": Schedule.parse("DTSTART:20261201T090500Z RRULE:FREQ=HOURLY").canonical()}
        )
        automations.edit("auto-002", edited)
        clock.advance(timedelta(seconds=2))
        with counted(store) as out["two_changed"]:
            host.sync()
        assert "auto-001" not in host.armed() and "auto-002" in host.armed()
        assert host.scheduler.get_job("auto-002").trigger.schedule.recur.freq == "HOURLY"  # re-armed on its new schedule
    finally:
        host.scheduler.remove_all_jobs()
    for i in range(size):  # the next size's host sees its own automations only
        Automations(store, clock).remove(f"auto-{i:03d}")
    return out


def test_a_sync_reads_what_changed_not_every_automation(store: Store, tmp_path, bench_row) -> None:  # type: ignore[no-untyped-def]
    for size in SIZES:  # every floor first: the rules table reads the same for both sizes
        for a in range(AGENTS):
            floor(store, FixedClock(T0), f"g{size}/agent-{a}", timedelta(hours=1))
    small, large = (_sync_counts(store, tmp_path, size) for size in SIZES)
    # Four times the automations: the same statements and the same rows, for an idle poll and
    # for a poll after two automations changed (their rows, their ticks, their lanes' facts).
    assert large == small, (small, large)
    assert small["idle"]["rows"] < 12 and small["two_changed"]["rows"] < 24, small
    assert 0 < small["idle"]["statements"] < small["two_changed"]["statements"], small  # counted, and the change read more
    bench_row(
        f"sync statements (rows), {SIZES[0]} vs {SIZES[1]} automations: idle / 2 changed ({store.dialect})",
        " vs ".join(
            f"{c['idle']['statements']} ({c['idle']['rows']}) / {c['two_changed']['statements']} ({c['two_changed']['rows']})"
            for c in (small, large)
        ),
        "the same for both sizes",
        large == small,
    )


def test_a_poll_finds_the_readbacks_asked_for_and_only_until_they_are_published(store: Store) -> None:
    bindings = TimerBindings(store)
    for aid, timer in (("asked", "apscheduler"), ("quiet", "apscheduler"), ("cron", "crontab")):
        bindings.set_desired(aid, timer, "DTSTART:20261201T090000Z\nRRULE:FREQ=DAILY", False, None, T0)
    bindings.publish_own([("quiet", "apscheduler", None, None, T0)])  # read once, never asked again
    assert bindings.read_requests("apscheduler") == set()
    bindings.request_read("asked", T0 + timedelta(seconds=1))
    bindings.request_read("cron", T0 + timedelta(seconds=1))  # another timer host's to answer
    assert bindings.read_requests("apscheduler") == {"asked"}
    bindings.publish_own([("asked", "apscheduler", None, None, T0 + timedelta(seconds=2))])
    assert bindings.read_requests("apscheduler") == set()
    bindings.request_read("quiet", T0 + timedelta(seconds=3))  # asked after its last readback
    assert bindings.read_requests("apscheduler") == {"quiet"}
