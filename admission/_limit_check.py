"""The client's check of a lane's counts and budgets, for the admission decision.

The decision's single read says whether any applicable rule carries a count or a budget (the
``limited`` fact). Only then does the gate call ``check_lane`` on the decision's connection: it
reads the lane's limits, its estimate (``usage.lane_estimate``), its model and each limit's state
(``budgets.limit_states``), and answers the ``LimitCode`` the decision is taken again with, the
states behind it, and whether a limit or a goal floor counts across agents (a goal-wide series,
serialized by the goal's lock). Extra statements for limited lanes only: a few per series, none for a lane whose
rules carry a floor alone. A damaged rule, start or usage row raises ``StoreUnavailable``. This is
the slow path: a lane the process already knows is read in one statement (``_limit_read``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from . import _schema as s
from .budgets import LimitState, binding, limit_states
from .decide.facts import Facts, LimitCode
from .envelope import merge
from .errors import CorruptState, StoreUnavailable
from .limits import BoundLimit, LimitKind, Limits, bound_limits, owner_estimate
from .policies import applicable_rules
from .scope import Scope, ScopeKind
from .store import DriverTx
from .usage import hold_on, lane_estimate


class LaneCheck(NamedTuple):
    """What ``check_lane`` found: the code, the states, the estimate a turn holds, its model."""

    code: LimitCode
    states: tuple[LimitState, ...]
    estimate_tokens: int | None
    model: str | None
    across_agents: bool
    budgets: bool  # a token or USD budget binds the lane: an admitted turn holds its estimate


_a = s.automations
# Built once: a limited lane with a budget reads its model on every decision.
_MODEL = select(_a.c.model).where(_a.c.automation_id == bindparam("automation"))


def _model(conn: Connection, automation: str | None) -> str | None:
    if automation is None:
        return None
    model = conn.execute(_MODEL, {"automation": automation}).scalar()
    return model if isinstance(model, str) else None


def check_lane(conn: Connection, goal: str, agent: str, automation: str | None, now: datetime) -> LaneCheck:
    """The lane's counts and budgets at ``now`` (see the module docstring)."""
    try:
        rules = applicable_rules(conn, goal, agent, automation)
        active = rules  # a rule with no floor (0) still carries its limits
        bound: list[BoundLimit] = bound_limits([(r.scope, r.revision, r.limits) for r in active], agent)
        budgets = any(b.kind is not LimitKind.STARTS for b in bound)
        estimate = model = None
        if budgets:
            envelope = merge([(str(r.scope), r.compute) for r in active if r.compute is not None])
            estimate = lane_estimate(
                conn, goal, agent, automation or "", now,
                envelope_max_tokens=envelope.max_tokens, owner_estimate=owner_estimate(r.limits for r in active),
            )  # fmt: skip
            model = _model(conn, automation)
        states = tuple(limit_states(conn, bound, now, estimate_tokens=estimate, model=model))
    except CorruptState as exc:
        raise StoreUnavailable(f"a limit of {goal}/{agent} cannot be read: {exc}") from None
    # One series for the goal's agents: a count or budget across agents, or a goal floor across them.
    across = any(b.series.agent_id is None for b in bound) or any(_interval_across(r.scope, r.limits, r.active) for r in rules)
    return LaneCheck(code_of(states), states, estimate, model, across, budgets)


def _interval_across(scope: Scope, limits: Limits, active: bool) -> bool:
    """Whether a rule's floor counts from the goal's latest start (a goal rule set across agents)."""
    return active and limits.across_agents and scope.kind is ScopeKind.GOAL


def code_of(states: tuple[LimitState, ...]) -> LimitCode:
    """What a lane's limit states decide: none binds, or the binding one (``budgets.binding``) is
    a count or a budget."""
    found = binding(list(states))
    if found is None:
        return LimitCode.NONE
    return LimitCode.COUNT if found.limit.kind is LimitKind.STARTS else LimitCode.BUDGET


def held_estimate(check: LaneCheck) -> tuple[int, str | None] | None:
    """What an admitted turn of the lane holds: its estimate and model (None: no budget binds it,
    or no estimate, whose budgets then deny); the one rule ``hold_estimate`` holds by."""
    if check.budgets and check.estimate_tokens is not None:
        return check.estimate_tokens, check.model
    return None


def hold_estimate(tx: DriverTx, check: LaneCheck, turn_id: str, goal: str, agent: str, automation: str | None, at: datetime) -> None:
    """Hold the lane's estimate for an admitted turn, on the admission's driver transaction (a
    lane with a token or USD budget only; idempotent by turn id)."""
    held = held_estimate(check)
    if held is not None:
        hold_on(tx, turn_id, goal, agent, automation or "", at, *held)


def checked(facts: Facts, check: LaneCheck) -> Facts:
    """``facts`` with the lane's counts and budgets as checked (for the limit rows)."""
    values = list(facts)  # on every decision of a limited lane: ``_replace`` takes the fields by name
    values[_CODE_AT], values[_STATES_AT] = check.code, check.states
    return _new_facts(Facts, values)


_CODE_AT, _STATES_AT = Facts._fields.index("limit_code"), Facts._fields.index("limits")
_new_facts = tuple.__new__


def judged(facts: Facts, states: Sequence[LimitState]) -> Facts:
    """``facts`` with limit states a caller read (``Admission.eligibility``'s ``limits``)."""
    found = tuple(states)
    return facts._replace(limit_code=code_of(found), limits=found)
