"""What ``floorgate doctor`` asks the store about itself: its schema revision against the newest
this floorgate knows, the database server's clock, and (PostgreSQL) the lock timeout its sessions
run with. Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, text

from ._upgrade import VERSION
from .clock import UTC
from .errors import StoreUnavailable
from .store import _MIGRATIONS, Store


@dataclass(frozen=True)
class StoreHealth:
    """The store's schema revision (None: none recorded), the newest known, the server's clock
    and, on PostgreSQL, the ``lock_timeout`` a session of this store runs with."""

    revision: str | None
    head: str
    server_now: datetime
    lock_timeout: str | None  # None on SQLite (it has none)

    @property
    def current(self) -> bool:
        return self.revision == self.head


def store_health(store: Store) -> StoreHealth:
    """Read the store's health facts in one read transaction (``StoreUnavailable`` when it cannot)."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory(str(_MIGRATIONS), version_locations=[str(_MIGRATIONS)]).get_current_head() or ""
    with store.read() as conn:
        revision = conn.execute(select(VERSION.c.version_num)).scalar()
        if store.dialect == "postgresql":
            seconds = conn.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar()
            lock_timeout = conn.execute(text("SHOW lock_timeout")).scalar()
        else:
            seconds = conn.execute(text("SELECT (julianday('now') - 2440587.5) * 86400.0")).scalar()
            lock_timeout = None
    if seconds is None:
        raise StoreUnavailable(f"store {store.safe_url} did not say what time it is")
    server_now = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=float(seconds))
    return StoreHealth(str(revision) if revision is not None else None, head, server_now, str(lock_timeout) if lock_timeout else None)
