"""What a host keeps per automation once it has armed every timer: one parsed schedule per
distinct schedule text, one set of field names per model class, and no per-job signature building
by APScheduler. Counted and compared by identity (never timed); both backends."""

from __future__ import annotations

import inspect
from datetime import timedelta

from basics import T0

from floorgate.admission import Automations, FixedClock, Store
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.app.wake import BackoffPolicy
from floorgate.scheduler.runtime.host import HostRuntime, RuntimeConfig

from helpers import add_automation, floor

DAILY = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY"
HOURLY = "DTSTART:20261201T090500Z RRULE:FREQ=HOURLY"


def _host(store: Store, tmp_path, size: int = 6) -> HostRuntime:  # type: ignore[no-untyped-def]
    clock = FixedClock(T0)
    floor(store, clock, "g/a", timedelta(hours=1))
    for i in range(size):
        add_automation(store, clock, automation_id=f"auto-{i}", schedule=DAILY if i % 2 else HOURLY)
    clock.advance(timedelta(minutes=5))
    return Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))


def test_a_host_keeps_one_parsed_schedule_and_one_field_name_set_per_kind(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    host = _host(store, tmp_path)
    host.sync()
    try:
        assert len(host.armed()) == 6
        decoded = list(host._decoded.values())
        assert len({id(d.schedule) for d in decoded}) == 2  # two schedule texts, two parsed schedules
        automations = [d.automation for d in decoded if d.automation is not None]
        assert len({id(a.__pydantic_fields_set__) for a in automations}) == 1
        assert len({id(a.spec.__pydantic_fields_set__) for a in automations}) == 1
        assert len({id(a.spec.schedule) for a in automations}) == 2  # the stored texts too
        wakes = [armed.snapshot.inputs.wake for armed in host._armed.values()]
        assert len(wakes) == 6 and len({id(w.__pydantic_fields_set__) for w in wakes}) == 1
        assert {w.automation_id for w in wakes} == {f"auto-{i}" for i in range(6)}  # each its own automation's
    finally:
        host.scheduler.remove_all_jobs()


def test_a_copy_of_a_wake_state_leaves_the_shared_field_names_alone(store: Store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    _host(store, tmp_path, size=2)
    automations = Automations(store)
    first, second = automations.wake_state("auto-0"), automations.wake_state("auto-1")  # no stored row: idle
    assert first.__pydantic_fields_set__ is second.__pydantic_fields_set__
    advanced = BackoffPolicy().advance(first, T0)  # model_copy(update=...), as a host's backoff does
    assert advanced.backoff_step == 1 and advanced.model_fields_set == {"automation_id", "backoff_step", "backoff_wake_at"}
    assert second.model_fields_set == {"automation_id"} and first.model_fields_set == {"automation_id"}
    found, _ = automations.scan()
    assert found["auto-0"] == automations.get("auto-0")  # a strict read decodes the same automation


def test_arming_timers_builds_no_signature_per_job(store: Store, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    host = _host(store, tmp_path)
    built: list[object] = []
    original = inspect._signature_from_function  # type: ignore[attr-defined]

    def counting(*args, **kwargs):  # type: ignore[no-untyped-def]
        built.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(inspect, "_signature_from_function", counting)
    host.sync()
    try:
        assert len(host.armed()) == 6
        assert built == []  # APScheduler checks each job's arguments against a stated signature
        job = host.scheduler.get_job("auto-1")
        assert job.args == ("auto-1",) and job.func is host.ticking.job
    finally:
        host.scheduler.remove_all_jobs()
