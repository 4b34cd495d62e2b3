"""Liveness records: which timer hosts are running, and when a pre-model hook last answered.

Neither is admission state. A running ``floorgate run`` writes a heartbeat row (``HostBeats``) when
it starts, at every poll and when it stops, so readbacks can say whether anything will fire. A
hook records each answer it gives for an automation (``HookAnswers``), admitted or denied, so the
``pre-model hook`` guarantee is claimed only while the hook is seen answering. These two records
are the only writes a denial makes, and README says so.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict
from sqlalchemy import delete, insert, select, update

from . import _locks as locks
from . import _schema as s
from .errors import CorruptState
from .store import Store

# A host is alive while its last beat is younger than this many polls (plus a fixed slack for a
# slow store): a missed beat or two is a busy host, three is a host that is gone.
_BEATS_MISSED = 3
_SLACK = timedelta(seconds=10)
# Rows of hosts stopped or silent for longer than this are deleted when a host starts.
_KEEP = timedelta(days=7)


class HostBeat(BaseModel):
    """One ``floorgate run`` process: who it is and when it last said it was running."""

    model_config = ConfigDict(frozen=True)

    host_id: str
    hostname: str
    pid: int
    version: str
    started_at: datetime
    beat_at: datetime
    poll: timedelta
    stopped_at: datetime | None

    def alive(self, now: datetime) -> bool:
        """Running, and its last beat is recent enough for its poll interval."""
        return self.stopped_at is None and now - self.beat_at <= self.poll * _BEATS_MISSED + _SLACK


class HostBeats:
    """Heartbeats of the timer hosts on one store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def started(self, beat: HostBeat) -> None:
        """Record a host that starts (and forget hosts silent for a week)."""
        t = s.hosts
        with self.store.write(lock_key=locks.host(beat.host_id)) as conn:
            conn.execute(delete(t).where(t.c.beat_at_us < beat.started_at - _KEEP))
            conn.execute(delete(t).where(t.c.host_id == beat.host_id))
            conn.execute(
                insert(t).values(
                    host_id=beat.host_id,
                    hostname=beat.hostname,
                    pid=beat.pid,
                    version=beat.version,
                    started_at_us=beat.started_at,
                    beat_at_us=beat.beat_at,
                    poll_us=beat.poll // timedelta(microseconds=1),
                    stopped_at_us=None,
                )
            )

    def beat(self, host_id: str, now: datetime) -> None:
        """The host is still running at ``now``."""
        t = s.hosts
        with self.store.write(lock_key=locks.host(host_id)) as conn:
            conn.execute(update(t).where(t.c.host_id == host_id).values(beat_at_us=now))

    def stopped(self, host_id: str, now: datetime) -> None:
        """The host stopped cleanly at ``now``."""
        t = s.hosts
        with self.store.write(lock_key=locks.host(host_id)) as conn:
            conn.execute(update(t).where(t.c.host_id == host_id).values(beat_at_us=now, stopped_at_us=now))

    def all(self) -> list[HostBeat]:
        """Every recorded host, the latest beat first (a malformed row raises ``CorruptState``)."""
        t = s.hosts
        with self.store.read() as conn:
            rows = conn.execute(select(t).order_by(t.c.beat_at_us.desc())).all()
        out = []
        for row in rows:
            if type(row.pid) is not int or type(row.poll_us) is not int or row.poll_us <= 0:
                raise CorruptState(f"host {row.host_id!r} has a malformed heartbeat row")
            out.append(
                HostBeat(
                    host_id=row.host_id,
                    hostname=row.hostname,
                    pid=row.pid,
                    version=row.version,
                    started_at=row.started_at_us,
                    beat_at=row.beat_at_us,
                    poll=timedelta(microseconds=row.poll_us),
                    stopped_at=row.stopped_at_us,
                )
            )
        return out


class HookAnswer(BaseModel):
    """When a pre-model hook last answered for an automation, and what."""

    model_config = ConfigDict(frozen=True)

    automation_id: str
    answered_at: datetime
    admitted: bool
    answers: int


class HookAnswers:
    """The pre-model hooks' answers, per automation."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def record(self, automation_id: str, *, admitted: bool, at: datetime) -> None:
        """Record one answer of the hook for ``automation_id``."""
        t = s.hook_answers
        with self.store.write(lock_key=locks.hook_answer(automation_id)) as conn:
            done = conn.execute(
                update(t).where(t.c.automation_id == automation_id).values(answered_at_us=at, admitted=admitted, answers=t.c.answers + 1)
            ).rowcount
            if not done:
                conn.execute(insert(t).values(automation_id=automation_id, answered_at_us=at, admitted=admitted, answers=1))

    def all(self) -> dict[str, HookAnswer]:
        """Every automation's last answer, in one read."""
        t = s.hook_answers
        with self.store.read() as conn:
            rows = list(conn.execute(select(t)))
        return {
            row.automation_id: HookAnswer(
                automation_id=row.automation_id, answered_at=row.answered_at_us, admitted=bool(row.admitted), answers=int(row.answers)
            )
            for row in rows
        }

    def get(self, automation_id: str) -> HookAnswer | None:
        """The last answer for ``automation_id``, or None when the hook never answered."""
        t = s.hook_answers
        with self.store.read() as conn:
            row = conn.execute(select(t).where(t.c.automation_id == automation_id)).first()
        if row is None:
            return None
        if type(row.answers) is not int:
            raise CorruptState(f"the hook answers of automation {automation_id!r} are malformed")
        return HookAnswer(automation_id=row.automation_id, answered_at=row.answered_at_us, admitted=bool(row.admitted), answers=row.answers)
