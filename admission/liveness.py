"""Liveness records: which timer hosts are running, and when a pre-model hook last answered.

Neither is admission state. A running ``floorgate run`` writes a heartbeat row (``HostBeats``) when
it starts, at every poll and when it stops, so readbacks can say whether anything will fire. A
hook records each answer it gives for an automation (``HookAnswers``), admitted or denied, so the
``pre-model hook`` guarantee is claimed only while the hook is seen answering. These two records
are the only writes a denial makes, and README says so. ``hook install`` records where it put an
automation's hook (``HookInstalls``), so readback can check that the agent app will run it.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, ValidationError
from sqlalchemy import Connection, delete, insert, select, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row, stored, to_row
from .errors import CorruptState

# A host is alive while its last beat is younger than this many polls (plus a fixed slack for a
# slow store): a missed beat or two is a busy host, three is a host that is gone.
_BEATS_MISSED = 3
_SLACK = timedelta(seconds=10)
# Rows of hosts stopped or silent for longer than this are deleted when a host starts.
_KEEP = timedelta(days=7)
_MODES = (None, "disabled", "observe", "enforce")


class HostBeat(Frozen):
    """One ``floorgate run`` process: who it is and when it last said it was running."""

    host_id: str
    hostname: str
    pid: int
    version: str
    started_at: datetime
    beat_at: datetime
    poll: timedelta
    stopped_at: datetime | None
    # The envelope mode it runs turns with (disabled, observe, enforce); None: not recorded (older host).
    envelope_mode: str | None = None

    def alive(self, now: datetime) -> bool:
        """Running, and its last beat is recent enough for its poll interval."""
        return self.stopped_at is None and now - self.beat_at <= self.poll * _BEATS_MISSED + _SLACK


class HostBeats(Repository):
    """Heartbeats of the timer hosts on one store."""

    def started(self, beat: HostBeat) -> None:
        """Record a host that starts (and forget hosts silent for a week)."""
        t = s.hosts
        with self.store.write(lock_key=locks.host(beat.host_id)) as conn:
            conn.execute(delete(t).where(t.c.beat_at_us < beat.started_at - _KEEP))
            conn.execute(delete(t).where(t.c.host_id == beat.host_id))
            conn.execute(insert(t).values(to_row(beat, t, poll_us=beat.poll // timedelta(microseconds=1), stopped_at_us=None)))

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
            if type(row.pid) is not int or type(row.poll_us) is not int or row.poll_us <= 0 or row.envelope_mode not in _MODES:
                raise CorruptState(f"host {row.host_id!r} has a malformed heartbeat row")
            with stored(f"host {row.host_id!r}"):
                beat = from_row(HostBeat, t, row, poll=timedelta(microseconds=row.poll_us))
            out.append(beat)
        return out


class HookAnswer(Frozen):
    """When a pre-model hook last answered for an automation, and what."""

    automation_id: str
    answered_at: datetime
    admitted: bool
    answers: int


class HookAnswers(Repository):
    """The pre-model hooks' answers, per automation."""

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
        with stored("a hook answer"):
            return {
                row.automation_id: HookAnswer(
                    automation_id=row.automation_id, answered_at=row.answered_at_us, admitted=bool(row.admitted), answers=int(row.answers)
                )
                for row in rows
            }

    def get(self, automation_id: str) -> HookAnswer | None:
        """The last answer for ``automation_id``, or None when the hook never answered."""
        t = s.hook_answers
        row = self._read_first(select(t).where(t.c.automation_id == automation_id))
        if row is None:
            return None
        if type(row.answers) is not int:
            raise CorruptState(f"the hook answers of automation {automation_id!r} are malformed")
        with stored(f"the hook answers of automation {automation_id!r}"):
            return HookAnswer(
                automation_id=row.automation_id, answered_at=row.answered_at_us, admitted=bool(row.admitted), answers=row.answers
            )


class HookInstall(BaseModel):
    """Where ``floorgate hook install`` put an automation's pre-model hook, so readback can check
    that the agent app will still run it (a Codex hook nobody trusted never runs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    automation_id: str
    client: str  # the agent app, as 'hook install' names it (claude, codex)
    settings_file: str  # absolute
    project_dir: str  # where the app runs the prompts (the project; the cwd of a --user install)
    app_home: str | None = None  # the app's own config directory the install was checked against ($CODEX_HOME)
    hostname: str
    installed_at: datetime


_INSTALL_PREFIX = "hook_install/"


def _install_key(automation_id: str) -> str:
    key = _INSTALL_PREFIX + automation_id
    if len(key) <= s.settings.c.key.type.length:  # type: ignore[attr-defined]
        return key
    # Ids may be longer than the settings key; the record names its automation, checked on read.
    return _INSTALL_PREFIX + "#" + hashlib.sha256(automation_id.encode()).hexdigest()[:40]


class HookInstalls(Repository):
    """The last hook install of each automation, one ``fg_settings`` row per automation."""

    def record(self, install: HookInstall) -> None:
        """Record ``install`` as the automation's hook install (replacing an earlier one)."""
        t = s.settings
        key = _install_key(install.automation_id)
        value = install.model_dump_json()
        with self.store.write(lock_key=locks.setting(key)) as conn:
            done = conn.execute(
                update(t).where(t.c.key == key).values(value_json=value, revision=t.c.revision + 1, updated_at_us=install.installed_at)
            ).rowcount
            if not done:
                conn.execute(
                    insert(t).values(key=key, value_json=value, revision=1, owner_ref="hook install", updated_at_us=install.installed_at)
                )

    def get(self, automation_id: str) -> HookInstall | None:
        """The automation's recorded install, or None (``CorruptState`` when the row is malformed)."""
        t = s.settings
        row = self._read_first(select(t.c.value_json).where(t.c.key == _install_key(automation_id)))
        if row is None:
            return None
        try:
            found = HookInstall.model_validate_json(row.value_json)
        except (ValidationError, ValueError, TypeError):
            raise CorruptState(f"the hook install record of automation {automation_id!r} is malformed") from None
        if found.automation_id != automation_id:
            raise CorruptState(f"the hook install record of automation {automation_id!r} names {found.automation_id!r}")
        return found

    def forget(self, automation_id: str, conn: Connection) -> None:
        """Delete the automation's record inside the caller's transaction ``conn``."""
        t = s.settings
        conn.execute(delete(t).where(t.c.key == _install_key(automation_id)))
