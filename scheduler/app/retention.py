"""``floorgate prune`` and the host's retention pass: the store's prune batches plus the turn logs
of the turns they delete, with sizes before and after.

The store decides what may go (``floorgate.admission.retention``); this module removes the log
files of deleted turns, only below ``STATE_DIR/logs`` and never through a link, after the batch
that deleted their rows committed (a log left by a kill is only an unreferenced file).
"""

from __future__ import annotations

import contextlib
import os
import stat
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from floorgate.admission import Store
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.retention import DEFAULT_BATCH, Kept, Retention, Sizes

from ..agents._safe_files import UnsafePath, directory


@dataclass(frozen=True)
class Footprint:
    """Row counts and the bytes of the turn logs under the state directory."""

    rows: Sizes
    log_files: int
    log_bytes: int


@dataclass(frozen=True)
class PruneReport:
    """What a prune did (or, dry, would do): per kind how many go, and the sizes around it."""

    cutoff: datetime
    dry_run: bool
    before: Footprint
    after: Footprint  # equal to ``before`` on a dry run
    deleted: dict[Kept, int]
    logs_deleted: int
    log_bytes_deleted: int
    batches: int
    complete: bool  # False: the batch budget ran out with more to prune (the next pass goes on)


_NOTHING = Footprint(Sizes(0, 0, 0, 0, 0), 0, 0)


class PruneService:
    """Prune a store and its turn logs older than a limit, in small batches."""

    def __init__(self, store: Store, clock: Clock, state_dir: Path) -> None:
        self.retention = Retention(store, clock)
        self.clock = clock
        self.state_dir = state_dir

    def prune(
        self, older_than: timedelta, *, dry_run: bool, batch: int = DEFAULT_BATCH, max_batches: int | None = None, sizes: bool = True
    ) -> PruneReport:
        """Prune (or count, ``dry_run``) everything older than ``older_than``. ``max_batches``: stop
        after that many committed batches (a host's pass), None: until nothing is left.
        ``sizes``: measure the footprint before and after (a host's pass skips it: zeros)."""
        cutoff = self.retention.cutoff(older_than)
        before = self.footprint() if sizes else _NOTHING
        if dry_run:
            counts = self.retention.prunable(cutoff)
            logs = [self._log_size(p) for p in self.retention.prunable_logs(cutoff)]
            found = [n for n in logs if n is not None]
            return PruneReport(cutoff, True, before, before, counts, len(found), sum(found), 0, True)
        deleted = dict.fromkeys(Kept, 0)
        removed_files = removed_bytes = batches = 0
        complete = True
        for kind in Kept:
            while True:
                if max_batches is not None and batches >= max_batches:
                    complete = False
                    break
                done = self.retention.prune_batch(kind, cutoff, batch)
                if done.deleted == 0:
                    break
                batches += 1
                deleted[kind] += done.deleted
                for path in done.log_paths:
                    size = self._log_size(path, unlink=True)
                    if size is not None:
                        removed_files, removed_bytes = removed_files + 1, removed_bytes + size
                if done.deleted < batch:
                    break
            if not complete:
                break
        return PruneReport(
            cutoff, False, before, self.footprint() if sizes else _NOTHING, deleted, removed_files, removed_bytes, batches, complete
        )

    def footprint(self) -> Footprint:
        """Row counts now, and the turn logs' files and bytes (links are not followed or counted)."""
        files = size = 0
        for root, dirs, names in os.walk(self.state_dir / "logs", followlinks=False):
            for name in names:
                with contextlib.suppress(OSError):
                    st = os.stat(os.path.join(root, name), follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode):
                        files, size = files + 1, size + st.st_size
            dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
        return Footprint(self.retention.sizes(), files, size)

    def _where(self, log_path: str) -> tuple[tuple[str, ...], str] | None:
        """``(directories below the state dir, file name)`` of a turn log inside ``STATE_DIR/logs``,
        None for a path anywhere else (never touched)."""
        logs = os.path.abspath(self.state_dir / "logs")
        path = os.path.abspath(log_path)
        if os.path.commonpath([logs, path]) != logs or path == logs:
            return None
        parts = Path(os.path.relpath(path, os.path.abspath(self.state_dir))).parts
        return (tuple(parts[:-1]), parts[-1]) if len(parts) >= 3 else None

    def _log_size(self, log_path: str, *, unlink: bool = False) -> int | None:
        """The size of one turn log (a regular file inside ``STATE_DIR/logs``, reached without
        links), removing it with ``unlink``; None when there is no such file there."""
        where = self._where(log_path)
        if where is None:
            return None
        try:
            with directory(self.state_dir, where[0], "state_dir", create=False, check=False) as fd:
                if fd is None:
                    return None
                st = os.stat(where[1], dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    return None
                if unlink:
                    os.unlink(where[1], dir_fd=fd)
                return st.st_size
        except (OSError, UnsafePath):
            return None


class HostPruner:
    """A running host's retention: when the host policy sets ``retention``, a few small batches
    per call (from the recovery loop, never from a tick or under a scheduler's lock); once a pass
    finds nothing more, the next waits ``REST``."""

    REST = timedelta(hours=1)
    BATCH = 200
    BATCHES_PER_CALL = 5

    def __init__(self, service: PruneService, clock: Clock) -> None:
        self.service = service
        self.clock = clock
        self._rest_until: datetime | None = None

    def step(self, retention: timedelta) -> PruneReport | None:
        """One call's worth of pruning (None: retention is off, or resting after a complete pass)."""
        now = read_clock(self.clock)
        if not retention or (self._rest_until is not None and now < self._rest_until):
            return None
        report = self.service.prune(retention, dry_run=False, batch=self.BATCH, max_batches=self.BATCHES_PER_CALL, sizes=False)
        if report.complete:
            self._rest_until = now + self.REST
        return report
