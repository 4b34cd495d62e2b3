"""The host policy: how every timer host of a deployment plans wakes, stored in the store.

Every ``floorgate run`` reads it (and picks up changes while it runs), and every readback
(``status``, ``automation show``, ``preview``) computes next fires from the same value, so what
a surface shows is what the hosts do. Writes are exact-revision compare-and-set with the
caller's ``owner_ref``, like floors.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from sqlalchemy import insert, select, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, stored
from .clock import read_clock
from .errors import InvalidInput, RevisionConflict, StoreUnavailable
from .policies import check_owner_ref
from .retention import MAX_RETENTION, MIN_RETENTION

_KEY = "host_policy"
_MAX = timedelta(days=7)
_RETENTION = (MIN_RETENTION, MAX_RETENTION)


class HostPolicy(BaseModel):
    """Wake planning shared by every host: the catch-up window and the adaptive backoff.

    ``catch_up``: after downtime, the latest missed fire at most this old fires once (0: none).
    ``retention``: a running host prunes ticks, settled turns, delivered events and turn logs
    older than this, in small batches (0: keeps everything; see ``retention``).
    ``backoff_initial``/``backoff_cap``: after a failed turn or a poke the wake cadence resets to
    ``backoff_initial`` and doubles up to ``backoff_cap`` until a success (never before the floor).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    catch_up: timedelta = timedelta(hours=1)
    backoff_initial: timedelta = timedelta(minutes=3)
    backoff_cap: timedelta = timedelta(minutes=60)
    retention: timedelta = timedelta(0)  # a running host prunes what is older (0: keeps everything)

    @model_validator(mode="after")
    def _bounds(self) -> HostPolicy:
        for name in ("catch_up", "backoff_initial", "backoff_cap"):
            value: timedelta = getattr(self, name)
            if value < timedelta(0) or value > _MAX:
                raise ValueError(f"{name} must be between 0 and 7 days")
        if self.backoff_initial <= timedelta(0):
            raise ValueError("backoff_initial must be above 0, e.g. 5m")
        if self.retention and not _RETENTION[0] <= self.retention <= _RETENTION[1]:
            raise ValueError("retention must be 0 (keep everything) or between 1d and 3660d")
        if self.backoff_cap < self.backoff_initial:
            raise ValueError("backoff_cap must be at least the initial backoff")
        return self


class StoredHostPolicy(Frozen):
    """The policy with its revision (0: never written, the defaults apply) and provenance."""

    policy: HostPolicy
    revision: int
    owner_ref: str | None
    updated_at: datetime | None


def _to_json(policy: HostPolicy) -> str:
    return json.dumps({k: int(v // timedelta(microseconds=1)) for k, v in policy.model_dump().items()}, sort_keys=True)


def _from_json(text: str) -> HostPolicy:
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or not all(type(v) is int for v in doc.values()):
            raise ValueError("expected an object of integer microseconds")
        return HostPolicy(**{k: timedelta(microseconds=v) for k, v in doc.items()})
    except (ValueError, TypeError, ValidationError, RecursionError) as exc:
        raise StoreUnavailable(f"the stored host policy is malformed: {str(exc).splitlines()[0]}") from None


class HostPolicies(Repository):
    """Read and compare-and-set the deployment's host policy."""

    def get(self) -> StoredHostPolicy:
        """The stored policy, or the defaults at revision 0; malformed state raises ``StoreUnavailable``."""
        t = s.settings
        row = self._read_first(select(t).where(t.c.key == _KEY))
        if row is None:
            return StoredHostPolicy(policy=HostPolicy(), revision=0, owner_ref=None, updated_at=None)
        if type(row.revision) is not int:
            raise StoreUnavailable("the stored host policy has a malformed revision or time")
        with stored("the stored host policy"):
            return StoredHostPolicy(
                policy=_from_json(row.value_json), revision=row.revision, owner_ref=row.owner_ref, updated_at=row.updated_at_us
            )

    def set(self, policy: HostPolicy, *, expected_revision: int, owner_ref: str) -> StoredHostPolicy:
        """Write ``policy`` if the stored revision is ``expected_revision`` (else ``RevisionConflict``)."""
        check_owner_ref(owner_ref)
        if type(expected_revision) is not int or expected_revision < 0:
            raise InvalidInput("revision", "give the revision you read (0 when the defaults apply)")
        t = s.settings
        now = read_clock(self.clock)
        values = dict(value_json=_to_json(policy), owner_ref=owner_ref, updated_at_us=now, revision=expected_revision + 1)
        with self.store.write(lock_key=locks.setting(_KEY)) as conn:
            row = conn.execute(select(t.c.revision).where(t.c.key == _KEY)).first()
            current = row[0] if row is not None else 0
            if current != expected_revision:
                raise RevisionConflict("the host policy", expected_revision, current)
            if row is None:
                conn.execute(insert(t).values(key=_KEY, **values))
            else:
                conn.execute(update(t).where(t.c.key == _KEY, t.c.revision == expected_revision).values(**values))
        return self.get()
