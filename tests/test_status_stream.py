"""``floorgate status`` renders as it reads: it never holds every automation's readback at once
(bench/start.py measures the process's memory at 50,000; here, only what that rests on)."""

from __future__ import annotations

import gc
import io
import json

import pytest
from basics import T0

from floorgate.admission import Admission, FixedClock, Store
from floorgate.scheduler.app import _readback_reads as readback_module
from floorgate.scheduler.app.readback import AutomationReadback, Readback
from floorgate.scheduler.cli.main import run
from floorgate.scheduler.views.present_status import status_lines, status_text

from helpers import STATUS_NAMES, seed_status


@pytest.mark.parametrize("json_out", [False, True], ids=["text", "json"])
def test_status_holds_one_readback_at_a_time(store: Store, db_url: str, monkeypatch, json_out: bool) -> None:  # type: ignore[no-untyped-def]
    seed_status(store, FixedClock(T0))
    seen = {"made": 0, "most_alive": 0}
    original = Readback.of

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        # How many readbacks made before this one are still held by anything.
        alive = sum(1 for o in gc.get_objects() if type(o) is AutomationReadback)
        seen["most_alive"] = max(seen["most_alive"], alive)
        seen["made"] += 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Readback, "of", counted)
    out = io.StringIO()
    assert run(["status", "--db", db_url, *(["--json"] if json_out else [])], out=out) == 0
    assert seen["made"] == len(STATUS_NAMES)
    assert seen["most_alive"] <= 1  # the one rendered last, until the next replaces it
    if json_out:
        assert sorted(a["automation"] for a in json.loads(out.getvalue())["automations"]) == sorted(STATUS_NAMES)
    else:
        assert all(name in out.getvalue() for name in STATUS_NAMES)


def test_the_stream_is_the_overview_in_the_same_order_unreadable_rows_first(store: Store) -> None:
    clock = FixedClock(T0)
    seed_status(store, clock, unreadable="c3")
    readback = Readback(store, clock)
    listed = readback.overview()
    streamed = readback.overview_stream()
    assert [rb.automation_id for rb in streamed.readbacks] == [rb.automation_id for rb in listed.readbacks]
    assert listed.readbacks[0].automation_id == "c3"  # its goal is unknown: sorted as ""
    assert status_text(listed) == "\n".join(status_lines(readback.overview_stream()))


def test_eligibility_is_read_in_parts_of_the_lanes_in_the_order_they_are_shown(store: Store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    seed_status(store, clock)
    whole = {rb.automation_id: rb.eligibility for rb in Readback(store, clock).overview().readbacks}
    asked: list[list[str]] = []
    original = Admission.eligibility_many

    def spied(self, lanes, **kw):  # type: ignore[no-untyped-def]
        asked.append([lane[2] for lane in lanes])
        return original(self, lanes, **kw)

    monkeypatch.setattr(readback_module, "_ELIGIBILITY_PART", 2)
    monkeypatch.setattr(Admission, "eligibility_many", spied)
    parted = {rb.automation_id: rb.eligibility for rb in Readback(store, clock).overview().readbacks}
    assert asked == [["a1", "a4"], ["b2", "c3"], ["d5"]]  # goal g's, then h's; each by id
    assert {k: v.model_dump(exclude={"evaluated_at"}) for k, v in parted.items() if v} == {
        k: v.model_dump(exclude={"evaluated_at"}) for k, v in whole.items() if v
    }
