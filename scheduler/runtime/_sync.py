"""What a host's last sync read, so that the next one reads only what changed since (``ChangeFeed``).

The runtime keeps one ``SyncMarks``: when it last read the store, the floor rules it saw, which
automations each agent's lane holds (a start in that lane re-plans them), and the jobs APScheduler
dropped meanwhile. ``changed`` answers which automations to re-plan, or None for a full reconcile; a change is
read again for a margin after its stamp, but re-plans once.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import datetime, timedelta

from floorgate.admission.changes import ChangeFeed, Changes
from floorgate.admission.clock import to_us

from ._plan import Decoded, lane_of

FULL_SYNC_EVERY = 30  # incremental syncs between two full ones (a writer's clock far behind, a hand edit)
CHANGE_MARGIN = timedelta(minutes=2)  # changes are looked for this long before the last sync: writers' clocks, open transactions
INCREMENTAL_LIMIT = 500  # more changed automations than this: one bulk read of everything is cheaper


class SyncMarks:
    """The marks of the last sync; ``changed`` reads the store, every other method is bookkeeping."""

    def __init__(self, feed: ChangeFeed) -> None:
        self.feed = feed
        self.mark: datetime | None = None  # when the last sync read the store
        self.rules: frozenset[tuple[str, str, str, int]] | None = None  # the floor rules the last full sync read
        self.partial = 0  # incremental syncs since the last full one
        self.by_agent: dict[tuple[str, str], set[str]] = {}  # (goal, agent) -> its automations' ids
        self._woken: dict[str, int] = {}  # the wake-state stamps read inside the window
        self._started: dict[tuple[str, str], int] = {}  # the latest anchors read inside the window
        self._dropped: set[str] = set()
        self._lock = threading.Lock()

    def read(self, now: datetime) -> Changes:
        """What changed since the last sync (since ``now`` when there was none), a margin earlier."""
        return self.feed.since((self.mark if self.mark is not None else now) - CHANGE_MARGIN)

    def changed(self, changes: Changes, decoded: Mapping[str, Decoded], held: set[str]) -> set[str] | None:
        """The automations whose inputs may have changed since the last sync (with the held ones,
        whose repair by hand stamps nothing), or None to reconcile everything."""
        if self.mark is None or self.rules is None or self.partial >= FULL_SYNC_EVERY:
            return None
        added = sum(1 for aid in changes.revisions if aid not in decoded)
        if changes.rules != self.rules or changes.automations != len(decoded) + added:
            return None  # a floor changed (any lane may move) or an automation was removed
        with self._lock:
            dropped, self._dropped = self._dropped, set()
        ids = {aid for aid, rev in changes.revisions.items() if (d := decoded.get(aid)) is None or d.revision != rev}
        ids |= {aid for aid, at in changes.woken.items() if self._woken.get(aid, -1) < at}
        ids |= dropped | held
        for lane, anchor in changes.started.items():
            if self._started.get(lane, -1) < anchor:
                ids |= self.by_agent.get(lane, set())
        ids = {aid for aid in ids if aid in decoded or aid in changes.revisions}  # not a set of every id: a poll stays O(changes)
        return ids if len(ids) <= INCREMENTAL_LIMIT else None

    def synced(self, now: datetime, changes: Changes, *, full: bool) -> None:
        """A sync that read ``changes`` (before its other reads) at ``now`` succeeded."""
        if full:
            self.rules, self.partial = changes.rules, 0
        else:
            self.partial += 1
        self.mark = now
        # Stamps older than the next read's window are never read again.
        oldest = to_us(now - CHANGE_MARGIN)
        self._woken = {aid: at for aid, at in {**self._woken, **changes.woken}.items() if at >= oldest}
        self._started = {lane: at for lane, at in {**self._started, **changes.started}.items() if at >= oldest}

    def dropped(self, automation_id: str) -> None:
        """APScheduler dropped this job (nothing more to fire, or its trigger failed): look at it."""
        with self._lock:
            self._dropped.add(automation_id)

    def moved(self, automation_id: str, before: Decoded | None, after: Decoded | None) -> None:
        """The automation's decoded row changed from ``before`` to ``after`` (None: gone)."""
        if before is not None and before.automation is not None:
            self.by_agent.get(lane_of(before.automation)[:2], set()).discard(automation_id)
        if after is not None and after.automation is not None:
            self.by_agent.setdefault(lane_of(after.automation)[:2], set()).add(automation_id)
