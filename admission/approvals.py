"""Owner approvals for pause_ask: a durable ask with its proposed extension stored beside it.

The approval id is opaque and single-use; it expires; deciding it is one atomic statement that
consumes it; it is bound to the mission, the scope and the stored proposal, so the decider cannot
substitute another budget. Approving extends the mission and reopens it in the same transaction:
if recording the decision fails, the mission is not resumed.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy import insert, select, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row
from .clock import iso, read_clock
from .errors import FloorgateError, InvalidInput
from .events import EventKind, record
from .policies import Provenance, check_owner_ref
from .scope import check_key
from .unit import UnitOfWork

DEFAULT_TTL = timedelta(hours=24)
_EXTENDS = {
    "max_turns": "extra_turns",
    "max_tool_calls": "extra_tool_calls",
    "max_tokens": "extra_tokens",
    "max_wall_seconds": "extra_wall_seconds",
}


class ApprovalRejected(FloorgateError, PermissionError):
    """The approval id cannot be used: unknown, replayed, expired, superseded or mismatched."""


class Approval(Frozen):
    approval_id: str
    mission_id: str
    scope: str
    bound: str
    proposal: dict  # type: ignore[type-arg]
    state: Literal["pending", "approved", "denied", "expired", "superseded"]
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None
    decided_by: str | None = None
    decided_by_kind: str | None = None  # Provenance of decided_by


def _approval(row) -> Approval:  # type: ignore[no-untyped-def]
    return from_row(Approval, s.approvals, row, proposal=json.loads(row.proposal_json))


def _decided(row, state: str, decided_by: str | None) -> dict[str, object]:  # type: ignore[no-untyped-def]
    return {
        "approval_id": row.approval_id,
        "mission_id": row.mission_id,
        "scope": row.scope,
        "bound": row.bound,
        "state": state,
        "decided_by": decided_by,
    }


class Approvals(Repository):
    def ask(
        self, mission_id: str, scope: str, bound: str, extension: int, ttl: timedelta = DEFAULT_TTL, *, unit: UnitOfWork | None = None
    ) -> Approval:
        """File an ask proposing ``extension`` more of ``bound``; earlier pending asks of the mission
        are superseded. The mission waits for its owner. ``unit``: in the caller's unit of work."""
        if bound not in _EXTENDS or type(extension) is not int or extension < 1:
            raise InvalidInput("proposal", f"extend one of {', '.join(_EXTENDS)} by a positive whole number")
        a, m = s.approvals, s.missions
        now = read_clock(self.clock)
        expires = now + ttl
        # What the ask is (its id, mission, scope and bound): its row's keys and its event's.
        ask = {"approval_id": "auth-" + secrets.token_urlsafe(18), "mission_id": mission_id, "scope": scope, "bound": bound}
        with self.store.write(lock_key=locks.mission(mission_id), unit=unit) as conn:
            conn.execute(
                update(a).where(a.c.mission_id == mission_id, a.c.state == "pending").values(state="superseded", decided_at_us=now)
            )
            conn.execute(
                insert(a).values(
                    **ask,
                    proposal_json=json.dumps({bound: extension}),
                    state="pending",
                    created_at_us=now,
                    expires_at_us=expires,
                    decided_at_us=None,
                )
            )
            conn.execute(update(m).where(m.c.mission_id == mission_id).values(status="awaiting_owner"))
            row = conn.execute(select(a).where(a.c.approval_id == ask["approval_id"])).one()
            record(conn, EventKind.ASK_PENDING, mission_id, {**ask, "extension": extension, "expires_at": iso(expires)}, now)
        return _approval(row)

    def pending(self, mission_id: str | None = None) -> list[Approval]:
        a = s.approvals
        query = select(a).where(a.c.state == "pending").order_by(a.c.created_at_us)
        if mission_id is not None:
            query = query.where(a.c.mission_id == mission_id)
        with self.store.read() as conn:
            return [_approval(row) for row in conn.execute(query)]

    def decide(
        self,
        approval_id: str,
        approve: bool,
        *,
        scope_now: str | None = None,
        decided_by: str | None = None,
        provenance: Provenance = Provenance.ASSERTED,
    ) -> Approval:
        """Consume the approval once. ``scope_now`` is the mission's lane as configured now; a
        different one (the automation moved) is a mismatch. ``decided_by`` (with its
        ``provenance``) is recorded with the decision."""
        check_key(approval_id, "approval_id", max_len=64)
        if decided_by is not None:
            check_owner_ref(decided_by)
        if not isinstance(approval_id, str) or not approval_id.startswith("auth-") or len(approval_id) > 64:
            raise ApprovalRejected("approval id: expected auth-<id> exactly as floorgate printed it")
        a, m = s.approvals, s.missions
        now = read_clock(self.clock)
        # The decision changes the mission's row: serialize it with every other writer of that
        # mission (asks, counts, settlement), so the lock is the mission's, found first.
        owner = self.get(approval_id).mission_id
        with self.store.write(lock_key=locks.mission(owner)) as conn:
            row = conn.execute(select(a).where(a.c.approval_id == approval_id)).first()
            if row is None or row.mission_id != owner:
                raise ApprovalRejected(f"approval {approval_id} is unknown")
            if row.state != "pending":
                raise ApprovalRejected(f"approval {approval_id} was already {row.state}; it is single-use")
            if row.expires_at_us <= now:
                conn.execute(
                    update(a).where(a.c.approval_id == approval_id, a.c.state == "pending").values(state="expired", decided_at_us=now)
                )
                record(conn, EventKind.ASK_DECIDED, row.mission_id, _decided(row, "expired", None), now)
                expired = True
            else:
                expired = False
            mission = conn.execute(select(m).where(m.c.mission_id == row.mission_id)).first()
            if not expired and (
                mission is None or mission.status != "awaiting_owner" or (scope_now is not None and scope_now != row.scope)
            ):
                raise ApprovalRejected(f"approval {approval_id} does not match the mission's current state or scope")
            if not expired:
                consumed = conn.execute(
                    update(a)
                    .where(a.c.approval_id == approval_id, a.c.state == "pending", a.c.expires_at_us > now)
                    .values(
                        state="approved" if approve else "denied",
                        decided_at_us=now,
                        decided_by=decided_by,
                        decided_by_kind=Provenance(provenance).value if decided_by is not None else None,
                    )
                )
                if consumed.rowcount != 1:
                    raise ApprovalRejected(f"approval {approval_id} was decided concurrently; it is single-use")
                proposal = json.loads(row.proposal_json)
                record(conn, EventKind.ASK_DECIDED, row.mission_id, _decided(row, "approved" if approve else "denied", decided_by), now)
                if approve:
                    column = _EXTENDS[row.bound]
                    conn.execute(
                        update(m)
                        .where(m.c.mission_id == row.mission_id, m.c.status == "awaiting_owner")
                        .values(**{column: getattr(m.c, column) + int(proposal[row.bound])}, status="open", stop_reason=None)
                    )
                else:
                    conn.execute(
                        update(m)
                        .where(m.c.mission_id == row.mission_id)
                        .values(status="stuck", stop_reason=f"owner denied extending {row.bound}", settled_at_us=now)
                    )
                    stuck = {"mission_id": row.mission_id, "reason": f"owner denied extending {row.bound}"}
                    record(conn, EventKind.MISSION_STUCK, row.mission_id, stuck, now)
        if expired:
            raise ApprovalRejected(f"approval {approval_id} expired at {row.expires_at_us.isoformat()}")
        return self.get(approval_id)

    def get(self, approval_id: str) -> Approval:
        check_key(approval_id, "approval_id", max_len=64)
        a = s.approvals
        row = self._read_first(select(a).where(a.c.approval_id == approval_id))
        if row is None:
            raise ApprovalRejected(f"approval {approval_id} is unknown")
        return _approval(row)
