"""The facts one decision reads, each declared once.

A ``Fact`` names one value of a lane (its column in the hot statement and in PostgreSQL's
``fg_facts``), the scalar subquery that reads it (``:g`` goal, ``:a`` agent, ``:x`` lane, ``:xr``
lane or a placeholder no rule has, ``:t`` turn, ``:tr`` trigger), its form on a store rebuilt
without its NOT NULL constraints, its PostgreSQL type and, for a time, its fail-closed bound: a
stored value outside ``0 <= v < bound`` is corrupt state and the lane is unavailable, never
eligible, and its per-row form for the bulk read of many lanes. ``admission._facts`` builds the
client's statements (per lane and in bulk) from these declarations and ``render`` builds the server
function from them; ``Facts`` is their decoded value. Rules travel as rows (``RULE_COLUMNS``): per
lane one JSON array of them, in bulk one result row each.
"""

from __future__ import annotations

import re
from enum import IntEnum
from typing import NamedTuple

from ..decisions import Phase
from .floors import MAX_US, EffectiveFloor


class Facts(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    """One lane's decoded facts."""

    floor: EffectiveFloor
    turn_phase: Phase | None  # None: this turn id has no start
    turn_lane: str | None
    turn_anchor_us: int | None
    agent_anchor_us: int | None
    lane_anchor_us: int | None
    lane_trigger_us: int | None
    duplicate_turn: str | None
    # ``floor.agent_floor`` and ``floor.lane_floor`` in microseconds, computed once per floor.
    agent_floor_us: int
    lane_floor_us: int
    # How many applicable rules carry a count or budget (0: the floor alone decides), and what the
    # client found when it checked them (``LimitCode``; None: not checked in this read).
    limited: int = 0
    limit_code: int | None = None
    # The limit states ``limit_code`` was computed from (``budgets.LimitState``), for the detail
    # and the next eligible time; empty when not read.
    limits: tuple = ()  # type: ignore[type-arg]
    # The goal's latest start over all its agents, and ``floor.goal_floor`` in microseconds (0: no
    # goal rule counts its floor across agents, and the goal's anchor does not bind).
    goal_anchor_us: int | None = None
    goal_floor_us: int = 0


class LimitCode(IntEnum):
    """What the client found checking a lane's counts and budgets (the ``lim`` fact): none binds,
    a count binds, a budget binds. The binding one is the limit that frees last."""

    NONE = 0
    COUNT = 1
    BUDGET = 2


class Param(NamedTuple):
    """One parameter of a decision: ``:name`` in the client's statements, ``p_name`` in the function."""

    name: str
    pg_type: str


# In the order of fg_facts' signature (fg_admit adds kind and lock before guarded).
PARAMS = (
    Param("g", "text"),
    Param("a", "text"),
    Param("x", "text"),
    Param("xr", "text"),
    Param("t", "text"),
    Param("tr", "bigint"),
    Param("now", "bigint"),
    Param("reason", "text"),
    Param("guarded", "boolean"),
    Param("lim", "integer"),
)


class PerRow(NamedTuple):
    """A fact's per-row form, for the bulk read of many lanes: the fact's rows of ``table`` with
    the columns its subquery matches to the lane (``keys``) and its ``values``: aggregates per group
    of ``keys`` when ``grouped``, else one row per stored row (the client matches rows to lanes)."""

    table: str
    keys: tuple[str, ...]
    values: tuple[str, ...]
    grouped: bool = True
    where: str | None = None  # only the rows that hold this (no parameters)


class Fact(NamedTuple):
    """One fact of a lane (see the module docstring)."""

    name: str  # the column of fg_facts, and of the facts the checks' SQL reads as ``f.<short>``
    short: str  # its name inside the function's row (``f.ag``), which the checks' SQL uses
    sql: str  # a scalar subquery over :params
    pg_type: str
    guarded: str | None = None  # its form on a relaxed store (None: ``sql``, with ``also``)
    bound: int | None = None  # a stored time: valid below this bound, not negative
    # On a relaxed store, more values it may take (a SELECT of column ``v``): the largest counts.
    also: str | None = None
    per_row: PerRow | None = None  # its form in the bulk read (None: read there as ``sql``, or not)

    def relaxed(self) -> str:
        """Its scalar subquery on a relaxed store (the client's form)."""
        if self.guarded is not None:
            return self.guarded
        if self.also is not None:
            return "(SELECT MAX(u.v) FROM (SELECT " + self.sql + " AS v UNION ALL " + self.also + ") AS u)"
        return self.sql


# The lane's key columns, each matched to its parameter.
_LANE_KEYS = (("goal_id", "g"), ("agent_id", "a"), ("automation_id", "x"))


def _where(keys: tuple[tuple[str, str], ...]) -> str:
    return " AND ".join(f"{column} = :{param}" for column, param in keys)


_LANE = _where(_LANE_KEYS)


def latest(name: str, short: str, column: str, keys: tuple[tuple[str, str], ...], bound: int) -> Fact:
    """The fact that is the largest ``column`` of the starts matching ``keys``: per lane its
    index walked backwards (ORDER BY ... LIMIT 1 rather than MAX, so every planner does), in bulk
    MAX per group (equal wherever no NULL is present; a NULL there is a damaged row the guard
    reports)."""
    sql = f"(SELECT {column} FROM fg_starts WHERE {_where(keys)} ORDER BY {column} DESC LIMIT 1)"
    return Fact(name, short, sql, "bigint", bound=bound, per_row=PerRow("fg_starts", tuple(c for c, _ in keys), (f"MAX({column})",)))


def matching(name: str, short: str, column: str, keys: tuple[tuple[str, str], ...], on: tuple[str, str]) -> Fact:
    """The fact that is ``column`` of the one start matching ``keys`` whose ``on`` column equals its
    parameter (a unique index holds it to one): in bulk the MAX of its group's matching rows."""
    test = f"{on[0]} = :{on[1]}"
    sql = f"(SELECT {column} FROM fg_starts WHERE {_where(keys)} AND {test})"
    per_row = PerRow("fg_starts", tuple(c for c, _ in keys), (f"MAX(CASE WHEN {test} THEN {column} END)",))
    return Fact(name, short, sql, "text", per_row=per_row)


# The rules that may apply to a lane: agent_id IN ('', :a) and automation_id IN ('', :xr). A rule
# whose scope ids are NULL could be this agent's: it is read too, and fails the decoder.
RULES_WHERE = "goal_id = :g AND (agent_id IN ('', :a) OR agent_id IS NULL) AND (automation_id IN ('', :xr) OR automation_id IS NULL)"
# One rule as the decision reads it: a row of these columns (``_facts.rule_row`` decodes it, typed).
RULE_COLUMNS = ("agent_id", "automation_id", "min_interval_us", "revision", "across_agents")
# The ``rules`` fact per lane: its rules' rows as one JSON array of arrays (RULE_COLUMNS, in order).
# A value of a type JSON cannot hold (a BLOB a hand edit wrote on SQLite) fails the statement, which
# the store reports as unavailable: fail closed either way.
RULE_ROWS = {
    "sqlite": "json_group_array(json_array(" + ", ".join(RULE_COLUMNS) + "))",
    "postgresql": "CAST(json_agg(json_build_array(" + ", ".join(RULE_COLUMNS) + ")) AS TEXT)",
}
TURN_TEXT = (
    "COALESCE(phase, '') || '/' || COALESCE(goal_id, '?') || '/' || COALESCE(agent_id, '?') || '/' "
    "|| COALESCE(automation_id, '?') || '/' || COALESCE(CAST(anchor_us AS TEXT), '?')"
)
# A rule that carries a count or a budget (an estimate alone limits nothing), or a goal rule whose
# floor counts across agents: the client checks such a lane under the goal's lock before it admits.
LIMITED_RULE = (
    "(max_starts IS NOT NULL OR budget_tokens IS NOT NULL OR budget_usd_micros IS NOT NULL"
    " OR (across_agents AND min_interval_us > 0 AND agent_id = '' AND automation_id = ''))"
)
_KEYS = tuple(c for c, _ in _LANE_KEYS)  # a start's or rule's scope columns
_GOAL_RANGE = "goal_id >= :g AND goal_id <= :g"  # the goal's rows (see the goal_anchor fact)
# The goal has a rule whose floor counts across its agents (a primary-key lookup, once per read).
_GOAL_ACROSS = (
    "EXISTS (SELECT 1 FROM fg_rules WHERE goal_id = :g AND agent_id = '' AND automation_id = '' AND across_agents AND min_interval_us > 0)"
)

FACTS = (
    # {rows}: the dialect's ``RULE_ROWS``. In bulk: every rule's row, matched to lanes by the client.
    Fact(
        "rules",
        "rules",
        "(SELECT {rows} FROM fg_rules WHERE " + RULES_WHERE + ")",
        "text",
        per_row=PerRow("fg_rules", _KEYS, tuple(c for c in RULE_COLUMNS if c not in _KEYS), grouped=False),
    ),
    # In bulk, the same subquery: its parameter is the read's, not a lane's.
    Fact("turn", "turn", "(SELECT " + TURN_TEXT + " FROM fg_starts WHERE turn_id = :t)", "text"),
    latest("agent_anchor", "ag", "anchor_us", _LANE_KEYS[:2], MAX_US)._replace(
        # On a relaxed store a start without an agent could be this agent's last start, so a goal
        # or agent floor counts from it too (in bulk: the goal's group of starts without an agent).
        also="SELECT anchor_us AS v FROM fg_starts WHERE goal_id = :g AND agent_id IS NULL",
    ),
    latest("lane_anchor", "ln", "anchor_us", _LANE_KEYS, MAX_US),
    latest("lane_trigger", "ln_tr", "trigger_us", _LANE_KEYS, MAX_US),
    matching("duplicate", "dup", "turn_id", _LANE_KEYS, ("trigger_us", "tr")),
    # The applicable rules that carry a count or budget: when any does, the client checks them
    # (``admission._limit_check``) and decides again with what it found as ``:lim``.
    Fact(
        "limited",
        "limited",
        "(SELECT COUNT(*) FROM fg_rules WHERE " + RULES_WHERE + " AND " + LIMITED_RULE + ")",
        "bigint",
        per_row=PerRow("fg_rules", _KEYS, ("CASE WHEN " + LIMITED_RULE + " THEN 1 ELSE 0 END",), grouped=False),
    ),
    Fact("limit_code", "lim", "CAST(:lim AS INTEGER)", "integer"),
    # The goal's latest start over all its agents (index ix_fg_starts_goal_anchor), which a goal floor
    # across agents counts from. Written as a range ordered by (goal_id, anchor_us) so that only that
    # index gives its order: as an equality, PostgreSQL may walk ix_fg_starts_anchor backwards through
    # every goal's newer starts instead (its estimate assumes this goal's are spread evenly). On a
    # relaxed store a start without an anchor is skipped (PostgreSQL sorts its NULL first). Read only
    # for a goal with such a rule (NULL otherwise: other goals neither pay for it nor fail on another
    # agent's damaged anchor). In bulk: the largest of the goal's agent anchors (``_facts.goal_anchors``).
    Fact(
        "goal_anchor",
        "gl",
        f"(SELECT anchor_us FROM fg_starts WHERE {_GOAL_RANGE} AND {_GOAL_ACROSS} ORDER BY goal_id DESC, anchor_us DESC LIMIT 1)",
        "bigint",
        guarded=(
            f"(SELECT anchor_us FROM fg_starts WHERE {_GOAL_RANGE} AND anchor_us IS NOT NULL AND {_GOAL_ACROSS}"
            " ORDER BY goal_id DESC, anchor_us DESC LIMIT 1)"
        ),
        bound=MAX_US,
    ),
    # Only on a store whose NOT NULL constraints were dropped (a hand rebuild; the planners cannot use
    # an index for IS NULL on a NOT NULL column, and such a row cannot exist there). A start missing
    # a key or time the decision counts from would be skipped by the reads above, so the floor would
    # not count it: any such row that could be this agent's makes the state unavailable. Each leg is
    # an empty range of an index. A start without an agent holds every agent's lane of its
    # automation (and the whole goal when its automation or anchor is missing too).
    Fact(
        "damaged",
        "damaged",
        "NULL",
        "integer",
        guarded=(
            "(SELECT 1 FROM fg_starts WHERE goal_id IS NULL"
            " UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = :g AND agent_id IS NULL"
            " AND (automation_id IS NULL OR automation_id = :x OR anchor_us IS NULL)"
            " UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = :g AND agent_id = :a AND anchor_us IS NULL"
            " UNION ALL SELECT 1 FROM fg_starts WHERE goal_id = :g AND agent_id = :a AND automation_id IS NULL"
            " UNION ALL SELECT 1 FROM fg_starts WHERE " + _LANE + " AND trigger_us IS NULL LIMIT 1)"
        ),
        # In bulk: every start the legs above look for, matched to lanes by ``_facts._damages``.
        per_row=PerRow(
            "fg_starts",
            _KEYS,
            ("anchor_us IS NULL", "trigger_us IS NULL"),
            grouped=False,
            where="goal_id IS NULL OR agent_id IS NULL OR automation_id IS NULL OR anchor_us IS NULL OR trigger_us IS NULL",
        ),
    ),
)
FACT = {f.name: f for f in FACTS}
# The time facts, with their bounds, in the order the decoder names a bad one.
TIMED = tuple(f for f in FACTS if f.bound is not None)

_PARAM = re.compile(r":(\w+)")


def server_sql(sql: str) -> str:
    """``sql`` with its ``:name`` parameters as the function's ``p_name`` arguments."""
    return _PARAM.sub(r"p_\1", sql)
