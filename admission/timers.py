"""Timer bindings: for each automation, the desired (floored) schedule, the observed one and when
it was read, the apply outcome, and the ACK state.

ACK rule (seed 004): an acknowledgement stands only on an observation read after the last apply;
a rejected ACK persists nothing. An explicit "unavailable" observation clears earlier facts (and
the ACK); no observation at all keeps them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal

from sqlalchemy import bindparam, insert, select, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row, stored
from .errors import CorruptState, InvalidInput


class ObservationState(StrEnum):
    """What a timer host reported for an automation's timer when it was last read."""

    PRESENT = "present"
    ABSENT = "absent"
    UNAVAILABLE = "unavailable"


class TimerBinding(Frozen):
    automation_id: str
    timer: str
    desired: str | None
    desired_raised: bool
    hold_reason: str | None
    desired_at: datetime
    applied_at: datetime | None
    apply_error: str | None
    observed_state: ObservationState | None
    observed: str | None
    observed_at: datetime | None
    ack_state: Literal["none", "acked"]
    acked_at: datetime | None
    acked_observed: str | None
    read_requested_at: datetime | None
    host_user: str | None = None


def _binding(row) -> TimerBinding:  # type: ignore[no-untyped-def]
    with stored(f"timer binding {row.automation_id!r}"):
        return from_row(TimerBinding, s.timer_bindings, row, desired_raised=bool(row.desired_raised))


# Rows per transaction when a running host publishes its timers' readbacks.
PUBLISH_CHUNK = 100

# The ACK columns when no ACK stands: after a new desired schedule, or a readback without the timer.
_NO_ACK = MappingProxyType({"ack_state": "none", "acked_at_us": None, "acked_observed": None})


def _acked(at: datetime, observed: str) -> dict[str, Any]:
    """The ACK columns of a readback (``observed``) of exactly the desired schedule, accepted ``at``."""
    return {"ack_state": "acked", "acked_at_us": at, "acked_observed": observed}


def _observation(state: str, text: str | None, read_at: datetime) -> dict[str, Any]:
    """The observation columns of a readback: its text is kept only when the timer is present."""
    return {"observed_state": state, "observed": text if state == "present" else None, "observed_at_us": read_at}


def _desired_columns(timer: str, desired: str | None, raised: bool, hold_reason: str | None) -> dict[str, Any]:
    """The desired schedule's columns, as ``set_desired`` and a host publishing its own timers write them."""
    return {"timer": timer, "desired": desired, "desired_raised": raised, "hold_reason": hold_reason}


