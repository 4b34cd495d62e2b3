"""Readback of a lane's limits across runs: for each count and budget that binds it, what is used,
held in flight, left, and when it frees up (``admission.budgets.limit_states``), with the estimate
a turn of the lane would hold (the envelope's ``max_tokens``, else its largest recent turn, else
the owner's ``--estimate-tokens``) and the model it is priced by (the automation's).

Every surface (``policy show``, ``status``, ``automation show`` and ``preview``, the console,
``/api/*``, ``/metrics``) renders a ``LaneLimits`` from here. Whether a limit blocks the lane is
admission's table's verdict (``Admission.eligibility``); ``limited`` only words it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy.engine import Connection

from floorgate.admission import Automations, Eligibility, NotFound, Reason, Rule, Store
from floorgate.admission.alerts import Alert
from floorgate.admission.alerts import counts as alert_counts
from floorgate.admission.alerts import latest as latest_alerts
from floorgate.admission.alerts import latest_many as latest_alerts_many
from floorgate.admission.budgets import LimitState, binding, limit_states
from floorgate.admission.clock import Clock, ceil_second, iso, read_clock
from floorgate.admission.envelope import merge
from floorgate.admission.errors import CorruptState
from floorgate.admission.limits import LimitKind, bound_limits, owner_estimate
from floorgate.admission.policies import applicable_rules
from floorgate.admission.usage import lane_estimate
from floorgate.admission.windows import NEVER, micros_to_usd

from .preview import PreviewRow

Lane = tuple[str, str, str | None]


@dataclass(frozen=True)
class LaneLimits:
    """Where a lane's limits stand now, and the alerts they raised in their current periods;
    ``estimate_tokens`` None: no estimate (token and USD budgets block)."""

    states: list[LimitState]
    estimate_tokens: int | None
    model: str | None
    # Each limit's latest alert in its current period (``alerts.latest``; None: none), as ``states``.
    alerts: tuple[Alert | None, ...] = ()
    read: bool = True  # False: not read (the lane's rules carry no count or budget)

    def with_alerts(self) -> list[tuple[LimitState, Alert | None]]:
        """Each limit with its latest alert in its current period (None: none yet)."""
        alerts = self.alerts if len(self.alerts) == len(self.states) else (None,) * len(self.states)
        return list(zip(self.states, alerts, strict=True))

    @property
    def binding(self) -> LimitState | None:
        """The limit that keeps the lane from starting (of the blocked ones, the one freeing last)."""
        return binding(self.states)


_NONE = LaneLimits([], None, None, read=False)


def judged(limits: LaneLimits | None) -> list[LimitState] | None:
    """The states admission judges a lane's verdict from (``Admission.eligibility``'s ``limits``):
    those read for the readback, so the verdict and what is shown beside it are one read; None when
    they were not read (admission then reads them itself if the lane has any)."""
    return limits.states if limits is not None and limits.read else None


def has_limits(rules: list[Rule]) -> bool:
    """Whether any of a lane's rules carries a count or budget (only such lanes pay for the read)."""
    return any(not r.limits.is_empty() for r in rules)


