"""The host's tick records: ticks are buffered as they are decided and written in one transaction
per flush (a store outage keeps them buffered, up to a bound), and what each automation last
ticked (stored or buffered) is what a re-plan catches up from."""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from floorgate.admission import Tick, TickLog

log = logging.getLogger("floorgate.run")

MAX_BUFFERED_TICKS = 100_000  # while the store is down; beyond this the oldest ticks are dropped


class TickRecords:
    """The ticks of one host (``host``), buffered for its tick log.

    Contract: ``record`` never touches the store (any thread, under a short lock of its own);
    ``flush`` writes every buffered tick in one transaction, or keeps them all buffered and
    raises; ``last_ticked`` is the latest nominal time known for an automation, buffered or
    stored (as read by ``refresh``/``load`` or written by ``flush``), never older than one it
    answered before. ``problem`` names an automation whose stored ticks could not be read.
    """

    def __init__(self, host: str, ticklog: TickLog) -> None:
        self.host = host
        self.ticklog = ticklog
        self._lock = threading.Lock()
        self._buffer: list[Tick] = []
        self._buffered: dict[str, datetime] = {}  # automation id -> latest nominal time in _buffer
        self._dropped = 0
        self._ticked: dict[str, datetime] = {}  # automation id -> latest nominal time stored
        self._bad: dict[str, str] = {}  # automation id -> why its stored ticks do not read

    def record(
        self, automation_id: str, nominal: datetime, actual: datetime, decision: str, reason: str, turn_id: str | None = None
    ) -> Tick:
        """Buffer one tick (written by the next ``flush``) and log it."""
        tick = Tick(
            automation_id=automation_id,
            nominal_at=nominal,
            actual_at=actual,
            decision=decision,  # type: ignore[arg-type]
            reason=reason,
            turn_id=turn_id,
            host=self.host,
        )
        with self._lock:
            self._buffer.append(tick)
            known = self._buffered.get(automation_id)
            if known is None or nominal > known:
                self._buffered[automation_id] = nominal
            if len(self._buffer) > MAX_BUFFERED_TICKS:
                del self._buffer[0]
                self._dropped += 1
        if decision in ("denied", "skipped"):  # a burst's worth of lines at info cost it a fifth of its time
            log.debug("decided %s (due %s): %s %s %s", automation_id, nominal.isoformat(), decision, reason, turn_id or "")
        else:
            log.info("tick %s (due %s): %s %s %s", automation_id, nominal.isoformat(), decision, reason, turn_id or "")
        return tick

    def buffered(self) -> list[Tick]:
        """The ticks recorded and not written yet, oldest first."""
        with self._lock:
            return list(self._buffer)

    def flush(self) -> None:
        """Write the buffered ticks in one transaction; on failure they stay buffered."""
        with self._lock:
            batch, self._buffer = self._buffer, []
            dropped, self._dropped = self._dropped, 0
            self._buffered = {}
        if dropped:
            log.warning("dropped the %d oldest unrecorded ticks while the store was unavailable", dropped)
        if not batch:
            return
        try:
            self.ticklog.append(batch)
        except BaseException:
            with self._lock:
                self._buffer[:0] = batch
                for t in batch:
                    if t.automation_id not in self._buffered or t.nominal_at > self._buffered[t.automation_id]:
                        self._buffered[t.automation_id] = t.nominal_at
            raise
        self.merge({t.automation_id: t.nominal_at for t in batch})

    def merge(self, latest: dict[str, datetime]) -> None:
        """Take these nominal times as ticked (the later of each and what is known)."""
        with self._lock:
            for automation_id, nominal in latest.items():
                known = self._ticked.get(automation_id)
                if known is None or nominal > known:
                    self._ticked[automation_id] = nominal

    def refresh(self, automation_ids: list[str] | None = None) -> None:
        """Read the stored last ticks of these automations (None: of every one), and which do not read."""
        found, bad = self.ticklog.last_nominal_scan(automation_ids)
        self.merge(found)
        if automation_ids is None:
            self._bad = bad
        else:
            for automation_id in automation_ids:
                self._bad.pop(automation_id, None)
            self._bad.update(bad)

    def load(self, automation_id: str) -> None:
        """Read one automation's stored last tick."""
        self.merge(self.ticklog.last_nominal(automation_id))

    def problem(self, automation_id: str) -> str | None:
        """Why the automation's stored ticks could not be read at the last ``refresh`` (None: they could)."""
        return self._bad.get(automation_id)

    def last_ticked(self, automation_id: str) -> datetime | None:
        """The latest nominal time ticked: stored, flushed or buffered."""
        with self._lock:
            pending = self._buffered.get(automation_id)  # the latest unflushed (a scan per tick was quadratic in a burst)
            stored = self._ticked.get(automation_id)
        candidates = [t for t in (stored, pending) if t is not None]
        return max(candidates) if candidates else None
