"""``floorgate usage``: the per-turn usage ledger budgets count, newest first, with each turn's cost
as a budget counts it (the cost the host reported, else its tokens at the owner's price for the
model, else unpriced) and one total per state. Bounded: at most ``limit`` entries, read in one
statement walking an index backwards (``Usage.ledger``)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from floorgate.admission import Admission
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.errors import NotFound
from floorgate.admission.scope import Scope
from floorgate.admission.usage import Usage, UsageEntry, UsageState, entry_usd


class CostBasis(StrEnum):
    """Where a turn's USD figure comes from."""

    REPORTED = "reported"  # the cost its host reported
    PRICED = "priced"  # its tokens (reported, else its held estimate) at the owner's price for its model
    UNPRICED = "unpriced"  # neither: a USD budget over it cannot be met until a price is set


@dataclass(frozen=True)
class LedgerRow:
    """One ledger entry and its cost (``usd_micros`` None: unpriced)."""

    entry: UsageEntry
    usd_micros: int | None
    basis: CostBasis


@dataclass(frozen=True)
class StateTotal:
    """The listed entries of one state: how many, their counted tokens (reported once settled, else
    the held estimate), the cost of those priced, and how many are unpriced."""

    state: UsageState
    turns: int
    tokens: int
    usd_micros: int
    unpriced: int


@dataclass(frozen=True)
class LedgerPage:
    """What ``floorgate usage`` shows: ``rows`` newest first, ``totals`` over them by state."""

    rows: tuple[LedgerRow, ...]
    totals: tuple[StateTotal, ...]
    since: datetime | None
    limit: int


def cost_of(entry: UsageEntry, prices: dict[str, int]) -> tuple[int | None, CostBasis]:
    """A turn's cost as a budget counts it (``admission.usage.entry_usd``) and what it rests on."""
    usd = entry_usd(entry, prices)
    if entry.state is UsageState.SETTLED and entry.usd_micros is not None:
        return usd, CostBasis.REPORTED
    return usd, CostBasis.PRICED if usd is not None else CostBasis.UNPRICED


class UsageLedger:
    """The ledger's listing over the usage repository the composition root builds."""

    def __init__(self, usage: Usage, clock: Clock, admission: Admission) -> None:
        self.usage = usage
        self.clock = clock
        self.admission = admission

    def report(self, turn_id: str, *, tokens: int, usd_micros: int | None, model: str | None) -> tuple[UsageEntry | None, bool]:
        """What a host that launches its own turns (a bare ``admit``) reports of one once it ended:
        the estimate its admission held reconciled to it, once (entry, changed; the same report
        again changes nothing, another is refused). (None, False) for a start that held nothing
        (no budget bound its lane when it was admitted); ``NotFound`` for a turn with neither."""
        try:
            return self.usage.settle(turn_id, tokens=tokens, usd_micros=usd_micros, model=model)
        except NotFound:  # nothing held: a start of a lane no budget bound, or no such turn
            if self.admission.start(turn_id) is None:
                raise NotFound(
                    f"turn {turn_id!r} has no start and no held estimate (a wrong id, or a turn admitted where no rule "
                    "applies: nothing to reconcile); see 'floorgate starts'"
                ) from None
            return None, False

    def list(self, scope: Scope | None, *, since: timedelta | datetime | None, limit: int) -> LedgerPage:
        """The newest ``limit`` entries of ``scope`` (every lane when None) at or after ``since``
        (a duration: that long before now). A damaged entry or price raises ``CorruptState``."""
        start = read_clock(self.clock) - since if isinstance(since, timedelta) else since
        ids = (scope.goal_id, scope.agent_id, scope.automation_id) if scope is not None else ()
        entries, prices = self.usage.ledger(tuple(i for i in ids if i is not None), since=start, limit=limit)
        rows = tuple(LedgerRow(e, *cost_of(e, prices)) for e in entries)
        totals = []
        for state in UsageState:
            mine = [r for r in rows if r.entry.state is state]
            if mine:
                totals.append(
                    StateTotal(
                        state=state,
                        turns=len(mine),
                        tokens=sum(r.entry.counted_tokens for r in mine),
                        usd_micros=sum(r.usd_micros for r in mine if r.usd_micros is not None),
                        unpriced=sum(1 for r in mine if r.usd_micros is None),
                    )
                )
        return LedgerPage(rows=rows, totals=tuple(totals), since=start, limit=limit)
