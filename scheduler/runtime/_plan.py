"""What the host's timers are armed with: immutable snapshots, a pure trigger, and the bulk read
that builds the snapshot inputs of every automation at once.

APScheduler calls ``WakeTrigger.get_next_fire_time`` on its main thread while it holds its job-store
lock, so the trigger only does arithmetic on the snapshot it was given; the runtime reads the store
elsewhere and replaces the trigger when the inputs change. Decoding tolerance lives in the
admission-level bulk readers (``Automations.scan``, ``Automations.wake_scan``,
``TickLog.last_nominal_scan``): a row they cannot decode becomes a hold reason for its automation.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from apscheduler.triggers.base import BaseTrigger

from floorgate.admission import Admission, Automation, Debounce, FloorgateError, HostPolicy, PendingTrigger, WakeState, WhenDenied
from floorgate.admission.errors import CorruptState
from floorgate.hosts import Schedule
from floorgate.hosts.schedule import parse_canonical

from ..app.wake import next_wake, trigger_due
from ._webhook_http import AddressRanges


@dataclass(frozen=True, slots=True)
class PlanInputs:
    """The facts a timer is armed from; when any of them changes, the timer is re-planned."""

    revision: int
    wake: WakeState
    next_eligible_at: datetime | None
    trigger: PendingTrigger | None = None  # the triggers no turn has started for yet (one wake)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything the trigger of one automation needs, read beforehand (never inside the trigger)."""

    automation_id: str
    schedule: Schedule
    inputs: PlanInputs
    last_ticked: datetime | None
    catch_up: timedelta
    since: datetime | None  # the automation's last change: no catch-up fire from before it
    when_denied: WhenDenied = WhenDenied.WAIT  # a scheduled fire inside the floor: wait for it, or skip
    debounce: Debounce | None = None  # how pending triggers coalesce into one wake

    @property
    def trigger_at(self) -> datetime | None:
        """When the pending triggers are due (before floors), or None."""
        return trigger_due(self.debounce, self.inputs.trigger)

    def plan(self, previous: datetime | None, now: datetime) -> datetime | None:
        """The next fire time (None: the schedule has ended and no backoff is due)."""
        return next_wake(
            self.schedule,
            previous=previous,
            now=now,
            wake=self.inputs.wake,
            next_eligible_at=self.inputs.next_eligible_at,
            # Catch-up is decided when arming; later fires follow the schedule from ``previous``.
            last_ticked=self.last_ticked if previous is None else None,
            catch_up=self.catch_up,
            since=self.since,
            when_denied=self.when_denied,
            trigger_at=self.trigger_at,
        )


class WakeTrigger(BaseTrigger):
    """A pure APScheduler trigger over one ``Snapshot``: no store, no logging, cannot raise.

    An exception escaping a trigger would kill APScheduler's main loop (no timer would fire again),
    so a failure is kept in ``failure`` and the trigger returns None; APScheduler then drops the
    job, and the runtime's sync holds the automation with that reason.
    """

    __slots__ = ("failure", "snapshot")  # one per armed timer

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.failure: Exception | None = None

    def get_next_fire_time(self, previous_fire_time, now):  # type: ignore[no-untyped-def]
        try:
            return self.snapshot.plan(previous_fire_time, now)
        except Exception as exc:
            self.failure = exc
            return None

    @property
    def schedule(self) -> Schedule:
        """The armed schedule (what the ApschedulerTimer adapter reads back)."""
        return self.snapshot.schedule

    def __str__(self) -> str:  # APScheduler logs it from its main loop: it must not raise either
        try:
            return f"floorgate[{self.snapshot.schedule.canonical()!r}]"
        except Exception:
            return f"floorgate[{self.snapshot.automation_id}]"


@dataclass(frozen=True, slots=True)
class Decoded:
    """One automation as of one revision: usable (with its parsed schedule), or why not."""

    revision: int
    automation: Automation | None
    schedule: Schedule | None
    problem: str | None


def decode(automation: Automation) -> Decoded:
    """Parse the automation's schedule once per revision; an unreadable one becomes a hold reason."""
    try:
        schedule = parse_canonical(automation.spec.schedule)
    except Exception as exc:
        return Decoded(automation.revision, automation, None, f"automation {automation.automation_id!r} has an unreadable schedule: {exc}")
    return Decoded(automation.revision, automation, schedule, None)


def lane_of(automation: Automation) -> tuple[str, str, str]:
    return (automation.spec.goal_id, automation.spec.agent_id, automation.automation_id)


