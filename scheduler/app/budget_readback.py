"""Readback of a lane's limits across runs: for each count and budget that binds it, what is used,
held in flight, left, and when it frees up (``admission.budgets.limit_states``), with the estimate
a turn of the lane would hold (the envelope's ``max_tokens``, else its largest recent turn, else
the owner's ``--estimate-tokens``) and the model it is priced by (the automation's)."""

from __future__ import annotations

from dataclasses import dataclass

from floorgate.admission import Automations, NotFound, Store
from floorgate.admission.budgets import LimitState, limit_states
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.envelope import merge
from floorgate.admission.limits import bound_limits, owner_estimate
from floorgate.admission.policies import applicable_rules
from floorgate.admission.usage import lane_estimate


@dataclass(frozen=True)
class LaneLimits:
    """Where a lane's limits stand now; ``estimate_tokens`` None: no estimate (token and USD budgets block)."""

    states: list[LimitState]
    estimate_tokens: int | None
    model: str | None


class BudgetReadback:
    """The one read of a lane's limit states for surfaces (``policy show``)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def lane(self, goal: str, agent: str, automation: str | None) -> LaneLimits:
        model = None
        if automation is not None:
            try:
                model = Automations(self.store, self.clock).get(automation).spec.model
            except NotFound:
                model = None
        now = read_clock(self.clock)
        with self.store.read() as conn:
            rules = applicable_rules(conn, goal, agent, automation)
            bound = bound_limits([(r.scope, r.revision, r.limits) for r in rules], agent)
            if not bound:
                return LaneLimits([], None, model)
            envelope = merge([(str(r.scope), r.compute) for r in rules if r.compute is not None])
            estimate = lane_estimate(
                conn, goal, agent, automation or "", now,
                envelope_max_tokens=envelope.max_tokens, owner_estimate=owner_estimate(r.limits for r in rules),
            )  # fmt: skip
            return LaneLimits(limit_states(conn, bound, now, estimate_tokens=estimate, model=model), estimate, model)