class BudgetReadback:
    """The one read of a lane's limit states for every surface."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.store = store
        self.clock = clock

    def lane(self, goal: str, agent: str, automation: str | None) -> LaneLimits:
        """The limits binding one lane (no limits: empty ``states``); reads the automation's model."""
        model = None
        if automation is not None:
            try:
                model = Automations(self.store, self.clock).get(automation).spec.model
            except NotFound:
                model = None
        return self.of((goal, agent, automation), model)

    def of(self, lane: Lane, model: str | None) -> LaneLimits:
        """``lane`` when the model a turn of it is priced by is known (one read transaction)."""
        now = read_clock(self.clock)
        with self.store.read() as conn:
            return self._states(conn, lane, applicable_rules(conn, *lane), model, now)

    def many(self, lanes: dict[Lane, tuple[list[Rule], str | None]]) -> dict[Lane, LaneLimits]:
        """``lane`` for many lanes whose rules and model are already read (a ``status``): one read
        transaction for all, and nothing at all when none of them has a limit."""
        out = {lane: _NONE for lane, (rules, _) in lanes.items() if not has_limits(rules)}
        wanted = {lane: found for lane, found in lanes.items() if lane not in out}
        if not wanted:
            return out
        now = read_clock(self.clock)
        with self.store.read() as conn:
            read = {lane: self._states(conn, lane, rules, model, now, alerts=False) for lane, (rules, model) in wanted.items()}
            alerts = latest_alerts_many(conn, [x.states for x in read.values()], now)  # every lane's in one read
        for (lane, found), raised in zip(read.items(), alerts, strict=True):
            out[lane] = replace(found, alerts=raised)
        return out

    def listed(self, lanes: list[Lane]) -> dict[Lane, LaneLimits | None]:
        """The limits of lanes no automation stands for (``status``'s second table; None: it has
        none): one read of every rule, then the limits' reads only for the lanes that have some."""
        from .envelope_gate import EnvelopeGate, EnvelopeMode

        keyed = {(g, a, x or ""): (g, a, x) for g, a, x in lanes}
        rules = EnvelopeGate(self.store, clock=self.clock, mode=EnvelopeMode.OBSERVE).lane_rules_or_none(list(keyed))
        out: dict[Lane, LaneLimits] = {}
        readable: dict[Lane, tuple[list[Rule], str | None]] = {}
        for key, lane in keyed.items():
            found = rules.get(key) if rules is not None else None
            if found is None or isinstance(found, CorruptState):
                out[lane] = self.lane(*lane)  # read on its own: a damaged rule raises as admission would deny
            else:
                readable[lane] = (found, None)
        out.update(self.many(readable))
        return {lane: (found if found.states else None) for lane, found in out.items()}

    def alert_counts(self) -> dict[tuple[str, str], int]:
        """Every alert written, by (event, what its limit counts) (``alerts.counts``, one read)."""
        with self.store.read() as conn:
            return alert_counts(conn)

    def _states(
        self, conn: Connection, lane: Lane, rules: list[Rule], model: str | None, now: datetime, *, alerts: bool = True
    ) -> LaneLimits:
        goal, agent, automation = lane
        bound = bound_limits([(r.scope, r.revision, r.limits) for r in rules], agent)
        if not bound:
            return LaneLimits([], None, model)
        envelope = merge([(str(r.scope), r.compute) for r in rules if r.compute is not None])
        estimate = lane_estimate(
            conn, goal, agent, automation or "", now,
            envelope_max_tokens=envelope.max_tokens, owner_estimate=owner_estimate(r.limits for r in rules),
        )  # fmt: skip
        states = limit_states(conn, bound, now, estimate_tokens=estimate, model=model)
        return LaneLimits(states, estimate, model, latest_alerts(conn, states, now) if alerts else ())


class PreviewLimits:
    """A preview's check of a lane's counts and budgets at each start it simulates
    (``preview.LimitCheck``): what the store holds in the window at that instant
    (``limit_states`` at it, the lane's estimate held by each start) plus the starts the preview
    ran before it. Usage held in flight counts as held until settled (conservative)."""

    def __init__(self, store: Store, limits: LaneLimits) -> None:
        self.store = store
        self.limits = limits

    def __call__(self, at: datetime, ran: list[datetime]) -> tuple[str, datetime | None] | None:
        with self.store.read() as conn:
            states = limit_states(
                conn, [x.limit for x in self.limits.states], at, estimate_tokens=self.limits.estimate_tokens, model=self.limits.model
            )
        for x in states:
            reason = (Reason.COUNT_EXHAUSTED if x.limit.kind is LimitKind.STARTS else Reason.BUDGET_EXHAUSTED).value
            if x.blocked:
                return reason, None if x.frees_at is None or x.frees_at == NEVER else x.frees_at
            counted = sorted(r for r in ran if x.limit.window.counts(r, at))
            if x.used + x.held + len(counted) * (x.need or 0) + (x.need or 0) > x.limit.amount:
                return reason, _frees_from_ran(x, counted, at)  # spent by the preview's own earlier starts
        return None


