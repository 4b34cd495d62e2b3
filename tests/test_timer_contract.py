"""The timer-host contract, checked on every registered adapter against its real host: a live
APScheduler ``BackgroundScheduler``, the real ``crontab`` command for a test account, and an
external app whose owner reports what the app armed."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from apscheduler.schedulers.background import BackgroundScheduler
from basics import T0, worker_suffix

from floorgate.admission import AutomationSpec
from floorgate.hosts import Schedule, UnsupportedSchedule
from floorgate.hosts.contract import (
    Applied,
    Capabilities,
    Expressed,
    Feature,
    Guarantee,
    Held,
    Observation,
    ObservationState,
    Reported,
    TimerHost,
    TimerKind,
)
from floorgate.hosts.registry import TIMER_HOSTS, HostSetup, UnknownTimerKind, capabilities, timer_host, timer_kind

CONTRACT_USER = f"fgcron-contract{worker_suffix()}"
ROOT = Path(__file__).resolve().parent.parent
EVERY_15 = "DTSTART:20261101T000500Z RRULE:FREQ=MINUTELY;INTERVAL=15"
OPERATIONS = ("capabilities", "express", "apply", "read", "matches", "remove")

# One schedule per feature, needing that feature and (on a host in UTC) nothing else.
NEEDS = {
    Feature.SUB_MINUTE: "DTSTART:20261101T000030Z RRULE:FREQ=HOURLY",
    Feature.ANY_ZONE: "DTSTART;TZID=Asia/Tokyo:20261101T090000 RRULE:FREQ=DAILY",
    Feature.DST_LOCAL_TIMES: "DTSTART;TZID=Europe/Berlin:20261101T023000 RRULE:FREQ=DAILY",
    Feature.START_DATE: "DTSTART:20270101T000000Z RRULE:FREQ=DAILY",
    Feature.END: "DTSTART:20261101T000000Z RRULE:FREQ=DAILY;COUNT=60",
    Feature.EXDATES: "DTSTART:20261101T000000Z\nRRULE:FREQ=DAILY\nEXDATE:20261210T000000Z",
    Feature.ANY_INTERVAL: "DTSTART:20261101T000000Z RRULE:FREQ=MINUTELY;INTERVAL=90",
    Feature.ONE_SHOT: "DTSTART:20270101T000000Z",
    Feature.POSITIONAL: "DTSTART:20261101T090000Z RRULE:FREQ=MONTHLY;BYDAY=1MO",
}


def test_every_timer_kind_has_an_adapter_implementing_every_operation() -> None:
    assert AutomationSpec.model_fields["timer"].annotation is TimerKind, "the stored spec's timer must be the TimerKind hosts map"
    for kind in TimerKind:
        assert kind in TIMER_HOSTS, f"timer kind {kind} has no adapter in hosts.registry.TIMER_HOSTS"
        adapter = TIMER_HOSTS[kind].adapter
        assert isinstance(adapter.CAPABILITIES, Capabilities)
        missing = [op for op in OPERATIONS if not callable(getattr(adapter, op, None))]
        assert not missing, f"{adapter.__name__} lacks {missing}"
    assert set(TIMER_HOSTS) == set(TimerKind)


def test_an_unknown_kind_is_refused_by_name() -> None:
    with pytest.raises(UnknownTimerKind, match=r"'cron'.*apscheduler, crontab, external"):
        timer_kind("cron")
    assert timer_kind("crontab") is TimerKind.CRONTAB


def test_guarantee_is_computed_from_capabilities_and_reads_as_before() -> None:
    assert [g.value for g in Guarantee] == ["enforced", "pre-model hook", "schedule-only", "not armed"]
    for kind in TimerKind:
        caps = capabilities(kind)
        for hook in (False, True):
            got = Guarantee.of(caps, hook_seen=hook)
            if caps.launches_turns:
                assert got is Guarantee.ENFORCED
            else:
                assert caps.needs_hook_for_guarantee
                assert got is (Guarantee.PRE_MODEL_HOOK if hook else Guarantee.SCHEDULE_ONLY)
    launching = Capabilities(
        can_apply=False,
        can_read_back=False,
        armed_by_runtime=False,
        launches_turns=True,
        floor_aware=False,
        expresses=frozenset(),
        summary="a made-up host that launches turns",
    )
    assert Guarantee.of(launching, hook_seen=False) is Guarantee.ENFORCED  # by capability, not by name


# -- every adapter, against its real host ---------------------------------------------------------


@dataclass
class Harness:
    """An adapter on its real host; ``owner`` plays the owner of a host floorgate cannot read:
    what they report having read from the app (None: they report nothing)."""

    host: TimerHost
    owner: dict[str, str]

    def read(self, automation_id: str) -> Observation | None:
        if self.host.capabilities().can_read_back:
            return self.host.read(automation_id, T0)
        current = self.owner.get(automation_id)
        return self.host.read(automation_id, T0, Reported(current_rrule=current) if current is not None else None)

    def apply(self, automation_id: str, schedule: Schedule) -> Applied:
        applied = self.host.apply(automation_id, schedule, T0)
        if not applied.armed:
            self.owner[automation_id] = applied.host_form  # the owner sets it in the app, exactly
        return applied


def _crontab_account() -> str:
    if shutil.which("crontab") is None:
        pytest.skip("the crontab command is not installed (Debian package 'cron')")
    if os.geteuid() != 0:
        pytest.skip("managing a dedicated test account's crontab needs root")
    if subprocess.run(["id", CONTRACT_USER], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "--system", "--no-create-home", CONTRACT_USER], check=True)
    subprocess.run(["crontab", "-u", CONTRACT_USER, "-r"], capture_output=True)
    return CONTRACT_USER


@pytest.fixture(params=list(TimerKind), ids=str)
def harness(request):  # type: ignore[no-untyped-def]
    kind = request.param
    if kind is TimerKind.APSCHEDULER:
        scheduler = BackgroundScheduler(timezone="UTC")
        scheduler.start()
        request.addfinalizer(lambda: scheduler.shutdown(wait=False))
        setup = HostSetup(scheduler=scheduler, job=lambda automation_id: None)
    elif kind is TimerKind.CRONTAB:
        user = _crontab_account()
        request.addfinalizer(lambda: subprocess.run(["crontab", "-u", user, "-r"], capture_output=True))
        setup = HostSetup(command_for=lambda aid: f"/bin/true {aid}", user=user, zone=ZoneInfo("UTC"))
    else:
        setup = HostSetup()
    return Harness(timer_host(kind, setup), {})


def test_capabilities_are_declared_once_per_adapter(harness: Harness) -> None:
    caps = harness.host.capabilities()
    assert caps is type(harness.host).CAPABILITIES
    assert caps.needs_hook_for_guarantee is (not caps.launches_turns)
    assert not (caps.armed_by_runtime and not caps.can_read_back), "a runtime-armed host publishes its own readback"


def test_apply_then_read_behaves_as_declared(harness: Harness) -> None:
    caps, schedule = harness.host.capabilities(), Schedule.parse(EVERY_15)
    assert isinstance(harness.host.express(schedule, T0), Expressed)
    assert harness.read("q") is None or harness.read("q").state == ObservationState.ABSENT  # type: ignore[union-attr]
    applied = harness.apply("q", schedule)
    assert applied.armed is caps.can_apply
    if not caps.can_apply:
        assert applied.detail, "a host floorgate cannot write must say what the owner has to set"
    observation = harness.read("q")
    assert observation is not None and observation.state == ObservationState.PRESENT and observation.read_at == T0
    assert harness.host.matches(observation, schedule, T0)
    if caps.can_read_back:
        with pytest.raises(ValueError, match="read back from the host itself"):
            harness.host.read("q", T0, Reported(current_rrule=EVERY_15))
    else:
        assert harness.host.read("q", T0) is None  # nothing reported: nothing observed, never the desired state
        gone = harness.host.read("q", T0, Reported(unavailable=True))
        assert gone is not None and gone.state == ObservationState.UNAVAILABLE
    again = harness.apply("q", schedule)  # unchanged: the same host form, still one timer
    assert again.host_form == applied.host_form and harness.host.matches(harness.read("q"), schedule, T0)  # type: ignore[arg-type]


def test_matches_compares_by_meaning(harness: Harness) -> None:
    hourly = Schedule.parse("DTSTART:20261101T000500Z RRULE:FREQ=HOURLY")
    harness.apply("q", hourly)
    observation = harness.read("q")
    assert observation is not None
    same = Schedule.parse("DTSTART:20261101T000500Z RRULE:FREQ=MINUTELY;INTERVAL=60")
    assert same.canonical() != hourly.canonical()
    assert harness.host.matches(observation, same, T0)
    assert not harness.host.matches(observation, Schedule.parse(EVERY_15), T0)
    absent = Observation(state=ObservationState.ABSENT, text=None, read_at=T0)
    assert not harness.host.matches(absent, hourly, T0)


def test_remove_disarms_and_is_idempotent(harness: Harness) -> None:
    harness.apply("q", Schedule.parse(EVERY_15))
    harness.apply("r", Schedule.parse(EVERY_15))
    harness.host.remove("q")
    harness.host.remove("q")
    if harness.host.capabilities().can_read_back:
        assert harness.read("q").state == ObservationState.ABSENT  # type: ignore[union-attr]
        assert harness.read("r").state == ObservationState.PRESENT  # type: ignore[union-attr]


@pytest.mark.parametrize("feature", list(Feature), ids=lambda f: f.name.lower())
def test_express_is_exact_or_held_as_declared(harness: Harness, feature: Feature) -> None:
    schedule = Schedule.parse(NEEDS[feature])
    form = harness.host.express(schedule, T0)
    if feature in harness.host.capabilities().expresses:
        assert isinstance(form, Expressed), form
        harness.apply("q", schedule)
        observation = harness.read("q")
        assert observation is not None and harness.host.matches(observation, schedule, T0)
    else:
        assert isinstance(form, Held) and form.reason, "a schedule the host cannot express is held, never shortened"
        with pytest.raises(UnsupportedSchedule):
            harness.apply("q", schedule)
        observation = harness.read("q")
        assert observation is None or observation.state == ObservationState.ABSENT  # nothing was armed


def test_apscheduler_apply_arms_a_live_job_and_reapply_keeps_its_next_fire() -> None:
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.start()
    try:
        host = timer_host(TimerKind.APSCHEDULER, HostSetup(scheduler=scheduler, job=lambda aid: None))
        schedule = Schedule.parse("DTSTART:20300101T000000Z RRULE:FREQ=DAILY")
        host.apply("q", schedule, T0)
        job = scheduler.get_job("q")
        assert job is not None and job.next_run_time == schedule.occurrences(1)[0]
        host.apply("q", schedule, T0)
        assert scheduler.get_job("q") is job or scheduler.get_job("q").next_run_time == job.next_run_time
        without_job = timer_host(TimerKind.APSCHEDULER, HostSetup(scheduler=scheduler))
        from floorgate.hosts import HostUnavailable

        with pytest.raises(HostUnavailable, match="floorgate run"):
            without_job.apply("r", schedule, T0)
    finally:
        scheduler.shutdown(wait=False)


# -- callers branch on capabilities, never on a kind's name -----------------------------------------

KIND_SWITCH = re.compile(
    r"""(==|!=|\bin\b)\s*\(?\s*["'](apscheduler|crontab|external)["']|["'](apscheduler|crontab|external)["']\s*(==|!=)"""
)
CAPABILITY_CALLERS = [
    "scheduler/app/timers.py",
    "scheduler/cli/commands/timers.py",
    "hosts/contract.py",
    "hosts/registry.py",
    "hosts/apscheduler_timer.py",
    "hosts/crontab.py",
    "hosts/external.py",
    "hosts/flooring.py",
]


@pytest.mark.parametrize("path", CAPABILITY_CALLERS)
def test_no_string_switch_on_timer_kinds(path: str) -> None:
    text = (ROOT / path).read_text()
    hits = [line.strip() for line in text.splitlines() if KIND_SWITCH.search(line)]
    assert not hits, f"{path} compares timer kinds by name; use hosts.registry.capabilities(kind): {hits}"


def test_the_kind_switch_pattern_catches_the_old_forms() -> None:
    for line in ('if spec.timer == "crontab":', "if timer != 'apscheduler':", 'if automation.spec.timer in ("apscheduler", "crontab"):'):
        assert KIND_SWITCH.search(line), line
    assert not KIND_SWITCH.search("kind = TimerKind.CRONTAB")