class TimerBindings(Repository):
    def get(self, automation_id: str) -> TimerBinding | None:
        b = s.timer_bindings
        row = self._read_first(select(b).where(b.c.automation_id == automation_id))
        return _binding(row) if row is not None else None

    def ids(self) -> set[str]:
        """The automations that have a binding row, decodable or not."""
        b = s.timer_bindings
        with self.store.read() as conn:
            return {row[0] for row in conn.execute(select(b.c.automation_id))}

    def read_requests(self, timer: str) -> set[str]:
        """The automations on ``timer`` whose readback someone asked for since it was last read
        (one query, by a partial index: a host's poll reads the asks, not every binding)."""
        b = s.timer_bindings
        asked = b.c.read_requested_at_us.is_not(None) & (b.c.observed_at_us.is_(None) | (b.c.read_requested_at_us > b.c.observed_at_us))
        with self.store.read() as conn:
            return {row[0] for row in conn.execute(select(b.c.automation_id).where(asked, b.c.timer == timer))}

    def all(self) -> dict[str, TimerBinding]:
        """Every binding that decodes (one query; a damaged row is left out, and reading that
        automation's binding alone says why)."""
        b = s.timer_bindings
        try:
            with self.store.read() as conn:
                return {row.automation_id: _binding(row) for row in conn.execute(select(b))}
        except CorruptState:
            pass
        with self.store.read() as conn:
            ids = [row[0] for row in conn.execute(select(b.c.automation_id))]
        out: dict[str, TimerBinding] = {}
        for automation_id in ids:
            try:
                binding = self.get(automation_id)
            except CorruptState:
                continue
            if binding is not None:
                out[automation_id] = binding
        return out

    def set_desired(
        self, automation_id: str, timer: str, desired: str | None, raised: bool, hold_reason: str | None, now: datetime
    ) -> TimerBinding:
        """Record the desired schedule; a changed one needs a new apply and a new ACK."""
        b = s.timer_bindings
        with self.store.write(lock_key=locks.timer(automation_id)) as conn:
            row = conn.execute(select(b).where(b.c.automation_id == automation_id)).first()
            values = _desired_columns(timer, desired, raised, hold_reason)
            if row is None:
                conn.execute(insert(b).values(automation_id=automation_id, desired_at_us=now, ack_state="none", **values))
            elif (row.timer, row.desired, row.hold_reason) != (timer, desired, hold_reason):
                conn.execute(
                    update(b)
                    .where(b.c.automation_id == automation_id)
                    .values(desired_at_us=now, applied_at_us=None, apply_error=None, **_NO_ACK, **values)
                )
            row = conn.execute(select(b).where(b.c.automation_id == automation_id)).one()
        return _binding(row)

    def record_apply(self, automation_id: str, now: datetime, error: str | None, host_user: str | None = None) -> None:
        b = s.timer_bindings
        with self.store.write(lock_key=locks.timer(automation_id)) as conn:
            # host_user: where it was armed, or, when the apply failed, where it was meant to go.
            values = (
                {"apply_error": error, "host_user": host_user}
                if error is not None
                else {"applied_at_us": now, "apply_error": None, "host_user": host_user}
            )
            conn.execute(update(b).where(b.c.automation_id == automation_id).values(**values))

    def record_observation(self, automation_id: str, state: str, text: str | None, read_at: datetime) -> None:
        """Store a readback. 'unavailable' clears the earlier observation and the ACK."""
        if state not in ("present", "absent", "unavailable"):
            raise InvalidInput("observed_state", "one of present, absent, unavailable")
        b = s.timer_bindings
        values = _observation(state, text, read_at)
        if state != "present":
            values.update(_NO_ACK)
        with self.store.write(lock_key=locks.timer(automation_id)) as conn:
            conn.execute(
                update(b)
                .where(b.c.automation_id == automation_id, b.c.observed_at_us.is_(None) | (b.c.observed_at_us <= read_at))
                .values(**values)
            )

    def acknowledge(self, automation_id: str, desired: str, applied_at: datetime, observed: str, read_at: datetime, now: datetime) -> bool:
        """Record an accepted ACK for exactly the desired schedule and apply the caller checked
        (compare-and-set: False, and nothing written, if either changed meanwhile)."""
        b = s.timer_bindings
        with self.store.write(lock_key=locks.timer(automation_id)) as conn:
            done = conn.execute(
                update(b)
                .where(b.c.automation_id == automation_id, b.c.desired == desired, b.c.applied_at_us == applied_at)
                .values(**_observation("present", observed, read_at), **_acked(now, observed))
            )
        return done.rowcount == 1

    def publish_own(self, readbacks: list[tuple[str, str, str | None, str | None, datetime]]) -> None:
        """For a host that keeps the timers itself (floorgate's own scheduler): each (automation id,
        timer, desired, live readback text or None, read at). The arming is the apply; the live
        readback is taken after it, so a matching one is an ACK. Written in chunks of
        ``PUBLISH_CHUNK`` rows, one short transaction each: a host publishing 10,000 timers never
        holds the store's write lock long enough to keep an admission waiting behind it."""
        for start in range(0, len(readbacks), PUBLISH_CHUNK):
            self._publish_chunk(readbacks[start : start + PUBLISH_CHUNK])

    def _publish_chunk(self, readbacks: list[tuple[str, str, str | None, str | None, datetime]]) -> None:
        b = s.timer_bindings
        with self.store.write(lock_key=None) as conn:
            ids = [r[0] for r in readbacks]
            query = select(b.c.automation_id, b.c.desired, b.c.applied_at_us).where(b.c.automation_id.in_(ids))
            existing = {row.automation_id: row for row in conn.execute(query)}
            inserts: list[dict] = []  # type: ignore[type-arg]
            updates: list[dict] = []  # type: ignore[type-arg]
            for automation_id, timer, desired, observed, read_at in readbacks:
                at = read_at
                row = existing.get(automation_id)
                applied = (
                    row.applied_at_us
                    if row is not None and row.desired == desired and row.applied_at_us is not None
                    else at - timedelta(microseconds=1)
                )
                values = {
                    **_desired_columns(timer, desired, False, None),
                    "applied_at_us": applied,
                    "apply_error": None,
                    **_observation("present" if observed is not None else "absent", observed, at),
                    **(_acked(at, observed) if observed is not None and observed == desired else _NO_ACK),
                }
                if row is None:
                    inserts.append(dict(automation_id=automation_id, desired_at_us=at, **values))
                else:
                    updates.append(dict(key=automation_id, **values))
            # Two executemany statements: the transaction holds the write lock a few milliseconds.
            if inserts:
                conn.execute(insert(b), inserts)
            if updates:
                conn.execute(update(b).where(b.c.automation_id == bindparam("key")), updates)

    def request_read(self, automation_id: str, now: datetime) -> None:
        b = s.timer_bindings
        with self.store.write(lock_key=locks.timer(automation_id)) as conn:
            conn.execute(update(b).where(b.c.automation_id == automation_id).values(read_requested_at_us=now))

    def remove(self, automation_id: str) -> None:
        from sqlalchemy import delete

        b = s.timer_bindings
        with self.store.write(lock_key=locks.timer(automation_id)) as conn:
            conn.execute(delete(b).where(b.c.automation_id == automation_id))
