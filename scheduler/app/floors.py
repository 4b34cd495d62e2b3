"""Floor settings use cases for the owner console: read a target with what it inherits, preview a
change at the revision read, apply it at that revision as an authenticated principal, read back.

A preview never writes; an apply is the admission layer's exact-revision compare-and-set (a stale
revision raises ``RevisionConflict``, never retried here). A reduction is authorized only for the
reduction the owner was shown: the caller passes back the preview's ``reduction_key``.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from datetime import timedelta

from floorgate.admission import (
    Admission,
    Automations,
    ComputeBlock,
    EffectiveFloor,
    Eligibility,
    Envelope,
    InvalidInput,
    Policies,
    Principal,
    Provenance,
    ReductionNotAuthorized,
    RevisionConflict,
    Rule,
    Scope,
    ScopeKind,
    Store,
    parse_compute,
)
from floorgate.admission.budgets import LimitState
from floorgate.admission.clock import Clock
from floorgate.admission.envelope import loosened
from floorgate.admission.intervals import format_interval
from floorgate.admission.policies import RuleRef, combine
from floorgate.admission.windows import NEVER

from .budget_readback import BudgetReadback, LaneLimits, limited
from .envelope_gate import EnvelopeGate, EnvelopeMode
from .rule_writer import Writer


@dataclass(frozen=True)
class Inherited:
    """What one agent (or automation) under a target ends up with: its effective floor and envelope."""

    scope: Scope
    floor: EffectiveFloor
    envelope: Envelope
    envelope_problem: str | None
    eligibility: Eligibility | None = None  # its state and exact next eligible time (as status reads them)
    limits: LaneLimits | None = None  # its counts and budgets (None: none binds it)


@dataclass(frozen=True)
class FloorView:
    """A target as the owner edits it: the rule stored exactly there (revision 0: none yet), and what
    the target and each agent under it inherit, with where each part comes from."""

    scope: Scope
    rule: Rule | None
    below: list[Inherited]  # the target itself first when it is an agent or automation

    @property
    def revision(self) -> int:
        return self.rule.revision if self.rule is not None else 0


@dataclass(frozen=True)
class EffectiveChange:
    """What one agent (or automation) under a target would inherit: its effective floor now and
    after the change (a disabled rule falls back to what the wider scopes set)."""

    scope: Scope
    before: EffectiveFloor
    after: EffectiveFloor


@dataclass(frozen=True)
class FloorChange:
    """A previewed change: stored before and after, at which revision, whether it is a reduction,
    and the effective floor before -> after of the target and each agent below it."""

    scope: Scope
    revision: int
    before: timedelta | None  # None: no rule stored at the scope
    after: timedelta
    compute_before: ComputeBlock | None
    compute_after: ComputeBlock | None
    reduction: bool
    reduction_what: list[str]
    effective: tuple[EffectiveChange, ...] = ()

    @property
    def reduction_key(self) -> str | None:
        """What a caller passes back to authorize exactly this reduction (None: not a reduction)."""
        return f"{self.scope}@{self.revision}:{';'.join(self.reduction_what)}" if self.reduction else None


class ReductionNotShown(ReductionNotAuthorized):
    """A reduction applied without the key of the preview that showed it; ``change`` is that
    preview, so each surface words its own fix (the API's ``authorize_reduction``, the page's tick box)."""

    def __init__(self, change: FloorChange) -> None:
        self.change = change
        super().__init__(str(change.scope), "", "", what=f"{'; '.join(change.reduction_what)} on {change.scope}")


@dataclass(frozen=True)
class FloorApplied:
    """An applied change, the readback taken after it, and whether the readback shows the write."""

    change: FloorChange
    rule: Rule
    readback: FloorView

    @property
    def confirmed(self) -> bool:
        got = self.readback.rule
        return got is not None and got.revision == self.rule.revision and got.min_interval == self.rule.min_interval


class FloorService:
    """Owner floors at one target, for surfaces that edit them (the console's settings page and API)."""

    def __init__(self, store: Store, clock: Clock) -> None:
        self.policies = Policies(store, clock)
        self.automations = Automations(store, clock)
        self.admission = Admission(store, clock)
        self.envelopes = EnvelopeGate(store, clock=clock, mode=EnvelopeMode.OBSERVE)  # reads what applies; enforces nothing
        self.budgets = BudgetReadback(store, clock)

    def goals(self) -> dict[str, list[str]]:
        """Every goal and its agents, from floors, starts and automations."""
        out: dict[str, set[str]] = {}
        for rule in self.policies.list():
            out.setdefault(rule.scope.goal_id, set()).update([rule.scope.agent_id] if rule.scope.agent_id else [])
        for goal, agent, _ in self.admission.lanes():
            out.setdefault(goal, set()).add(agent)
        found, _broken = self.automations.scan()
        for a in found.values():
            out.setdefault(a.spec.goal_id, set()).add(a.spec.agent_id)
        return {g: sorted(agents) for g, agents in sorted(out.items())}

    def targets(self) -> dict[str, dict[str, list[str]]]:
        """What a setting can target: every goal, its agents, and each agent's automations."""
        found, _broken = self.automations.scan()
        out: dict[str, dict[str, list[str]]] = {g: {a: [] for a in agents} for g, agents in self.goals().items()}
        for a in found.values():
            out[a.spec.goal_id][a.spec.agent_id].append(a.automation_id)
        return {g: {a: sorted(ids) for a, ids in agents.items()} for g, agents in out.items()}

    def read(self, scope: Scope) -> FloorView:
        """The stored rule at ``scope`` and what the target and the agents below it inherit."""
        rule = self.policies.get(scope)
        return FloorView(scope=scope, rule=rule, below=[self._inherited(t) for t in self._below(scope)])

    def unadmittable(self, scope: Scope) -> list[tuple[Scope, LimitState]]:
        """After a limits write at ``scope``: each limit that keeps a lane under it (each of its
        automations; an agent without one, the agent) from starting until the owner acts, with
        that lane: one that cannot be checked (no estimate, no price) or that one start's estimate
        alone is above. What the owner is warned of at once, rather than finding the lane waiting."""
        found, _broken = self.automations.scan(goal=scope.goal_id)
        lanes: list[tuple[str, str | None]] = sorted(
            (a.spec.agent_id, a.automation_id)
            for a in found.values()
            if scope.agent_id in (None, a.spec.agent_id) and scope.automation_id in (None, a.automation_id)
        )
        if not lanes and scope.agent_id is not None:
            lanes = [(scope.agent_id, scope.automation_id)]
        out: list[tuple[Scope, LimitState]] = []
        for agent, automation in lanes:
            lane = Scope(goal_id=scope.goal_id, agent_id=agent, automation_id=automation)
            for x in self.budgets.lane(scope.goal_id, agent, automation).states:
                if x.problem is not None or (x.blocked and x.frees_at == NEVER):
                    out.append((lane, x))
        return out

    def unbound(self, goal: str, agent: str, automation: str | None) -> str | None:
        """None when a rule binds the lane (a floor, a count or budget, an envelope, at its goal,
        agent or automation); else what the owner should know: every start is admitted, and, when
        the lane names no saved automation of its agent but one of a similar name exists, that name."""
        lane = Scope(goal_id=goal, agent_id=agent, automation_id=automation)
        if any(r.binds for r in self.policies.applicable(goal, agent, automation)):
            return None
        said = f"no rule binds {lane} yet: every start is admitted until one does (floorgate policy set {lane} ...)"
        if automation is None:
            return said
        found, _broken = self.automations.scan(goal=goal)
        if automation in found:
            return said
        names = [a for a, x in found.items() if x.spec.agent_id == agent]
        close = difflib.get_close_matches(automation, names, n=1)
        return said + (f"; no automation {automation!r} is saved for {goal}/{agent}: did you mean {close[0]!r}?" if close else "")

    def _below(self, scope: Scope) -> list[Scope]:
        if scope.kind is ScopeKind.GOAL:
            return [Scope.agent(scope.goal_id, a) for a in self.goals().get(scope.goal_id, [])]
        return [scope]

    def preview(self, scope: Scope, *, revision: int, min_interval: timedelta | None, compute: ComputeBlock | None = None) -> FloorChange:
        """What saving would change at ``scope`` (writes nothing). ``RevisionConflict`` when the
        stored revision is not ``revision``, so the owner refreshes before deciding anything."""
        if min_interval is None and compute is None:
            raise InvalidInput("min_interval", "give a floor (e.g. 24h; 0 disables) and/or a compute block")
        if type(revision) is not int or revision < 0:
            raise InvalidInput("revision", "pass the revision you read (0 when no rule exists)")
        rule = self.policies.get(scope)
        current = rule.revision if rule is not None else 0
        if current != revision:
            raise RevisionConflict(str(scope), revision, current)
        before = rule.min_interval if rule is not None else None
        after = min_interval if min_interval is not None else (before or timedelta(0))
        what: list[str] = []
        if after < (before or timedelta(0)):
            what.append(f"floor {format_interval(before or timedelta(0))} -> {format_interval(after)}")
        compute_before = rule.compute if rule is not None else None
        compute_after = compute_before
        if compute is not None:
            problem = rule.compute_problem if rule is not None else None
            looser = loosened(compute_before, compute) if problem is None else ["replacing an unreadable block"]
            what += [f"compute {x}" for x in looser]
            compute_after = None if compute.is_empty() else compute
        effective = tuple(self._effective_change(t, scope, after, revision + 1) for t in self._below(scope))
        return FloorChange(scope, revision, before, after, compute_before, compute_after, bool(what), what, effective)

    def _effective_change(self, target: Scope, changed: Scope, after: timedelta, revision: int) -> EffectiveChange:
        """``target``'s effective floor now, and with the rule at ``changed`` set to ``after``."""
        now = self.policies.effective(target.goal_id, target.agent_id or "", target.automation_id)
        refs = [r for r in now.rules if r.scope != changed]
        if after > timedelta(0):
            refs.append(RuleRef(scope=changed, min_interval=after, revision=revision))
        return EffectiveChange(target, now, combine(now.goal_id, now.agent_id, now.automation_id, refs))

    def apply(
        self,
        scope: Scope,
        *,
        revision: int,
        min_interval: timedelta | None,
        principal: Principal,
        compute: ComputeBlock | None = None,
        authorize_reduction: str | None = None,
        note: str | None = None,
    ) -> FloorApplied:
        """Preview at ``revision``, write at that revision as ``principal`` (authenticated), read back.
        A reduction is written only when ``authorize_reduction`` is the preview's ``reduction_key``."""
        if not principal.can_write:
            raise ReductionNotAuthorized(str(scope), "", "", what=f"a write by {principal.name} ({principal.role.value})")
        change = self.preview(scope, revision=revision, min_interval=min_interval, compute=compute)
        allowed = change.reduction and authorize_reduction is not None and authorize_reduction == change.reduction_key
        if change.reduction and not allowed:
            raise ReductionNotShown(change)
        writer = Writer(principal.name, Provenance.AUTHENTICATED, allowed)
        rule = writer.configure(self.policies, scope, revision, min_interval=min_interval, compute=compute, note=note)
        return FloorApplied(change, rule, self.read(scope))

    def _inherited(self, scope: Scope) -> Inherited:
        agent = scope.agent_id or ""
        floor = self.policies.effective(scope.goal_id, agent, scope.automation_id)
        envelope, problem = self.envelopes.envelope(scope.goal_id, agent, scope.automation_id)
        if scope.agent_id is None:
            return Inherited(scope, floor, envelope, problem)
        limits = self.budgets.lane(scope.goal_id, agent, scope.automation_id)
        eligibility = limited(self.admission.eligibility(scope.goal_id, agent, scope.automation_id), limits)
        return Inherited(scope, floor, envelope, problem, eligibility, limits if limits.states else None)


def parse_compute_text(text: str | None) -> ComputeBlock | None:
    """A compute block typed into a form or a JSON body (blank: no change)."""
    if text is None or not str(text).strip():
        return None
    return parse_compute(str(text), "compute")
