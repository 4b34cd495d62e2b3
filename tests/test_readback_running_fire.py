"""A fire whose start is admitted is taken, whether or not its host has written the tick yet (a
host writes its ticks in batches): the readback's next fire is the one after it, never the fire
being run, shown as due '0 s ago'."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from floorgate.admission import Admission, FixedClock, Store
from floorgate.scheduler.app.readback import Readback, ReadbackState

from helpers import add_automation, floor, host_running, journal_entry

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=timezone.utc)
EVERY_MINUTE = "DTSTART:20261201T080000Z RRULE:FREQ=MINUTELY"


@pytest.mark.parametrize(
    ("running", "floored", "state"),
    [(True, False, ReadbackState.RUNNING), (False, True, ReadbackState.ELIGIBLE)],
    ids=["its-turn-running", "its-turn-ended-under-a-floor"],
)
def test_the_fire_just_taken_is_not_the_next_fire(store: Store, running: bool, floored: bool, state: ReadbackState) -> None:
    clock = FixedClock(T0 - timedelta(hours=1))
    add_automation(store, clock, schedule=EVERY_MINUTE)
    if floored:
        floor(store, clock, "g/a", timedelta(seconds=20))
    clock.set(T0 + timedelta(milliseconds=200))  # the 09:00 fire, taken a moment late
    journal = journal_entry("t1", clock.now()) if running else None
    d = Admission(store, clock).reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0, journal=journal)
    assert d.admitted
    clock.set(T0 + timedelta(seconds=30))  # its host has not written the tick yet
    host_running(store, clock)
    rb = Readback(store, clock).automation("x")
    assert rb.state is state, rb.detail
    assert rb.next_fire_at == T0 + timedelta(minutes=1), rb.next_fire_at
