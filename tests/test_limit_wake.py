"""A host arms a lane whose count or budget is spent for when it frees, not for each scheduled fire
before then: the full sync's bulk read judges such a lane with its limits, as its decisions do."""

from __future__ import annotations

from datetime import timedelta

from basics import T0
from test_wake import runtime

from floorgate.admission import Admission, FixedClock, Policies, Scope
from floorgate.admission.limits import LimitsChange
from floorgate.admission.windows import parse_window

from helpers import add_automation

EVERY_MINUTE = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY"


def _count(store, clock, scope: Scope, starts: int, per: str) -> None:  # type: ignore[no-untyped-def]
    Policies(store, clock).configure(
        scope, expected_revision=0, owner_ref="t", limits=LimitsChange(max_starts=starts, per=parse_window(per))
    )


def test_a_full_sync_arms_a_spent_count_for_when_it_frees(store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    _count(store, clock, Scope.agent("g", "a"), 2, "1h")
    add_automation(store, clock, schedule=EVERY_MINUTE)
    host = runtime(store, clock, tmp_path)
    host.scheduler.start(paused=True)
    try:
        host.sync()
        for _ in range(2):
            assert host.tick("x").decision == "admitted"
            host.flush()
            clock.advance(timedelta(minutes=1))
        denied = host.tick("x")
        assert (denied.decision, denied.reason) == ("denied", "count_exhausted")
        frees = T0 + timedelta(hours=1)  # the first start leaves the rolling hour
        assert Admission(store, clock).eligibility("g", "a", "x").next_eligible_at == frees
        assert host.scheduler.get_job("x").next_run_time == frees
        host.sync()  # the host's periodic full sync reads every lane in bulk: the same time
        assert host.scheduler.get_job("x").next_run_time == frees
        restarted = runtime(store, clock, tmp_path)  # and a host started now arms it so
        restarted.scheduler.start(paused=True)
        try:
            restarted.sync()
            assert restarted.scheduler.get_job("x").next_run_time == frees
        finally:
            restarted.scheduler.shutdown(wait=False)
    finally:
        host.scheduler.shutdown(wait=False)


def test_the_bulk_read_agrees_with_each_lanes_eligibility(store) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    _count(store, clock, Scope.goal("g"), 1, "day@Europe/Berlin")
    admission = Admission(store, clock)
    assert admission.reserve(goal="g", agent="a", automation="x", turn_id="t1", trigger_time=T0).admitted
    lanes = [("g", "a", "x"), ("g", "b", None), ("h", "a", "x")]
    found = admission.next_eligible_many(lanes)
    assert found == {lane: admission.eligibility(*lane).next_eligible_at for lane in lanes}
    assert found[("g", "a", "x")] is not None and found[("h", "a", "x")] is None
