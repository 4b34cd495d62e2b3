"""Floor values and their arithmetic, pure: no store, no clock, no SQL.

The effective floor of a lane is the largest of the rules that apply to it (``combine``); an
automatic start is allowed again one floor after the latest start it counts from
(``next_eligible_us``). A goal rule set ``across agents`` also makes its floor the goal's: one floor
after the goal's latest start, whichever agent made it (``goal_floor``). Stored times are microseconds since the epoch below ``MAX_US`` (year
9000), floors at most ``MAX_FLOOR_US`` (3660 days): anything beyond is corrupt state, never a
value to add up. Every other form (the facts' decoders, the PostgreSQL function, the preview)
takes these bounds and this arithmetic from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone

from .._types import MAX_US as MAX_US  # the column types' bound, defined there (they import nothing of ours)
from .._types import Frozen, shared_fields
from ..scope import Scope, ScopeKind

# A floor beyond the policy cap is corrupt state, not a value to add up.
MAX_STORED_FLOOR = timedelta(days=3660)
MAX_FLOOR_US = MAX_STORED_FLOOR // timedelta(microseconds=1)
_US = timedelta(microseconds=1)


class RuleRef(Frozen):
    """A rule as it contributes to an effective floor: where, how long, at which revision."""

    scope: Scope
    min_interval: timedelta
    revision: int
    across_agents: bool = False  # a goal rule whose floor counts from the goal's latest start


class EffectiveFloor(Frozen):
    """The binding floor for an agent or one of its automations, and the rules that made it.

    ``agent_floor`` applies to all starts of the agent (the maximum of its goal and agent rules);
    ``lane_floor`` applies to the named automation's own starts. ``floor`` is the larger.
    ``goal_floor`` (at most ``agent_floor``) applies to the starts of all the goal's agents: the
    largest of its goal rules set ``across agents``.
    """

    goal_id: str
    agent_id: str
    automation_id: str | None
    agent_floor: timedelta
    lane_floor: timedelta
    rules: tuple[RuleRef, ...]
    goal_floor: timedelta = timedelta(0)

    @property
    def floor(self) -> timedelta:
        return max(self.agent_floor, self.lane_floor)


Folded = tuple[timedelta, timedelta, tuple[RuleRef, ...], timedelta]  # agent, lane floors, binding rules, goal floor
_ORDER = {ScopeKind.GOAL: 0, ScopeKind.AGENT: 1, ScopeKind.AUTOMATION: 2}


def combine(goal: str, agent: str, automation: str | None, rules: list[RuleRef]) -> EffectiveFloor:
    """Fold the applicable rules into agent and lane floors (maximum wins; narrower never weakens)."""
    return effective_floor(goal, agent, automation, fold(rules))


def fold(rules: Sequence[RuleRef]) -> Folded:
    """``combine``'s arithmetic alone: the agent floor, the lane floor, the binding rules
    (non-zero, broadest first) and the goal floor, which lanes with the same rules share."""
    agent_floor = lane_floor = goal_floor = timedelta(0)
    for rule in rules:
        if rule.scope.kind is ScopeKind.AUTOMATION:
            lane_floor = max(lane_floor, rule.min_interval)
        else:
            agent_floor = max(agent_floor, rule.min_interval)
            if rule.across_agents and rule.scope.kind is ScopeKind.GOAL:
                goal_floor = max(goal_floor, rule.min_interval)
    active = tuple(sorted((r for r in rules if r.min_interval > timedelta(0)), key=lambda r: _ORDER[r.scope.kind]))
    return agent_floor, lane_floor, active, goal_floor


def effective_floor(goal: str, agent: str, automation: str | None, folded: Folded) -> EffectiveFloor:
    """The lane's ``EffectiveFloor`` from ``fold`` of its rules."""
    agent_floor, lane_floor, active, goal_floor = folded
    # Validated (faster than model_construct in pydantic 2); the field-name set is shared. The goal
    # floor is set only where one applies, so other lanes' floors read (and dump) as before.
    fields = {
        "goal_id": goal,
        "agent_id": agent,
        "automation_id": automation,
        "agent_floor": agent_floor,
        "lane_floor": lane_floor,
        "rules": active,
    }
    if goal_floor:
        fields["goal_floor"] = goal_floor
    return shared_fields(EffectiveFloor(**fields))


def floor_us(floor: EffectiveFloor) -> tuple[EffectiveFloor, int, int]:
    """``floor`` with its agent and lane floors in microseconds (computed once per floor)."""
    return floor, floor.agent_floor // _US, floor.lane_floor // _US


def next_eligible_us(
    agent_floor_us: int,
    lane_floor_us: int,
    agent_anchor: int | None,
    lane_anchor: int | None,
    goal_floor_us: int = 0,
    goal_anchor: int | None = None,
) -> int | None:
    """When the floors (in microseconds) next allow an automatic start: the latest of each
    anchor plus its floor; None when no floor counts from an anchor. ``lane_anchor`` is None for
    an agent-wide request (a lane floor binds only its automation's starts); ``goal_anchor`` is the
    goal's latest start over all its agents, which its ``goal_floor_us`` counts from."""
    agent_at = agent_anchor + agent_floor_us if agent_anchor is not None and agent_floor_us else None
    if goal_anchor is not None and goal_floor_us:
        goal_at = goal_anchor + goal_floor_us
        agent_at = goal_at if agent_at is None or goal_at > agent_at else agent_at
    if lane_anchor is None or not lane_floor_us:
        return agent_at
    lane_at = lane_anchor + lane_floor_us
    return lane_at if agent_at is None or lane_at > agent_at else agent_at


def goal_binds(
    agent_floor_us: int, lane_floor_us: int, agent_anchor: int | None, lane_anchor: int | None, goal_floor_us: int, goal_anchor: int | None
) -> bool:
    """Whether the goal's floor (across agents) is what ``next_eligible_us`` waits for: it ends
    no earlier than the lane's own floors would (on a tie the goal's floor is named)."""
    if goal_anchor is None or not goal_floor_us:
        return False
    own = next_eligible_us(agent_floor_us, lane_floor_us, agent_anchor, lane_anchor)
    return own is None or goal_anchor + goal_floor_us >= own


def after_start_us(anchor_us: int, agent_floor_us: int, lane_floor_us: int) -> int:
    """The next automatic start a start at ``anchor_us`` allows: one floor (the larger of the
    agent's and, for a request naming its automation, the lane's) after it."""
    return anchor_us + (agent_floor_us if agent_floor_us > lane_floor_us else lane_floor_us)


def next_eligible_at(anchor: datetime, floor: timedelta) -> datetime:
    """One floor after a start at ``anchor`` (the next automatic start it allows); past the last
    representable instant, that instant (nothing after it runs)."""
    try:
        return anchor + floor
    except OverflowError:
        return datetime.max.replace(tzinfo=timezone.utc)
