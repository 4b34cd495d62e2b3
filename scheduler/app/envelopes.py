"""Envelope use cases: the owner's answer to an ask, accounting repairs, and mission readback."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from floorgate.admission import (
    Accounting,
    Approval,
    Approvals,
    Automations,
    Envelope,
    InvalidInput,
    Mission,
    Missions,
    NotFound,
    Provenance,
    Store,
)
from floorgate.admission.clock import Clock

from .envelope_gate import EnvelopeGate, EnvelopeMode
from .mission_hold import hold_for_stuck_mission


@dataclass(frozen=True)
class Decided:
    """An owner's decision on an ask: the consumed approval and the mission it changed."""

    approval: Approval
    mission: Mission


@dataclass(frozen=True)
class MissionDetail:
    mission: Mission
    envelope: Envelope | None  # None: its automation was removed
    asks: list[Approval]


@dataclass(frozen=True)
class Reconciled:
    mission: Mission
    done: list[str]


class EnvelopeService:
    """Missions, owner asks and accounting on one store."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock
        self.missions = Missions(store, clock)
        self.approvals = Approvals(store, clock)
        self.accounting = Accounting(store, clock)
        self.automations = Automations(store, clock)

    def lane_of(self, mission: Mission) -> str:
        """The mission's lane as configured now (an ask is bound to it); removed: a lane no ask has."""
        try:
            a = self.automations.get(mission.automation_id)
        except NotFound:
            return "(automation removed)"
        return f"{a.spec.goal_id}/{a.spec.agent_id}/{a.automation_id}"

    def decide(
        self, approval_id: str, approve: bool, *, decided_by: str | None = None, provenance: Provenance = Provenance.ASSERTED
    ) -> Decided:
        """Consume an ask once (``ApprovalRejected`` when it is unknown, used, expired or stale).
        A deny stops the mission and holds its automation until the owner resumes it.
        ``decided_by``: who decided (the console's signed-in principal, authenticated)."""
        pending = self.approvals.get(approval_id)
        mission = self.missions.get(pending.mission_id)
        decided = self.approvals.decide(approval_id, approve, scope_now=self.lane_of(mission), decided_by=decided_by, provenance=provenance)
        if not approve:
            with contextlib.suppress(NotFound):  # a removed automation has nothing to hold
                hold_for_stuck_mission(self.store, self.automations.get(mission.automation_id), self.clock)
        return Decided(decided, self.missions.get(mission.mission_id))

    def reconcile(self, mission_id: str, *, request: str | None, tokens: int | None, release: bool, clear_latch: bool) -> Reconciled:
        """Reconcile or release one metered request, and/or clear the accounting latch."""
        mission = self.missions.get(mission_id)
        done: list[str] = []
        if request is not None:
            if release:
                self.accounting.release(request)
                done.append(f"released {request}")
            elif tokens is not None:
                dispatch, changed = self.accounting.reconcile(request, tokens)
                done.append(
                    f"reconciled {request}: {dispatch.actual_tokens} tokens" + ("" if changed else " (already reconciled; unchanged)")
                )
            else:
                raise InvalidInput("--tokens", "give --tokens N to reconcile, or --release")
        if clear_latch:
            still = self.accounting.open_dispatches(mission.mission_id)
            if still:
                raise InvalidInput(
                    "--clear-latch", f"{len(still)} request(s) still unreconciled: {', '.join(d.request_id for d in still[:5])}"
                )
            if mission.latch is None:
                done.append("no latch to clear")
            else:
                self.missions.set_latch(mission.mission_id, None)
                done.append("latch cleared")
        return Reconciled(self.missions.get(mission_id), done)

    def pending(self) -> list[tuple[Approval, Mission | None]]:
        """Every pending owner ask with its mission (None: the mission row is gone)."""
        out: list[tuple[Approval, Mission | None]] = []
        for ask in self.approvals.pending():
            try:
                out.append((ask, self.missions.get(ask.mission_id)))
            except NotFound:
                out.append((ask, None))
        return out

    def list(self, automation_id: str | None, limit: int = 50) -> list[Mission]:
        return self.missions.recent(automation_id, limit=limit)

    def show(self, mission_id: str) -> MissionDetail:
        """A mission, what is left of its envelope, and its pending asks."""
        mission = self.missions.get(mission_id)
        envelope = None
        try:
            a = self.automations.get(mission.automation_id)
            envelope, _ = EnvelopeGate(self.store, clock=self.clock, mode=EnvelopeMode.OBSERVE).envelope(
                a.spec.goal_id, a.spec.agent_id, a.automation_id
            )
        except NotFound:
            pass
        return MissionDetail(mission, envelope, self.approvals.pending(mission.mission_id))
