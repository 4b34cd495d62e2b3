"""A running host's heartbeat in the store: registered at start, renewed at every poll, closed at stop."""

from __future__ import annotations

import uuid
from datetime import timedelta

from floorgate.admission import Store
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.liveness import HostBeat, HostBeats

from .._version import floorgate_version


class Heartbeat:
    """One ``floorgate run`` process's liveness record (``host_id``: ``hostname:pid:nonce``)."""

    def __init__(self, store: Store, clock: Clock, host: str, poll: timedelta, envelope_mode: str | None = None) -> None:
        self.beats = HostBeats(store)
        self.clock = clock
        self.host = host
        self.host_id = f"{host}:{uuid.uuid4().hex[:8]}"
        self.poll = poll
        self.envelope_mode = envelope_mode  # recorded with the beat, so readback never mistakes observe for enforce
        self._registered = False

    def beat(self) -> None:
        """Register this host (the first time, or after the store was down at start), else renew."""
        now = read_clock(self.clock)
        if self._registered:
            self.beats.beat(self.host_id, now)
            return
        hostname, _, pid = self.host.rpartition(":")
        self.beats.started(
            HostBeat(
                host_id=self.host_id,
                hostname=hostname,
                pid=int(pid),
                version=floorgate_version(),
                started_at=now,
                beat_at=now,
                poll=self.poll,
                stopped_at=None,
                envelope_mode=self.envelope_mode,
            )
        )
        self._registered = True

    def stopped(self) -> None:
        """Close the record: this host no longer fires anything."""
        if self._registered:
            self.beats.stopped(self.host_id, read_clock(self.clock))
