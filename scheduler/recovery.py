"""Turn claims and crash recovery, run by every runner (a host at start and periodically, and
``turn run`` for its own automation before it decides).

Orphaned is judged from the claim, never from the journal alone: the claim's lease has expired
(on any machine), or, as a fast path, its owner runs on this machine and its pid is gone.

- An orphaned ``journaled`` attempt never spawned anything: it is resumable by its turn id (the
  runner that resumes it takes the claim over in one compare-and-set; the anchor is unmoved).
- An orphaned ``confirmed`` or ``launched`` attempt may have spawned: the recoverer takes the
  claim over, kills its process group if it is still alive here, and settles it as an infra
  failure of unknown outcome. Never rerun, never refunded.
- A reservation with no journal row (written by an older floorgate, which journaled after
  reserving) whose lane belongs to an automation with a command host and that is older than the
  grace (the lease) is settled as ``orphaned_reservation`` and its start confirmed. A reservation
  on any other lane (``floorgate admit`` for an external launcher) is never touched.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from admission import Automations, Journal, Missions, NotFound, Store, StoreUnavailable, TurnRecord, Verdict
from admission.clock import Clock, SystemClock, read_clock

from ._process import group_alive, kill_group

DEFAULT_LEASE = timedelta(seconds=30)
UNKNOWN = Verdict(status="failed", stop_reason="unknown_outcome", retryable=True, failure_category="infra")
ORPHANED_RESERVATION = Verdict(status="failed", stop_reason="orphaned_reservation", retryable=True, failure_category="infra")
REMOVED = Verdict(status="denied", stop_reason="automation_removed", retryable=False, failure_category="policy")


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


def settle_lost(store: Store, clock: Clock, record: TurnRecord, owner: str) -> TurnRecord:
    """Settle a turn ``owner`` has taken over that may have spawned: unknown outcome."""
    if record.child_pid is not None and record.phase == "launched" and _here(record) and group_alive(record.child_pid):
        kill_group(record.child_pid, grace=2.0)
    latch = record.mission_id is not None and _metered(store, record.automation_id)
    # Its run time counts on the mission's wall clock as the longest it can have run (to its
    # deadline or now): unknown is never free.
    ran = min(read_clock(clock), record.deadline) - record.started_at
    with store.unit() as unit:  # the verdict, the mission's wall clock and latch: one commit
        settled = Journal(store, clock).settle(record.turn_id, UNKNOWN, owner=owner, within=unit)
        if record.mission_id is not None:
            Missions(store, clock).add_wall(record.mission_id, ran, within=unit)
        if latch and record.mission_id is not None:
            # What that turn spent was never reconciled: block new dispatch until an owner resolves it.
            why = f"turn {record.turn_id} ended with an unknown outcome; its usage was never reconciled"
            Missions(store, clock).set_latch(record.mission_id, why, within=unit)
    return settled


def _here(record: TurnRecord) -> bool:
    return record.runner_host.rpartition(":")[0] == socket.gethostname()


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
        else:
            settled.append(settle_lost(store, clock, taken, me))
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