def _frees_from_ran(x: LimitState, counted: list[datetime], at: datetime) -> datetime | None:
    """When enough of the preview's own earlier starts (``counted``: those the window holds at
    ``at``, oldest first) have left the window for one more start: the next calendar period, or
    in a rolling window when the last of the oldest ones that must go leaves it. The store's own
    usage is taken as it is at ``at`` (it only ages out: no earlier time is ever shown). None:
    their leaving is not enough."""
    window, need = x.limit.window, x.need or 0
    if not window.rolling:
        return window.next_period_start(at) if need <= x.limit.amount else None
    over = x.used + x.held + len(counted) * need + need - x.limit.amount
    leaving = -(-over // need) if need else 0  # how many must leave (rounded up)
    if leaving < 1 or leaving > len(counted):
        return None
    return window.leaves_at(counted[leaving - 1], at)


def limited(eligibility: Eligibility, limits: LaneLimits | None) -> Eligibility:
    """A lane's eligibility as the readback shows it beside its counts and budgets: presentation
    only. Admission's table decides (``Admission.eligibility`` checks the lane's limits as reserve
    does: status ``limit_wait``, the binding limit's reason and ``next_eligible_at``); here a
    spent limit's detail names it with its usage and when it frees (whole seconds, rounded up), and
    an open lane's detail lists its limits. An unavailable verdict stays as it is."""
    if limits is None or not limits.states or eligibility.status == "unavailable":
        return eligibility
    if eligibility.status != "limit_wait":
        if eligibility.status != "eligible":
            return eligibility
        lead = "no floor applies" if eligibility.floor is None or not eligibility.floor.rules else eligibility.detail
        return eligibility.model_copy(update={"detail": f"{lead}; limited: {_summary(limits)}"})
    block = limits.binding
    if block is None:  # read a moment apart from the verdict: its own words stand
        return eligibility
    frees = eligibility.next_eligible_at
    if block.problem:  # raising the limit would not help: say what it lacks
        until = f"cannot be checked: {block.problem}"
    else:
        until = f"until {iso(ceil_second(frees))}" if frees is not None else "until the owner raises it"
    detail = f"{eligibility.reason.value}: {block.limit.describe()} ({usage_text(block)}) {until}"
    return eligibility.model_copy(update={"detail": detail})


def limit_denied(row: PreviewRow, eligibility: Eligibility) -> PreviewRow:
    """A preview row the plan denied because a spent limit (``limited``) holds the lane until it
    frees: said so (``denied_by``), and when it frees (None: not by waiting)."""
    if row.admitted or row.denied_by is not None or eligibility.status != "limit_wait":
        return row
    if row.eligible_at != eligibility.next_eligible_at and row.eligible_at != NEVER:
        return row
    return replace(row, denied_by=eligibility.reason.value, eligible_at=eligibility.next_eligible_at)


def _summary(limits: LaneLimits) -> str:
    return "; ".join(f"{x.limit.describe()} ({usage_text(x)})" for x in limits.states)


def amount(x: LimitState, value: int | None) -> int | str | None:
    """One of a limit's amounts as shown: a count or tokens as is, USD as an exact decimal string."""
    if value is None or x.limit.kind is not LimitKind.USD:
        return value
    return format(micros_to_usd(value).normalize(), "f")


def usage_text(x: LimitState) -> str:
    """``used 2, held 0, left 1`` (with the unit: tokens, USD); a budget that blocks with some of
    it left adds what the next start would hold (its estimate), which is why."""
    q = x.limit.quantity
    out = f"used {q(x.used)}, held {q(x.held)}, left {q(x.left)}"
    return out if x.short_by is None else f"{out}, the next start holds {q(x.short_by)}"
