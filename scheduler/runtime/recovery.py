"""Turn claims and crash recovery, run by every runner (a host at start and periodically, and
``turn run`` for its own automation before it decides).

Orphaned is judged from the claim, never from the journal alone: the claim's lease has expired
(on any machine), or, as a fast path, its owner runs on this machine and its pid is gone.

- An orphaned ``journaled`` attempt never spawned anything: it is resumable by its turn id (the
  runner that resumes it takes the claim over in one compare-and-set; the anchor is unmoved).
- An orphaned ``confirmed`` or ``launched`` attempt may have spawned: the recoverer takes the
  claim over, kills its process group only when that group is provably the turn's (see
  ``may_signal``: the turn's original runner is this machine, and the pid's boot and start time
  still match what was recorded at launch), and settles it as an infra failure of unknown
  outcome. Never rerun, never refunded. Anything less than proof signals nothing.
- A reservation with no journal row (written by an older floorgate, which journaled after
  reserving) whose lane belongs to an automation with a command host and that is older than the
  grace (the lease) is settled as ``orphaned_reservation`` and its start confirmed. A reservation
  on any other lane (``floorgate admit`` for an external launcher) is never touched.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from floorgate.admission import Automations, Journal, Missions, NotFound, Store, StoreUnavailable, TurnRecord, Verdict
from floorgate.admission.clock import Clock, SystemClock, read_clock

from ._process import boot_id, group_starts, kill_group, start_ticks, valid_pid

log = logging.getLogger("floorgate.recovery")

DEFAULT_LEASE = timedelta(seconds=30)
UNKNOWN = Verdict.infra_failure("unknown_outcome")
ORPHANED_RESERVATION = Verdict.infra_failure("orphaned_reservation")
REMOVED = Verdict.denied("automation_removed")


def host_identity() -> str:
    """``hostname:pid`` of this process (shown as the turn's runner)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def new_owner_id() -> str:
    """A claim owner unique to one runner: ``hostname:pid:nonce``."""
    return f"{host_identity()}:{uuid.uuid4().hex[:12]}"


def owner_gone_here(owner_id: str | None) -> bool:
    """True when ``owner_id`` names a process on this machine that no longer exists."""
    host, _, rest = (owner_id or "").partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another machine (or no pid): only its lease can tell
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def orphaned(record: TurnRecord, now: datetime) -> bool:
    """Whether nobody holds ``record``'s claim any more (see the module docstring)."""
    if record.phase == "settled":
        return False
    if record.lease_expires is None or record.lease_expires < now:
        return True
    return owner_gone_here(record.owner_id)


class Signal(StrEnum):
    """Whether recovery may signal a lost turn's process group, and if not, why not."""

    KILL = "kill"
    NO_CHILD = "no child was recorded"
    INVALID_PID = "the recorded pid is not a valid process id"
    OTHER_HOST = "the turn ran on another machine"
    NO_IDENTITY = "the child's boot and start time were not recorded"
    BOOT_UNKNOWN = "this machine's boot id cannot be read"
    OTHER_BOOT = "the child was spawned before a reboot (or under another kernel)"
    GONE = "no process has that pid now (or /proc cannot be read)"
    REUSED = "that pid now belongs to another process"
    KILL_LEFT_BEHIND = "kill what the turn left in its group"
    FOREIGN_GROUP = "its group holds a process older than the turn's child"


def may_signal(
    *,
    phase: str,
    child_pid: int | None,
    ran_on: str,
    child_boot_id: str | None,
    child_start_ticks: int | None,
    this_host: str,
    this_boot_id: str | None,
    live_start_ticks: int | None,
    group_starts: tuple[int, ...] | None = None,
) -> Signal:
    """Decide, from facts alone, whether a lost turn's process group is provably its own.

    ``ran_on``: the turn's runner as it stood before this recoverer took it over (``host:pid``);
    ``live_start_ticks``: the start time /proc reports now for ``child_pid`` (None: no such
    process, or unreadable); ``group_starts``: the start times of the live members of the group
    ``child_pid`` led (None: unreadable). Only ``KILL`` and ``KILL_LEFT_BEHIND`` signal; every
    doubt settles without a kill.

    A group whose leader is gone is still the turn's when it was spawned here in this boot: Linux
    never hands out a pid while a live process group still uses it as its id, so the number cannot
    have been reused unless the turn's whole group died first; a member older than the turn's
    child proves it is another group (the agent a host script started is never older)."""
    if phase != "launched" or child_pid is None:
        return Signal.NO_CHILD
    if not valid_pid(child_pid):
        return Signal.INVALID_PID
    if ran_on.rpartition(":")[0] != this_host:
        return Signal.OTHER_HOST
    if child_boot_id is None or child_start_ticks is None:
        return Signal.NO_IDENTITY
    if this_boot_id is None:
        return Signal.BOOT_UNKNOWN
    if child_boot_id != this_boot_id:
        return Signal.OTHER_BOOT
    if live_start_ticks is not None:
        return Signal.KILL if live_start_ticks == child_start_ticks else Signal.REUSED
    if not group_starts:
        return Signal.GONE
    if min(group_starts) < child_start_ticks:
        return Signal.FOREIGN_GROUP
    return Signal.KILL_LEFT_BEHIND


def signal_check(record: TurnRecord, ran_on: str) -> Signal:
    """``may_signal`` with this machine's facts read now (/proc is read only for a valid pid)."""
    pid = record.child_pid
    return may_signal(
        phase=record.phase,
        child_pid=pid,
        ran_on=ran_on,
        child_boot_id=record.child_boot_id,
        child_start_ticks=record.child_start_ticks,
        this_host=socket.gethostname(),
        this_boot_id=boot_id(),
        live_start_ticks=(live := start_ticks(pid) if pid is not None and valid_pid(pid) else None),
        group_starts=group_starts(pid) if pid is not None and live is None else None,
    )


@dataclass(frozen=True)
class Lost:
    """A lost turn's settlement: the record, whether this call wrote it (``won``: only then were
    wall time and the latch charged), and what was decided about its process group."""

    record: TurnRecord
    won: bool
    signal: Signal


def settle_lost(store: Store, clock: Clock, record: TurnRecord, owner: str, *, ran_on: str) -> Lost:
    """Settle a turn ``owner`` holds that may have spawned: unknown outcome. ``ran_on``: its runner
    before ``owner`` took it over (``take_over`` rewrites ``runner_host``); its process group is
    killed only when ``may_signal`` proves it is the turn's. The settlement is a compare-and-set:
    a turn settled meanwhile is left as it is, and nothing is charged again."""
    check = signal_check(record, ran_on)
    if check in (Signal.KILL, Signal.KILL_LEFT_BEHIND) and record.child_pid is not None:
        if check is Signal.KILL_LEFT_BEHIND:
            log.warning(
                "turn %s of %s: its host process %s was gone; killing what it left in its group",
                record.turn_id,
                record.automation_id,
                record.child_pid,
            )
        kill_group(record.child_pid, grace=2.0)
    elif check not in (Signal.NO_CHILD, Signal.GONE):
        log.warning(
            "turn %s of %s: its recorded process %s was not signalled: %s",
            record.turn_id,
            record.automation_id,
            record.child_pid,
            check.value,
        )
    latch = record.mission_id is not None and _metered(store, record.automation_id)
    # Its run time counts on the mission's wall clock as the longest it can have run (to its
    # deadline or now): unknown is never free.
    ran = min(read_clock(clock), record.deadline) - record.started_at
    with store.unit() as unit:  # the verdict, the mission's wall clock and latch: one commit
        settled = Journal(store, clock).settle_first(record.turn_id, UNKNOWN, owner=owner, unit=unit)
        if settled.won and record.mission_id is not None:
            Missions(store, clock).add_wall(record.mission_id, ran, unit=unit)
            if latch:
                # What that turn spent was never reconciled: block new dispatch until an owner resolves it.
                why = f"turn {record.turn_id} ended with an unknown outcome; its usage was never reconciled"
                Missions(store, clock).set_latch(record.mission_id, why, unit=unit)
    return Lost(settled.record, settled.won, check)


def _metered(store: Store, automation_id: str) -> bool:
    try:
        return Automations(store).get(automation_id).spec.meter != "none"
    except NotFound:
        return False
    except StoreUnavailable:
        return True  # cannot tell: latch, so an owner looks at it


@dataclass(frozen=True)
class Recovered:
    """What one recovery pass found: turns to resume by id, and turns it settled."""

    resumable: list[TurnRecord]
    settled: list[TurnRecord]


def recover(
    store: Store,
    clock: Clock | None = None,
    *,
    automation_ids: set[str] | None = None,
    grace: timedelta = DEFAULT_LEASE,
    owner: str | None = None,
) -> Recovered:
    """Settle or report every orphaned attempt and reservation (of the given automations, or all).

    Cheap when nothing is pending: one indexed query. ``grace``: how old a reservation without a
    journal row must be before it counts as orphaned, and the lease this recoverer holds while it
    settles. ``owner``: the claim identity to settle under (a fresh one by default).
    """
    clock = clock if clock is not None else SystemClock()
    journal = Journal(store, clock)
    now = read_clock(clock)
    if not journal.anything_pending(now - grace):
        return Recovered(resumable=[], settled=[])
    me = owner if owner is not None else new_owner_id()
    runner_host, runner_pid = host_identity(), os.getpid()
    automations = Automations(store, clock)
    resumable: list[TurnRecord] = []
    settled: list[TurnRecord] = []
    records, _unreadable = journal.unsettled_scan()  # an unreadable row holds its automation (the host says so)
    for record in records:
        if automation_ids is not None and record.automation_id not in automation_ids:
            continue
        if not orphaned(record, now):
            continue  # its owner (a crontab-launched turn, another host) still holds the claim
        removed = not _exists(automations, record.automation_id)
        if record.phase == "journaled" and not removed:
            resumable.append(record)  # the runner that resumes it takes the claim over
            continue
        taken = journal.take_over(record, me, now + grace, runner_host=runner_host, runner_pid=runner_pid)
        if taken is None:
            continue  # another recoverer won the claim
        if record.phase == "journaled":
            settled.append(journal.settle(record.turn_id, REMOVED, owner=me))
        else:  # the runner before the takeover: take_over rewrote it to this one
            settled.append(settle_lost(store, clock, taken, me, ran_on=record.runner_host).record)
    for start in journal.orphan_starts(now - grace):
        if automation_ids is not None and start.automation_id not in automation_ids:
            continue
        try:
            spec = automations.get(start.automation_id).spec if start.automation_id else None
        except (NotFound, StoreUnavailable):
            spec = None  # gone, or a row nobody can read: its host holds it; nothing is settled blind
        if spec is None or spec.host is None or (spec.goal_id, spec.agent_id) != (start.goal_id, start.agent_id):
            continue  # an external reservation (floorgate admit): its launcher confirms it
        orphan = journal.settle_orphan_start(start, ORPHANED_RESERVATION, owner=me, runner_host=runner_host, runner_pid=runner_pid)
        if orphan is not None:
            settled.append(orphan)
    return Recovered(resumable=resumable, settled=settled)


def _exists(automations: Automations, automation_id: str) -> bool:
    """Whether the automation's row is there (readable or not: a damaged row is not a removal)."""
    return automations.exists(automation_id)
