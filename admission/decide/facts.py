"""The facts one decision reads, each declared once.

A ``Fact`` names one value of a lane (its column in the hot statement and in PostgreSQL's
``fg_facts``), the SQLAlchemy Core expression that reads it (a scalar subquery over the tables of
``admission._schema`` and the parameters of ``_sql``: ``:g`` goal, ``:a`` agent, ``:x`` lane,
``:xr`` lane or a placeholder no rule has, ``:t`` turn, ``:tr`` trigger), its decoder, its form on
a store rebuilt without its NOT NULL constraints, its PostgreSQL type and, for a time, its
fail-closed bound: a stored value outside ``0 <= v < bound`` is corrupt state and the lane is
unavailable, never eligible, and its per-row form for the bulk read of many lanes.
``admission._facts`` builds the client's statements (per lane and in bulk) from these
declarations, ``render`` the server function, each compiled once per dialect (``_sql.compiled``);
``Facts`` is their decoded value. Rules and the turn travel as rows: per lane JSON arrays
(``RULE_COLUMNS``, ``TURN_COLUMNS``), in bulk one result row per rule.

A plain fact names its ``Facts`` field (``Fact.field``): the client's decoders (per lane and in
bulk) put its decoded value there, and nothing else names it. ``Facts`` stays a typed NamedTuple
(the checks read its attributes under mypy); ``field_problems`` holds it and ``FACTS`` together, and
this module refuses to load when they disagree (a field no fact fills, a fact naming no field).

To add a fact: one ``Fact`` in ``FACTS`` (its expression, type, decoder, bound, per-row form and
``field``) and that field in ``Facts``, both here; then the checks that read it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from enum import Enum, IntEnum
from typing import Any, NamedTuple

from sqlalchemy import Integer, Table, and_, case, cast, func, null, or_, select, union_all
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import FromClause, Select

from .._schema import rules as _rules
from .._schema import starts as _starts
from ..errors import CorruptState
from ._sql import EMPTY, LIM, ONE, TR, XR, ZERO, A, G, T, X, json_row, json_rows
from .floors import MAX_US, EffectiveFloor


class Phase(str, Enum):
    """A start's phase: reserved by admission, then confirmed by the launch."""

    RESERVED = "reserved"
    CONFIRMED = "confirmed"


