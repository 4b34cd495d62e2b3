"""Accounting for model and tool calls (seed 002's lifecycle), per mission.

preflight -> reserve an estimate -> record the dispatch durably -> reconcile the actual usage by
request id -> finalize. Reconcile is idempotent; an unknown request id is an error, never a new
record. A dispatch that was never reconciled (a crash between them) or usage that cannot be parsed
sets the mission's accounting latch, which blocks new dispatch in enforce until resolved.
Only ids, counts and model names are stored: no prompts, arguments or results.
"""

from __future__ import annotations

from typing import Literal

from sqlalchemy import insert, select, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row, to_row
from .clock import read_clock
from .errors import InvalidInput, NotFound

DispatchState = Literal["reserved", "dispatched", "reconciled", "released"]


class Dispatch(Frozen):
    request_id: str
    mission_id: str
    kind: str
    state: DispatchState
    estimate_tokens: int
    actual_tokens: int | None = None  # None until reconciled
    model: str | None


def _dispatch(row) -> Dispatch:  # type: ignore[no-untyped-def]
    return from_row(Dispatch, s.dispatches, row)


def _check_tokens(value: object, field: str) -> int:
    if type(value) is not int or value < 0 or value > 10**12:
        raise InvalidInput(field, "a whole number of tokens, 0 or more")
    return value


class Accounting(Repository):
    def reserve(
        self, mission_id: str, request_id: str, *, kind: str = "model", estimate_tokens: int = 0, model: str | None = None
    ) -> Dispatch:
        """Reserve an estimate for ``request_id`` (idempotent for the same id and mission)."""
        _check_tokens(estimate_tokens, "estimate_tokens")
        if not request_id or len(request_id) > 128:
            raise InvalidInput("request_id", "1..128 characters")
        d = s.dispatches
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.dispatch(request_id)) as conn:
            row = conn.execute(select(d).where(d.c.request_id == request_id)).first()
            if row is not None:
                if row.mission_id != mission_id:
                    raise InvalidInput("request_id", f"{request_id} belongs to another mission")
                return _dispatch(row)
            fresh = Dispatch(
                request_id=request_id, mission_id=mission_id, kind=kind, state="reserved", estimate_tokens=estimate_tokens, model=model
            )
            conn.execute(insert(d).values(to_row(fresh, d, created_at_us=now, updated_at_us=now)))
            row = conn.execute(select(d).where(d.c.request_id == request_id)).one()
        return _dispatch(row)

    def dispatched(self, request_id: str) -> Dispatch:
        return self._move(request_id, ("reserved",), "dispatched")

    def release(self, request_id: str) -> Dispatch:
        """Give back a reservation whose call never happened."""
        return self._move(request_id, ("reserved",), "released")

    def reconcile(self, request_id: str, actual_tokens: int, model: str | None = None) -> tuple[Dispatch, bool]:
        """Record the actual usage once; returns (dispatch, changed). Unknown ids are errors."""
        _check_tokens(actual_tokens, "actual_tokens")
        d, m = s.dispatches, s.missions
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.dispatch(request_id)) as conn:
            row = conn.execute(select(d).where(d.c.request_id == request_id)).first()
            if row is None:
                raise NotFound(f"request {request_id!r} was never reserved or dispatched; reconcile only known ids")
            if row.state == "reconciled":
                return _dispatch(row), False
            if row.state == "released":
                raise InvalidInput("request_id", f"{request_id} was released (never dispatched)")
            conn.execute(
                update(d)
                .where(d.c.request_id == request_id)
                .values(state="reconciled", actual_tokens=actual_tokens, model=model or row.model, updated_at_us=now)
            )
            conn.execute(
                update(m)
                .where(m.c.mission_id == row.mission_id)
                .values(tokens=m.c.tokens + actual_tokens, usage_reports=m.c.usage_reports + 1)
            )
            row = conn.execute(select(d).where(d.c.request_id == request_id)).one()
        return _dispatch(row), True

    def _move(self, request_id: str, allowed: tuple[str, ...], to: str) -> Dispatch:
        d = s.dispatches
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.dispatch(request_id)) as conn:
            row = conn.execute(select(d).where(d.c.request_id == request_id)).first()
            if row is None:
                raise NotFound(f"request {request_id!r} is unknown")
            if row.state not in allowed:
                if row.state == to:
                    return _dispatch(row)
                raise InvalidInput("request_id", f"{request_id} is {row.state}, not {' or '.join(allowed)}")
            conn.execute(update(d).where(d.c.request_id == request_id).values(state=to, updated_at_us=now))
            row = conn.execute(select(d).where(d.c.request_id == request_id)).one()
        return _dispatch(row)

    def open_dispatches(self, mission_id: str) -> list[Dispatch]:
        """Reserved or dispatched, never reconciled: what a crash leaves untrusted."""
        d = s.dispatches
        with self.store.read() as conn:
            return [
                _dispatch(r) for r in conn.execute(select(d).where(d.c.mission_id == mission_id, d.c.state.in_(("reserved", "dispatched"))))
            ]
