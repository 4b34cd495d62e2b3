"""The base of the store's use-case classes: a store, and the clock they read the time from."""

from __future__ import annotations

from typing import Any

from sqlalchemy.sql.expression import Executable

from .clock import Clock, SystemClock
from .store import Store


class Repository:
    """Use cases over one store; those that read the time read it from ``clock`` (the system clock
    when none is given)."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()

    def _read_first(self, statement: Executable) -> Any:
        """The first row of ``statement``, read in a transaction of its own (None: no row)."""
        with self.store.read() as conn:
            return conn.execute(statement).first()
