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
    """The tick-record methods of ``HostRuntime`` (a mixin: the state lives on the runtime)."""

    host: str
    ticklog: TickLog
    _lock: threading.Lock
    _buffer: list[Tick]
    _buffered: dict[str, datetime]  # automation id -> latest nominal time in _buffer
    _dropped: int
    _ticked: dict[str, datetime]
    _bad_ticks: dict[str, str]

    def _record(
        self, automation_id: str, nominal: datetime, actual: datetime, decision: str, reason: str, turn_id: str | None = None
    ) -> Tick:
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
        self._ticked_merge({t.automation_id: t.nominal_at for t in batch})

    def _ticked_merge(self, latest: dict[str, datetime]) -> None:
        with self._lock:
            for automation_id, nominal in latest.items():
                known = self._ticked.get(automation_id)
                if known is None or nominal > known:
                    self._ticked[automation_id] = nominal

    def _refresh_ticked(self, automation_ids: list[str] | None = None) -> None:
        found, bad = self.ticklog.last_nominal_scan(automation_ids)
        self._ticked_merge(found)
        if automation_ids is None:
            self._bad_ticks = bad
        else:
            for automation_id in automation_ids:
                self._bad_ticks.pop(automation_id, None)
            self._bad_ticks.update(bad)

    def _last_ticked(self, automation_id: str) -> datetime | None:
        with self._lock:
            pending = self._buffered.get(automation_id)  # the latest unflushed (a scan per tick was quadratic in a burst)
            stored = self._ticked.get(automation_id)
        candidates = [t for t in (stored, pending) if t is not None]
        return max(candidates) if candidates else None