def next_eligible_tolerant(
    admission: Admission, lanes: list[tuple[str, str, str]]
) -> tuple[dict[tuple[str, str, str], datetime | None], dict[tuple[str, str, str], str]]:
    """``Admission.next_eligible_many`` that isolates lanes whose state it cannot compute (an anchor
    near year 9999 overflows the arithmetic) instead of failing every lane."""
    try:
        return dict(admission.next_eligible_many(list(lanes))), {}  # type: ignore[arg-type]
    except CorruptState:
        pass  # some lane's rows are damaged: find which
    except FloorgateError:
        raise  # the store itself failed: the caller retries the whole read
    except (ValueError, TypeError, OverflowError):
        pass
    found: dict[tuple[str, str, str], datetime | None] = {}
    bad: dict[tuple[str, str, str], str] = {}
    for lane in lanes:  # only while some lane is corrupt; one query set per lane
        try:
            found[lane] = admission.next_eligible_many([lane])[lane]  # type: ignore[list-item,index]
        except CorruptState as exc:
            bad[lane] = str(exc)
        except FloorgateError:
            raise
        except (ValueError, TypeError, OverflowError) as exc:
            bad[lane] = f"the floor state of lane {'/'.join(lane)} is malformed in the store: {exc}"
    return found, bad


def next_eligible_each(
    admission: Admission, lanes: list[tuple[str, str, str]]
) -> tuple[dict[tuple[str, str, str], datetime | None], dict[tuple[str, str, str], str]]:
    """``next_eligible_tolerant`` for a few lanes (an incremental sync): one read of each lane's own
    facts, where the bulk read groups every start ever made. A lane admission cannot judge is
    looked at as the bulk read would, so its hold reason reads the same either way."""
    found: dict[tuple[str, str, str], datetime | None] = {}
    bad: dict[tuple[str, str, str], str] = {}
    for lane in lanes:
        eligibility = admission.eligibility(*lane)
        if eligibility.status == "unavailable":
            one, broken = next_eligible_tolerant(admission, [lane])
            found.update(one)
            bad.update(broken)
        else:
            found[lane] = eligibility.next_eligible_at
    return found, bad


class Episode:
    """Logs a recurring failure once per episode: the first error, then silence until it recovers,
    then one 'recovered after N failures' line."""

    def __init__(self, what: str, logger: logging.Logger) -> None:
        self.what = what
        self.log = logger
        self.failures = 0
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            self.failures += 1
            first = self.failures == 1
        if first:
            expected = isinstance(exc, FloorgateError)
            self.log.error("%s failed: %s; retrying (quiet until it recovers)", self.what, exc, exc_info=not expected)

    def ok(self) -> None:
        with self._lock:
            count, self.failures = self.failures, 0
        if count:
            self.log.warning("%s recovered after %d failure%s", self.what, count, "" if count == 1 else "s")


@dataclass(frozen=True)
class RuntimeConfig:
    """How this host process runs; ``recover_every`` is how many polls pass between two
    recoveries of crashed turns. How wakes are planned (catch-up window, backoff) is the
    deployment's host policy, read from the store (``admission.HostPolicies``), so every host
    and every readback plan alike."""

    state_dir: Path
    poll: timedelta = timedelta(seconds=2)
    workers: int = 8
    flush_every: timedelta = timedelta(seconds=1)
    recover_every: int = 5
    envelope_mode: str | None = None  # None: enforce (the executor passes the mode on to hosted hooks)
    webhook_ranges: AddressRanges | None = None  # an AddressRanges the notify loop delivers within; None: any address


# A fire a running host starts this late is stale: recorded ``skipped missed``, never run. Live
# lateness below it (a busy host, a slow store) is not a missed fire, whatever the catch-up window:
# catch-up is about fires due while no host was running, decided when a host arms its timers.
STALE_AFTER = timedelta(minutes=15)


def misfire_grace(policy: HostPolicy) -> int:
    """APScheduler's misfire grace: only a fire later than ``STALE_AFTER`` is dropped as missed
    (its own default of 1 s, or a catch-up window of 0, would drop runs a busy host starts a
    moment late). ``policy`` is the deployment's; the limit does not depend on it."""
    del policy
    return int(STALE_AFTER.total_seconds())


@dataclass(frozen=True, slots=True)
class Armed:
    """What a timer was last armed with. ``trigger`` None: nothing left to fire (schedule ended).
    ``trigger_at`` is the snapshot's, worked out once when armed (every tick reads it)."""

    snapshot: Snapshot
    trigger: WakeTrigger | None
    seq: int
    trigger_at: datetime | None = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "trigger_at", self.snapshot.trigger_at)
