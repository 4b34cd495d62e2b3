"""``status`` at scale: what a readback of many automations shares between them, so its memory
and time grow with what differs (bench/status.py measures them; here, only what they rest on)."""

from __future__ import annotations

import gc
from datetime import timedelta

import pytest
from basics import T0
from pydantic import ValidationError

from floorgate.admission import FixedClock
from floorgate.hosts import Schedule
from floorgate.scheduler.app.readback import Readback

from helpers import add_automation, floor, host_running

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
NAMES = ("a1", "a2", "a3", "a4", "a5")


def _many(store, host: bool = True):  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    for name in NAMES:
        add_automation(store, clock, name, schedule=EVERY_15M)
    clock.set(T0 + timedelta(minutes=20))
    if host:
        host_running(store, clock)
    return Readback(store, clock)


def test_a_status_of_many_shares_the_models_field_sets_and_repeated_texts(store) -> None:  # type: ignore[no-untyped-def]
    readbacks = _many(store, host=False).overview().readbacks
    assert [rb.automation_id for rb in readbacks] == list(NAMES)
    automations = [rb.automation for rb in readbacks if rb.automation is not None]
    eligibilities = [rb.eligibility for rb in readbacks if rb.eligibility is not None]
    for models in (automations, [a.spec for a in automations], eligibilities, [e.floor for e in eligibilities]):
        assert len(models) == len(NAMES)
        assert len({id(m.__pydantic_fields_set__) for m in models}) == 1, type(models[0]).__name__  # type: ignore[union-attr]
    assert len({id(a.spec.schedule) for a in automations}) == 1  # one string for one schedule text
    assert len({id(a.spec.agent_id) for a in automations}) == 1
    # A detail composed per automation (its floor's, then why nothing fires) is one string for all.
    assert len({id(rb.detail) for rb in readbacks}) == 1 and "no floorgate host is running" in readbacks[0].detail
    # Frozen: a shared set is never added to (an assignment is refused before pydantic records it).
    shared = set(automations[0].__pydantic_fields_set__)
    with pytest.raises(ValidationError):
        automations[0].state_note = "changed"  # type: ignore[misc]
    copied = automations[0].model_copy(update={"state_note": "copied"})
    assert automations[1].__pydantic_fields_set__ == shared and copied.__pydantic_fields_set__ is not shared


def test_automations_sharing_a_schedule_ask_it_once_per_instant(store, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    readback = _many(store)
    alone = {name: readback.automation(name).next_fire_at for name in NAMES}
    asked: list[object] = []
    original = Schedule.next_after

    def counted(self, after):  # type: ignore[no-untyped-def]
        asked.append(after)
        return original(self, after)

    monkeypatch.setattr(Schedule, "next_after", counted)
    readbacks = readback.overview().readbacks
    assert {rb.automation_id: rb.next_fire_at for rb in readbacks} == alone and None not in alone.values()
    # The next fire after now, and the catch-up window's first: once for five automations.
    assert len(asked) == len(set(asked)) <= 2


@pytest.mark.parametrize("enabled", [True, False])
def test_status_pauses_the_collector_and_leaves_it_as_it_found_it(store, monkeypatch, enabled: bool) -> None:  # type: ignore[no-untyped-def]
    readback = _many(store)
    seen: list[bool] = []
    scan = readback.automations.decoded  # the read of every automation

    def spied(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return scan(*args, **kwargs)

    monkeypatch.setattr(readback.automations, "decoded", spied)
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        assert len(readback.overview().readbacks) == len(NAMES)
        assert seen == [False] and gc.isenabled() is enabled

        def broken(*args, **kwargs):  # type: ignore[no-untyped-def]
            raise RuntimeError("boom")

        monkeypatch.setattr(readback.automations, "decoded", broken)
        with pytest.raises(RuntimeError):
            readback.overview()
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


class _Writes:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        self.parts.append(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("size", [3, 20_000])
def test_json_output_is_written_as_encoded_and_is_exactly_what_dumps_writes(size: int) -> None:
    import argparse
    import json

    from floorgate.scheduler.cli.main import Context

    doc = {"automations": [{"automation": f"a{i}", "next": None, "n": i, "tags": ["x", 1.5]} for i in range(size)], "lanes": []}
    out = _Writes()
    Context(argparse.Namespace(json=True), out=out).emit(doc, "unused")
    assert "".join(out.parts) == json.dumps(doc, indent=2, sort_keys=False) + "\n"
    # A small document is one write; a big one is written in pieces, never held whole.
    assert len(out.parts) == 1 if size == 3 else len(out.parts) > 2
