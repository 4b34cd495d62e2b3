"""``status`` of more automations than a page reads them again by id, a page at a time, in the
order they are shown: the same readbacks, word for word, with at most a page of them decoded at
once (bench/start.py measures the process's memory at 50,000; here, only what that rests on)."""

from __future__ import annotations

import gc
import json

import pytest
from basics import T0

from floorgate.admission import Automation, Automations, FixedClock, Store
from floorgate.scheduler.app import readback as readback_module
from floorgate.scheduler.app.readback import Readback
from floorgate.scheduler.views.present import readback_doc
from floorgate.scheduler.views.present_status import status_text

from helpers import STATUS_NAMES, seed_status


def _pages(monkeypatch) -> list[list[str]]:  # type: ignore[no-untyped-def]
    asked: list[list[str]] = []
    original = Automations.scan

    def spied(self, automation_ids=None, **kw):  # type: ignore[no-untyped-def]
        asked.append(list(automation_ids) if automation_ids is not None else ["*"])
        return original(self, automation_ids, **kw)

    monkeypatch.setattr(Automations, "scan", spied)
    return asked


def test_pages_read_back_the_same_as_one_read_in_the_same_order(store: Store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    seed_status(store, clock, unreadable="c3")
    asked = _pages(monkeypatch)
    whole = Readback(store, clock).overview()
    assert asked == []  # no more than a page: the automations decoded once are read back
    monkeypatch.setattr(readback_module, "_PAGE", 2)
    paged = Readback(store, clock).overview()
    assert asked == [["a1", "a4"], ["b2", "d5"]]  # goal g's, then h's; each by id; the damaged c3 first, never read again
    assert status_text(paged) == status_text(whole)
    assert [json.dumps(readback_doc(rb), default=str) for rb in paged.readbacks] == [
        json.dumps(readback_doc(rb), default=str) for rb in whole.readbacks
    ]
    assert [rb.automation_id for rb in paged.readbacks] == ["c3", "a1", "a4", "b2", "d5"]


def test_at_most_a_page_of_automations_is_decoded_at_once(store: Store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    seed_status(store, clock, unreadable="c3")
    monkeypatch.setattr(readback_module, "_PAGE", 2)
    most = 0
    original = Readback.of
    gc.collect()  # an earlier test's garbage in this worker is not this read's
    before = sum(1 for o in gc.get_objects() if type(o) is Automation)

    def counted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        nonlocal most
        most = max(most, sum(1 for o in gc.get_objects() if type(o) is Automation) - before)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Readback, "of", counted)
    shown = 0
    for _ in Readback(store, clock).overview_stream().readbacks:  # rendered as read: each let go
        shown += 1
    assert shown == len(STATUS_NAMES)
    assert most == 3  # a page, and the one read back last (its readback names it) until the next replaces it


@pytest.mark.parametrize("change", ["removed", "moved"])
def test_an_automation_changed_before_its_page_is_read_is_read_back_as_it_is_then(store: Store, monkeypatch, change: str) -> None:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    seed_status(store, clock, unreadable="c3")
    monkeypatch.setattr(readback_module, "_PAGE", 2)
    readbacks = iter(Readback(store, clock).overview_stream().readbacks)
    assert [next(readbacks).automation_id for _ in range(2)] == ["c3", "a1"]  # the first page is read
    automations = Automations(store, clock)
    if change == "removed":
        automations.remove("d5")
    else:
        automations.edit("d5", automations.get("d5").spec.model_copy(update={"agent_id": "other"}))
    rest = list(readbacks)
    assert [rb.automation_id for rb in rest] == (["a4", "b2"] if change == "removed" else ["a4", "b2", "d5"])
    if change == "moved":
        assert rest[-1].automation is not None and rest[-1].automation.spec.agent_id == "other"
