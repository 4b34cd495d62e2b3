"""Crash recovery at host start.

- A journaled attempt whose start was never confirmed never spawned anything: its reservation is
  resumable by its turn id (the anchor stays where it was; nothing is refunded).
- A confirmed attempt that never recorded a pid, or a launched attempt whose process group is gone
  (or that is killed here, because no host supervises it any more), settles as an infra failure of
  unknown outcome. It is not refunded: the floor still counts from its start.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from admission import Admission, Automations, Journal, Missions, NotFound, Phase, Store, TurnRecord, Verdict
from admission.clock import Clock, SystemClock

from ._process import group_alive, kill_group

def _metered(store: Store, automation_id: str) -> bool:
    try:
        return Automations(store).get(automation_id).spec.meter != "none"
    except NotFound:
        return False


def _orphaned(record: TurnRecord) -> bool:
    """True when the runner that journaled the attempt is gone: same machine, dead pid."""
    host, _, pid_text = record.runner_host.rpartition(":")
    if host != socket.gethostname():
        return False  # cannot tell from here; that machine's host recovers it
    pid = int(pid_text) if pid_text.isdigit() else record.runner_pid
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


UNKNOWN = Verdict(status="failed", stop_reason="unknown_outcome", retryable=True, failure_category="infra")


@dataclass(frozen=True)
class Recovered:
    resumable: list[TurnRecord]
    settled: list[TurnRecord]


def recover(store: Store, clock: Clock | None = None, *, automation_ids: set[str] | None = None) -> Recovered:
    """Settle or report every unsettled attempt (of the given automations, or all)."""
    clock = clock if clock is not None else SystemClock()
    journal = Journal(store, clock)
    admission = Admission(store, clock)
    resumable: list[TurnRecord] = []
    settled: list[TurnRecord] = []
    for record in journal.unsettled():
        if automation_ids is not None and record.automation_id not in automation_ids:
            continue
        if not _orphaned(record):
            continue  # another runner (a crontab-launched turn, another host) still owns it
        if record.phase == "journaled":
            start = admission.start(record.turn_id)
            if start is not None and start.phase is Phase.RESERVED:
                resumable.append(record)
                continue
            # Confirmed (or admitted with no floor, so there is no start to ask): the spawn may
            # have happened before the pid was recorded. Unknown, so never rerun.
        elif record.child_pid is not None and group_alive(record.child_pid):
            kill_group(record.child_pid, grace=2.0)
        settled.append(journal.settle(record.turn_id, UNKNOWN))
        if record.mission_id is not None and _metered(store, record.automation_id):
            # What that turn spent was never reconciled: block new dispatch until an owner resolves it.
            Missions(store, clock).set_latch(record.mission_id, f"turn {record.turn_id} ended with an unknown outcome; its usage was never reconciled")
    return Recovered(resumable=resumable, settled=settled)