class Facts(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    """One lane's decoded facts."""

    # Filled from the composite facts (``COMPOSITE_FIELDS``): the rules and the turn's start.
    floor: EffectiveFloor
    turn_phase: Phase | None  # None: this turn id has no start
    turn_lane: str | None
    turn_anchor_us: int | None
    agent_anchor_us: int | None
    lane_anchor_us: int | None
    lane_trigger_us: int | None
    duplicate_turn: str | None  # a start of this lane with the request's trigger
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


_LIMIT_CODES = tuple(LimitCode)


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


Decoder = Callable[[Any, str], Any]  # a stored value and what it belongs to -> its decoded value


class PerRow(NamedTuple):
    """A fact's per-row form, for the bulk read of many lanes: the fact's rows of ``table`` with
    the columns its subquery matches to the lane (``keys``) and its ``values``: aggregates per group
    of ``keys`` when ``grouped``, else one row per stored row (the client matches rows to lanes)."""

    table: Table
    keys: tuple[str, ...]
    values: tuple[ColumnElement[Any], ...]
    grouped: bool = True
    where: ColumnElement[bool] | None = None  # only the rows that hold this (no parameters)


class Fact(NamedTuple):
    """One fact of a lane (see the module docstring)."""

    name: str  # the column of fg_facts, and of the facts the checks' SQL reads as ``f.<short>``
    short: str  # its name inside the function's row (``f.ag``), which the checks' SQL uses
    expr: ColumnElement[Any]  # a scalar over the decision's parameters
    pg_type: str
    decode: Decoder | None = None  # its value checked (raises ``CorruptState``); None: the caller's
    bound: int | None = None  # a stored time: valid below this bound, not negative
    guarded: ColumnElement[Any] | None = None  # its form on a relaxed store (None: ``expr``, with ``also``)
    # On a relaxed store, more values it may take (a SELECT of column ``v``): the largest counts.
    also: Select[Any] | None = None
    per_row: PerRow | None = None  # its form in the bulk read (None: read there as ``expr``, or not)
    # Its value as an aggregate over the applicable rules' rows (given the rules table or an alias
    # of it), when it is one (``expr`` is then that aggregate over ``rules_where``, ``_over_rules``):
    # the per-lane read and the server function take it from their one read of the rules instead
    # of reading them again. None: ``expr`` everywhere.
    of_rules: Callable[[Any], ColumnElement[Any]] | None = None
    # The ``Facts`` field its decoded value fills (a plain fact); None: a composite fact the client
    # takes apart into several fields (``COMPOSITE_FIELDS``) or a guard that fills none.
    field: str | None = None
    # A parameter echoed (the server function reads it as a fact of its row): the client's own
    # statements do not send it back (a NULL column) and take the caller's value.
    echo: bool = False

    def relaxed(self) -> ColumnElement[Any]:
        """Its scalar on a relaxed store (the client's form)."""
        if self.guarded is not None:
            return self.guarded
        if self.also is not None:
            u = union_all(select(self.expr.label("v")), self.also).subquery("u")
            return select(func.max(u.c.v)).scalar_subquery()
        return self.expr


def scalar(statement: Select[Any]) -> ColumnElement[Any]:
    """``statement`` as a scalar subquery that never correlates to an enclosing statement."""
    return statement.correlate(None).scalar_subquery()


def first_row(statement: Select[Any]) -> Select[Any]:
    """``statement``'s first row (LIMIT 1; the OFFSET 0 is SQLite's spelling of no offset, kept on
    both dialects as constants rather than parameters)."""
    return statement.limit(ONE).offset(ZERO)


# The lane's key columns, each matched to its parameter.
_LANE_KEYS = (("goal_id", G), ("agent_id", A), ("automation_id", X))
Keys = tuple[tuple[str, ColumnElement[Any]], ...]


def _match(table: Table, keys: Keys) -> list[ColumnElement[bool]]:
    return [table.c[column] == param for column, param in keys]


def bounded_time(name: str, bound: int) -> Decoder:
    """The decoder of a stored time: None, or an int in ``0 <= v < bound``."""

    def decode(value: Any, where: str) -> int | None:
        if value is not None and (type(value) is not int or not 0 <= value < bound):
            raise CorruptState(f"malformed {name} time for {where}: {value!r}")
        return value

    return decode


def _limit_count(value: Any, where: str) -> int:
    """The ``limited`` fact's decoder: a count, never NULL or negative."""
    if type(value) is not int or value < 0:
        raise CorruptState(f"malformed limit count for {where}: {value!r}")
    return value


def _limit_code(value: Any, where: str) -> int | None:
    """The ``limit_code`` fact's decoder: None (not checked) or a ``LimitCode``."""
    if value is not None and value not in _LIMIT_CODES:
        raise CorruptState(f"malformed limit code for {where}: {value!r}")
    return value if type(value) is int else None


def _ranged(keys: Keys) -> list[ColumnElement[bool]]:
    """``keys`` matched to their parameters, the last as a range of one value: with ``_order``,
    only the index on exactly these columns gives the order asked for, so a planner without
    statistics (a new store, or a generic plan made while the table was small) does not pick an
    index on fewer of them and filter the rest (O(history) per decision: every start of the goal
    searched for one lane's trigger)."""
    *equal, (last, param) = keys
    return [*_match(_starts, tuple(equal)), _starts.c[last] >= param, _starts.c[last] <= param]


def _order(keys: Keys, *then: ColumnElement[Any]) -> list[ColumnElement[Any]]:
    """The order ``_ranged``'s index gives, walked backwards: its last key column, then ``then``."""
    return [_starts.c[keys[-1][0]].desc(), *(c.desc() for c in then)]


def latest(name: str, short: str, column: str, keys: Keys, bound: int, field: str) -> Fact:
    """The fact that is the largest ``column`` of the starts matching ``keys``: per lane its
    index walked backwards (ORDER BY ... LIMIT 1 rather than MAX, so every planner does), in bulk
    MAX per group (equal wherever no NULL is present; a NULL there is a damaged row the guard
    reports)."""
    col = _starts.c[column]
    expr = scalar(first_row(select(col).where(*_ranged(keys)).order_by(*_order(keys, col))))
    per_row = PerRow(_starts, tuple(c for c, _ in keys), (func.max(col),))
    return Fact(name, short, expr, "bigint", bounded_time(name.replace("_", " "), bound), bound, per_row=per_row, field=field)


def matching(name: str, short: str, column: str, keys: Keys, on: tuple[str, ColumnElement[Any]], field: str) -> Fact:
    """The fact that is ``column`` of the one start matching ``keys`` whose ``on`` column equals its
    parameter (a unique index holds it to one): in bulk the MAX of its group's matching rows."""
    col, test = _starts.c[column], _starts.c[on[0]] == on[1]
    expr = scalar(first_row(select(col).where(*_ranged((*keys, on))).order_by(*_order((*keys, on)))))
    per_row = PerRow(_starts, tuple(c for c, _ in keys), (func.max(case((test, col))),))
    return Fact(name, short, expr, "text", per_row=per_row, field=field)


def rules_where(r: FromClause) -> ColumnElement[bool]:
    """The rules of ``r`` that may apply to a lane: agent_id IN ('', :a) and automation_id IN ('',
    :xr). A rule whose scope ids are NULL could be this agent's: it is read too, and fails the decoder."""
    return (
        (r.c.goal_id == G)
        & or_(r.c.agent_id.in_([EMPTY, A]), r.c.agent_id.is_(None))
        & or_(r.c.automation_id.in_([EMPTY, XR]), r.c.automation_id.is_(None))
    )


# One rule as the decision reads it: a row of these columns (``_facts.rule_row`` decodes it, typed).
RULE_COLUMNS = ("agent_id", "automation_id", "min_interval_us", "revision", "across_agents")
# The turn's start as the decision reads it: a row of these columns (``turn_row`` decodes it).
TURN_COLUMNS = ("phase", "goal_id", "agent_id", "automation_id", "anchor_us")


def goal_across(r: FromClause) -> ColumnElement[bool]:
    """A rule of ``r`` that is a goal rule whose floor counts across the goal's agents."""
    return and_(r.c.agent_id == EMPTY, r.c.automation_id == EMPTY, r.c.across_agents, r.c.min_interval_us > ZERO)


def limited_rule(r: Any) -> ColumnElement[bool]:
    """A rule of ``r`` that carries a count or a budget (an estimate alone limits nothing): the
    client checks such a lane's limits before it admits. A goal floor across agents alone is not
    one: the facts hold it (``goal_anchor``), and the locked admission takes the goal's lock for it
    (``render.admit_function``), so its lanes cost what a plain floor's do."""
    return or_(r.c.max_starts.is_not(None), r.c.budget_tokens.is_not(None), r.c.budget_usd_micros.is_not(None))


def rules_json(r: Any) -> ColumnElement[Any]:
    """The ``rules`` fact over the applicable rules of ``r`` (the table or an alias): their rows."""
    return json_rows(*(r.c[c] for c in RULE_COLUMNS))


def _limited_count(r: Any) -> ColumnElement[Any]:
    """The ``limited`` fact over the applicable rules of ``r``: how many carry a count or budget."""
    return func.count().filter(limited_rule(r))


def _over_rules(aggregate: Callable[[Any], ColumnElement[Any]]) -> ColumnElement[Any]:
    """A fact that is ``aggregate`` over the applicable rules, as a scalar of its own (``expr``;
    its ``of_rules`` form is ``aggregate`` itself, read with the other such facts at once)."""
    return scalar(select(aggregate(_rules)).where(rules_where(_rules)))


class TurnFacts(NamedTuple):
    """The ``turn`` fact decoded: the turn's start, when it has one."""

    phase: Phase
    lane: str  # goal/agent/automation
    anchor_us: int


def turn_row(value: Any, turn_id: str) -> TurnFacts | None:
    """The ``turn`` fact: NULL (this turn has no start) or a JSON array of ``TURN_COLUMNS``; any
    other value (NULL ids, wrong types or length, an unknown phase, an anchor out of bounds) raises
    ``CorruptState``. A start without a phase is older or hand-edited data: an attempted start."""
    if value is None:
        return None
    try:
        row = json.loads(value) if type(value) is str else None
    except ValueError:
        row = None
    if type(row) is not list or len(row) != len(TURN_COLUMNS):
        raise CorruptState(f"malformed start record {turn_id!r}")
    phase_text, goal, agent, lane, anchor = row
    if not (type(goal) is str and type(agent) is str and type(lane) is str and type(anchor) is int):
        raise CorruptState(f"malformed start record {turn_id!r}")
    if phase_text is None or phase_text == "":
        phase = Phase.CONFIRMED
    else:
        try:
            phase = Phase(phase_text)
        except ValueError:
            raise CorruptState(f"start {turn_id!r} has an unknown phase {phase_text!r}") from None
    if not 0 <= anchor < MAX_US:
        raise CorruptState(f"malformed anchor time for start {turn_id!r}: {anchor!r}")
    return TurnFacts(phase, goal + "/" + agent + "/" + lane, anchor)


_KEYS = tuple(c for c, _ in _LANE_KEYS)  # a start's or rule's scope columns
_s = _starts.c
# Only on a store whose NOT NULL constraints were dropped (a hand rebuild; the planners cannot use
# an index for IS NULL on a NOT NULL column, and such a row cannot exist there). A start missing
# a key or time the decision counts from would be skipped by the reads above, so the floor would
# not count it: any such row that could be this agent's makes the state unavailable. Each leg is
# an empty range of an index. A start without an agent holds every agent's lane of its
# automation (and the whole goal when its automation or anchor is missing too).
_DAMAGED = (
    union_all(
        select(ONE).where(_s.goal_id.is_(None)),
        select(ONE).where(
            _s.goal_id == G, _s.agent_id.is_(None), or_(_s.automation_id.is_(None), _s.automation_id == X, _s.anchor_us.is_(None))
        ),
        select(ONE).where(_s.goal_id == G, _s.agent_id == A, _s.anchor_us.is_(None)),
        select(ONE).where(_s.goal_id == G, _s.agent_id == A, _s.automation_id.is_(None)),
        select(ONE).where(*_match(_starts, _LANE_KEYS), _s.trigger_us.is_(None)),
    )
    .limit(ONE)
    .offset(ZERO)
    .scalar_subquery()
)


def _goal_anchor(*, relaxed: bool) -> ColumnElement[Any]:
    """The ``goal_anchor`` fact's scalar. Written as a range ordered by (goal_id, anchor_us) so that
    only that index gives its order: as an equality, PostgreSQL may walk ix_fg_starts_anchor backwards
    through every goal's newer starts instead (its estimate assumes this goal's are spread evenly).
    On a relaxed store a start without an anchor is skipped (PostgreSQL sorts its NULL first).
    The goal's rule is asked first, as a CASE, not as a condition of the starts' search: SQLite
    tests such a condition on each start of the goal, so a goal without the rule walked all of its
    starts (O(history) per decision) and found none."""
    across = select(ONE).where(_rules.c.goal_id == G, goal_across(_rules)).correlate(None).exists()
    where = [_s.goal_id >= G, _s.goal_id <= G, *([_s.anchor_us.is_not(None)] if relaxed else [])]
    latest = scalar(first_row(select(_s.anchor_us).where(*where).order_by(_s.goal_id.desc(), _s.anchor_us.desc())))
    return case((across, latest), else_=null())


FACTS = (
    # In bulk: every rule's row, matched to lanes by the client.
    Fact(
        "rules",
        "rules",
        _over_rules(rules_json),
        "text",
        per_row=PerRow(_rules, _KEYS, tuple(_rules.c[c] for c in RULE_COLUMNS if c not in _KEYS), grouped=False),
        of_rules=rules_json,
    ),
    # In bulk, the same subquery: its parameter is the read's, not a lane's.
    Fact("turn", "turn", scalar(select(json_row(*(_s[c] for c in TURN_COLUMNS))).where(_s.turn_id == T)), "text", turn_row),
    latest("agent_anchor", "ag", "anchor_us", _LANE_KEYS[:2], MAX_US, "agent_anchor_us")._replace(
        # On a relaxed store a start without an agent could be this agent's last start, so a goal
        # or agent floor counts from it too (in bulk: the goal's group of starts without an agent).
        also=select(_s.anchor_us.label("v")).where(_s.goal_id == G, _s.agent_id.is_(None)),
    ),
    latest("lane_anchor", "ln", "anchor_us", _LANE_KEYS, MAX_US, "lane_anchor_us"),
    latest("lane_trigger", "ln_tr", "trigger_us", _LANE_KEYS, MAX_US, "lane_trigger_us"),
    matching("duplicate", "dup", "turn_id", _LANE_KEYS, ("trigger_us", TR), "duplicate_turn"),
    # The applicable rules that carry a count or budget: when any does, the client checks them
    # (``admission._limit_check``) and decides again with what it found as ``:lim``.
    Fact(
        "limited",
        "limited",
        _over_rules(_limited_count),
        "bigint",
        _limit_count,
        per_row=PerRow(_rules, _KEYS, (case((limited_rule(_rules), ONE), else_=ZERO),), grouped=False),
        field="limited",
        of_rules=_limited_count,
    ),
    Fact("limit_code", "lim", cast(LIM, Integer), "integer", _limit_code, field="limit_code", echo=True),
    # The goal's latest start over all its agents (index ix_fg_starts_goal_anchor), which a goal floor
    # across agents counts from. Read only for a goal with such a rule (NULL otherwise: other goals
    # neither pay for it nor fail on another agent's damaged anchor). In bulk: the largest of the
    # goal's agent anchors (``_facts.goal_anchors``).
    Fact(
        "goal_anchor",
        "gl",
        _goal_anchor(relaxed=False),
        "bigint",
        bounded_time("goal anchor", MAX_US),
        MAX_US,
        guarded=_goal_anchor(relaxed=True),
        field="goal_anchor_us",
    ),
    Fact(
        "damaged",
        "damaged",
        null(),
        "integer",
        guarded=_DAMAGED,
        # In bulk: every start the legs above look for, matched to lanes by ``_facts._damages``.
        per_row=PerRow(
            _starts,
            _KEYS,
            (_s.anchor_us.is_(None), _s.trigger_us.is_(None)),
            grouped=False,
            where=or_(*(_s[c].is_(None) for c in ("goal_id", "agent_id", "automation_id", "anchor_us", "trigger_us"))),
        ),
    ),
)
FACT = {f.name: f for f in FACTS}
# The time facts, with their bounds, in the order the decoder names a bad one.
TIMED = tuple(f for f in FACTS if f.bound is not None)
# The facts each filling one ``Facts`` field with its decoded value.
PLAIN = tuple(f for f in FACTS if f.field is not None)

# The ``Facts`` fields no plain fact fills: taken apart from the ``rules`` fact (the floor and its
# microseconds) and the ``turn`` fact (``TurnFacts``), and ``limits``, the states the client's
# check of counts and budgets found (not read by the statement).
COMPOSITE_FIELDS = (
    "floor",
    "agent_floor_us",
    "lane_floor_us",
    "goal_floor_us",
    "turn_phase",
    "turn_lane",
    "turn_anchor_us",
    "limits",
)


def field_problems(facts: tuple[Fact, ...], fields: tuple[str, ...], composite: tuple[str, ...] = COMPOSITE_FIELDS) -> list[str]:
    """Where ``facts`` and the fields of ``Facts`` disagree (empty: each field has exactly one
    source): a fact naming no field of ``Facts`` or one another fact fills, a field nothing fills."""
    problems: list[str] = []
    seen: set[str] = set(composite)
    for f in facts:
        if f.field is None:
            continue
        if f.field not in fields:
            problems.append(f"fact {f.name!r} fills {f.field!r}, which is not a field of Facts")
        elif f.field in seen:
            problems.append(f"fact {f.name!r} fills {f.field!r}, which something else fills too")
        seen.add(f.field)
    problems += [f"Facts field {name!r} is filled by no fact (declare it as a fact's field)" for name in fields if name not in seen]
    return problems


_PROBLEMS = field_problems(FACTS, Facts._fields)
if _PROBLEMS:  # a declaration error: refuse to load rather than decide with a field left at its default
    raise ImportError("; ".join(_PROBLEMS))
