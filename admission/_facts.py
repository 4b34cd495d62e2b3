"""The facts one admission decision needs, read in a single statement.

Every value is a scalar subquery over a primary key or an index, so a decision costs one round
trip. Values are type-checked on the way out: SQLite keeps whatever a hand edit wrote, and any
value that is not what floorgate writes makes the state unavailable (fail closed).
"""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import (
    case,
    func,
    insert,
    literal_column,
    null,
    or_,
    select,
    union_all,
)
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Select

from ._schema import rules as _rules_table
from ._schema import starts as _starts_table
from ._types import decode_us
from .decide._sql import (
    DIALECTS,
    EMPTY,
    KIND,
    NOW,
    ONE,
    REASON,
    TR,
    ZERO,
    A,
    G,
    T,
    X,
    compiled,
    params_of,
    text_value,
)
from .decide.facts import FACT, FACTS, PLAIN, RULE_COLUMNS, Decoder, Fact, Facts, PerRow, bounded_time, rules_where, turn_row
from .decide.floors import EffectiveFloor, Folded, RuleRef, combine, effective_floor, floor_us, fold
from .decisions import Phase, StartKind, StartRecord
from .errors import CorruptState, StoreUnavailable
from .policies import rule_ref
from .store import DriverTx

_GUARD = FACT["damaged"].guarded
if _GUARD is None:  # pragma: no cover - declared in decide.facts
    raise ImportError("the damaged fact has no relaxed-store form")
# SQLite only, on every store: a key column holds whatever a hand edit wrote, and a BLOB never
# equals the text it is compared with, so a start or rule with a BLOB key would be skipped as NULL
# ones are. BLOBs sort after all text, so each leg is an empty range of an index on a sound store.
_BLOB: ColumnElement[Any] = literal_column("x''")
_s, _r = _starts_table.c, _rules_table.c
_BLOB_KEYS = (
    union_all(
        select(ONE).where(_s.goal_id >= _BLOB),
        select(ONE).where(_s.goal_id == G, _s.agent_id >= _BLOB),
        select(ONE).where(_s.goal_id == G, _s.agent_id == A, _s.automation_id >= _BLOB),
        select(ONE).where(_r.goal_id >= _BLOB),
        select(ONE).where(_r.goal_id == G, _r.agent_id >= _BLOB),
        select(ONE).where(_r.goal_id == G, _r.agent_id.in_([EMPTY, A]), _r.automation_id >= _BLOB),
    )
    .limit(ONE)
    .offset(ZERO)
    .scalar_subquery()
)


def _read(*, relaxed: bool, guard: ColumnElement[Any]) -> Select[Any]:
    """The per-lane read: a column per fact in ``FACTS``' order (the plain store's form or a relaxed
    store's), the ``damaged`` fact's column being ``guard`` (NULL: nothing damaged). The facts that
    are aggregates over the applicable rules (``Fact.of_rules``, with no other form on a relaxed
    store) come from one read of those rules, a one-row derived table, instead of one each."""
    r = _rules_table.alias("ru_rules")
    rolled = {f.name: f.of_rules(r).label(f.short) for f in FACTS if f.of_rules is not None and f.guarded is None and f.also is None}
    ru = select(*rolled.values()).where(rules_where(r)).subquery("ru")

    def column(f: Fact) -> ColumnElement[Any]:
        if f.name == "damaged":
            return guard
        if f.echo:  # the caller's own value (``read_facts``)
            return null()
        if f.name in rolled:
            return ru.c[f.short]
        return f.relaxed() if relaxed else f.expr

    return select(*(column(f) for f in FACTS)).select_from(ru)


_STATEMENTS = {
    # (dialect, relaxed)
    ("postgresql", False): _read(relaxed=False, guard=null()),
    ("postgresql", True): _read(relaxed=True, guard=_GUARD),
    ("sqlite", False): _read(relaxed=False, guard=_BLOB_KEYS),
    ("sqlite", True): _read(relaxed=True, guard=func.coalesce(_GUARD, _BLOB_KEYS)),
}


def facts_statement(dialect: str, relaxed: bool) -> Select[Any]:
    """The per-lane read as Core (``FACTS_SQL``, or on a relaxed store ``GUARDED_FACTS_SQL``), for a
    statement that reads more after the facts (``_limit_read``)."""
    return _STATEMENTS[(dialect, relaxed)]


FACTS_SQL = {d: compiled(_STATEMENTS[(d, False)], d) for d in DIALECTS}
GUARDED_FACTS_SQL = {d: compiled(_STATEMENTS[(d, True)], d) for d in DIALECTS}

# A new start, reserved (the hot path's insert on SQLite).
_INSERT_START = insert(_starts_table).values(
    turn_id=T,
    goal_id=G,
    agent_id=A,
    automation_id=X,
    trigger_us=TR,
    anchor_us=NOW,
    phase=text_value("reserved"),
    kind=KIND,
    manual_reason=REASON,
    confirmed_at_us=null(),
)
INSERT_START_SQL = compiled(_INSERT_START, "sqlite")


START_COLUMNS = ("turn_id goal_id agent_id automation_id trigger_us anchor_us phase kind manual_reason confirmed_at_us").split()
StartRow = namedtuple("StartRow", START_COLUMNS)

CONFIRM_SQL = (
    "UPDATE fg_starts SET phase = 'confirmed', confirmed_at_us = :now WHERE turn_id = :t AND phase = 'reserved' "
    "RETURNING " + ", ".join(START_COLUMNS)
)


def start_from_row(row) -> StartRecord:  # type: ignore[no-untyped-def]
    """Decode a starts row as read undecoded (the hot path's RETURNING, or ``raw_columns``), with
    the column type's own time decoder; malformed values raise ``CorruptState`` (fail closed)."""
    try:
        phase_text = row.phase
        if not isinstance(row.manual_reason, (str, type(None))):
            raise ValueError("manual_reason must be text")
        if not all(isinstance(v, str) for v in (row.turn_id, row.goal_id, row.agent_id, row.automation_id)):
            raise ValueError("its ids must be text")
        # Every field is checked or converted above; skip pydantic's second pass.
        return StartRecord.model_construct(
            turn_id=row.turn_id,
            goal_id=row.goal_id,
            agent_id=row.agent_id,
            automation_id=row.automation_id or None,
            trigger_time=decode_us(row.trigger_us),
            anchor_at=decode_us(row.anchor_us),
            # A start without a phase is older or hand-edited data: read it as an attempted start.
            phase=Phase(phase_text) if phase_text is not None else Phase.CONFIRMED,
            phase_recorded=phase_text is not None,
            kind=StartKind(row.kind),
            manual_reason=row.manual_reason,
            confirmed_at=decode_us(row.confirmed_at_us) if row.confirmed_at_us is not None else None,
        )
    except (CorruptState, ValueError, TypeError, OverflowError) as exc:
        raise CorruptState(f"malformed start record {row.turn_id!r}: {exc}") from None


# Ids never contain "/", so this placeholder matches no automation rule when no automation is named.
_NO_LANE = "/"


def rule_row(row: object, goal: str) -> RuleRef:
    """One applicable rule from its row (``RULE_COLUMNS``: agent, automation, floor, revision, across, as
    the hot statement's JSON array or the bulk read's columns hold them), with typed checks: a NULL
    scope id, or any value floorgate would not have written, raises ``StoreUnavailable``."""
    if not isinstance(row, (list, tuple)) or len(row) != len(RULE_COLUMNS):
        raise StoreUnavailable(f"malformed rule under goal {goal!r}: {row!r}")
    rule_agent, rule_lane, us, rev, across = row
    if type(rule_agent) is not str or type(rule_lane) is not str:  # NULL (or, on SQLite, any other type)
        raise StoreUnavailable(f"malformed rule under goal {goal!r}: its scope is {rule_agent!r}/{rule_lane!r}")
    return rule_ref(goal, rule_agent, rule_lane, us, rev, across)


def rule_rows(rules: object, goal: str) -> list[RuleRef]:
    """The ``rules`` fact decoded: a JSON array of rule rows (NULL or ``[]``: no rule applies)."""
    if rules is None:
        return []
    try:
        rows = json.loads(rules) if type(rules) is str else None
    except ValueError:
        rows = None
    if type(rows) is not list:
        raise StoreUnavailable(f"malformed rules under goal {goal!r}: {rules!r}")
    return [rule_row(row, goal) for row in rows]


# Decoded floors by lane and rules fact (its text carries every rule's row, floor and revision
# included, so a changed rule is a new key): most decisions meet the rules of their last one.
# Values are frozen.
_FLOORS: dict[tuple[str, str, str | None, str | None], tuple[EffectiveFloor, int, int]] = {}
_FLOORS_KEPT = 4096


def _floor(rules: str | None, goal: str, agent: str, automation: str | None) -> tuple[EffectiveFloor, int, int]:
    key = (goal, agent, automation, rules)
    floor = _FLOORS.get(key)
    if floor is None:
        refs = rule_rows(rules, goal)
        floor = floor_us(combine(goal, agent, automation, refs))  # a malformed rule raised above: never kept
        if len(_FLOORS) >= _FLOORS_KEPT:
            _FLOORS.clear()
        _FLOORS[key] = floor
    return floor


def facts_params(goal: str, agent: str, automation: str | None, turn_id: str, trigger_us: int, lim: int | None = None) -> dict:  # type: ignore[type-arg]
    lane = automation or ""
    return {
        "lim": lim,
        "g": goal,
        "a": agent,
        "x": lane,
        "xr": automation if automation else _NO_LANE,
        "t": turn_id,
        "tr": trigger_us,
    }


def read_facts(tx: DriverTx, goal: str, agent: str, automation: str | None, turn_id: str, trigger_us: int, lim: int | None = None) -> Facts:
    """The lane's facts in one statement; ``lim``: what the client found checking its limits
    (``LimitCode``; None: not checked), the ``limit_code`` fact (not sent to the store and back)."""
    sql = (GUARDED_FACTS_SQL if tx.relaxed else FACTS_SQL)[tx.dialect]
    row = tx.row(sql, facts_params(goal, agent, automation, turn_id, trigger_us))
    if row is None:  # pragma: no cover - a SELECT of scalars always returns one row
        raise StoreUnavailable("the store returned no row for the admission facts")
    facts = decode_facts(row, goal, agent, automation, turn_id)
    return facts if lim is None else facts._replace(limit_code=lim)


def decode_facts(row: Sequence[Any], goal: str, agent: str, automation: str | None, turn_id: str) -> Facts:
    """The facts from their encoding in one row (this module's read, or PostgreSQL's ``RESERVE_SQL``),
    a column per fact in ``FACTS``' order (any columns after them unread); any value floorgate would not have written raises
    ``StoreUnavailable`` (fail closed)."""
    values = _start_values(row, goal, agent, turn_id)  # checked before the rules, as always
    floor, agent_us, lane_us = _floor(row[_RULES_AT], goal, agent, automation)
    return _finish(values, row, floor, agent_us, lane_us, goal + "/" + agent)


# -- each plain fact into its ``Facts`` field (``decide.facts.PLAIN``), per lane and in bulk -------
_AT = {f.name: i for i, f in enumerate(FACTS)}  # a fact's column in the row
_SLOT = {name: i for i, name in enumerate(Facts._fields)}  # a field's place in ``Facts``


def _slot(f: Fact) -> int:
    if f.field is None:  # pragma: no cover - PLAIN holds the facts with a field only
        raise ImportError(f"fact {f.name!r} fills no field")
    return _SLOT[f.field]


def _timed(f: Fact) -> tuple[int, int, int, Decoder]:
    """A time fact's column, field, bound and decoder (which names it when its value is bad)."""
    if f.bound is None:  # pragma: no cover - called for TIMED only
        raise ImportError(f"fact {f.name!r} has no bound")
    return _AT[f.name], _slot(f), f.bound, f.decode if f.decode is not None else bounded_time(f.name, f.bound)


# The time facts, checked first and in ``TIMED``' order (the usual row calls no decoder); the other
# plain facts after the rules, each through its decoder (None: the value as read).
_TIMES = tuple(_timed(f) for f in PLAIN if f.bound is not None)
_OTHERS = tuple((_AT[f.name], _slot(f), f.decode) for f in PLAIN if f.bound is None)
_RULES_AT, _TURN_AT, _DAMAGED_AT = _AT["rules"], _AT["turn"], _AT["damaged"]
_TURN_SLOTS = (_SLOT["turn_phase"], _SLOT["turn_lane"], _SLOT["turn_anchor_us"])
_FLOOR_SLOT, _AGENT_FLOOR_SLOT, _LANE_FLOOR_SLOT, _GOAL_FLOOR_SLOT = (
    _SLOT[n] for n in ("floor", "agent_floor_us", "lane_floor_us", "goal_floor_us")
)
_BLANK: list[Any] = [None] * len(Facts._fields)
_BLANK[_SLOT["limits"]] = ()  # the client's check fills it (``_limit_check``); none here
_ONE_US = timedelta(microseconds=1)


def _start_values(row: Sequence[Any], goal: str, agent: str, turn_id: str) -> list[Any]:
    """``Facts``' fields as a list, with the guard and the turn checked and the time facts decoded;
    ``_finish`` adds the floor and the other facts."""
    if row[_DAMAGED_AT] is not None:
        raise StoreUnavailable(f"a start or rule under {goal}/{agent} has a missing or damaged goal, agent, automation, trigger or anchor")
    values = _BLANK.copy()
    turn = turn_row(row[_TURN_AT], turn_id)
    if turn is not None:
        values[_TURN_SLOTS[0]], values[_TURN_SLOTS[1]], values[_TURN_SLOTS[2]] = turn
    for at, slot, bound, decode in _TIMES:
        value = row[at]
        if value is not None and (type(value) is not int or not 0 <= value < bound):
            decode(value, f"{goal}/{agent}")  # raises ``CorruptState`` naming this fact
        values[slot] = value
    return values


def _finish(values: list[Any], row: Sequence[Any], floor: EffectiveFloor, agent_us: int, lane_us: int, where: str) -> Facts:
    """``Facts`` from ``_start_values``' list, the lane's floor and the other plain facts of ``row``."""
    values[_FLOOR_SLOT], values[_AGENT_FLOOR_SLOT], values[_LANE_FLOOR_SLOT] = floor, agent_us, lane_us
    values[_GOAL_FLOOR_SLOT] = floor.goal_floor // _ONE_US
    for at, slot, decode in _OTHERS:
        value = row[at]
        values[slot] = value if decode is None else decode(value, where)
    return _new_facts(Facts, values)


_new_facts = tuple.__new__  # every field is set above: NamedTuple's __new__ would take them one by one


# -- the facts of many lanes (readback of every automation) -----------------------------------
# The same values as ``read_facts`` with no turn and no trigger, for any number of lanes in a fixed
# number of statements, built from the facts' per-row forms (``decide.facts.PerRow``): the facts of
# one table and keys share a statement (every rule once; the latest anchors and trigger per agent
# and per lane by GROUP BY), and the turn is its own subquery.
Lane = tuple[str, str, str | None]


class _Read(NamedTuple):
    """Where the bulk read finds one fact: its statement (per dialect), key width and first value column."""

    sql: dict[str, str]
    params: tuple[str, ...]
    keys: int
    at: int


def _per_row_reads() -> dict[str, _Read]:
    groups: dict[tuple[Any, tuple[str, ...], bool, Any], list[tuple[str, PerRow]]] = {}
    for f in FACTS:
        if f.per_row is not None:
            p = f.per_row
            groups.setdefault((p.table, p.keys, p.grouped, p.where), []).append((f.name, p))
    reads: dict[str, _Read] = {}
    for (table, keys, grouped, where), members in groups.items():
        key_columns = [table.c[k] for k in keys]
        statement = select(*key_columns, *(v for _, p in members for v in p.values))
        if where is not None:
            statement = statement.where(where)
        statement = statement.group_by(*key_columns) if grouped else statement.order_by(*key_columns)
        sql = {d: compiled(statement, d) for d in DIALECTS}
        at = len(keys)
        for name, p in members:
            reads[name] = _Read(sql, params_of(statement, "sqlite"), len(keys), at)
            at += len(p.values)
    return reads


def _rule_at() -> tuple[int, ...]:
    """Where each of ``RULE_COLUMNS`` is in the rules' bulk statement."""
    read, p = _READS["rules"], FACT["rules"].per_row
    if p is None:  # pragma: no cover - declared in decide.facts
        raise ImportError("the rules fact has no per-row form")
    values = [getattr(v, "name", None) for v in p.values]
    return tuple(p.keys.index(c) if c in p.keys else read.at + values.index(c) for c in RULE_COLUMNS)


_READS = _per_row_reads()
_RULES, _LIMITED_READ = _READS["rules"], _READS["limited"]
_RULE_AT = _rule_at()
# In bulk a plain fact is found by its lane's key columns in its per-row read (grouped by them).
# These are computed instead, each where ``read_facts_many`` reads it: the count of limited rules
# (from the rules' rows), the limit code (readback checks no limits: None) and the goal anchor (the
# largest of the goal's agent anchors).
_OWN_IN_BULK = ("limited", "limit_code", "goal_anchor")
_LANE_COLUMNS = ("goal_id", "agent_id", "automation_id")  # a lane's key: (goal, agent, automation or '')
LaneKey = Callable[[tuple[str, str, str]], tuple[Any, ...]]


def _key_getter(at: tuple[int, ...]) -> LaneKey:
    """The key of a per-row read's rows, taken from a lane's (goal, agent, automation or '')."""
    if len(at) > 1:
        return itemgetter(*at)
    (i,) = at

    def one(lane: tuple[str, str, str]) -> tuple[Any, ...]:
        return (lane[i],)

    return one


def keyed_in_bulk(f: Fact) -> tuple[str, int, LaneKey]:
    """A plain fact's name, column and key getter in the bulk read; a fact whose per-row form is
    not grouped by columns of the lane cannot be matched to lanes there: ``ImportError``."""
    p = f.per_row
    if p is None or not p.grouped or not p.keys or not set(p.keys) <= set(_LANE_COLUMNS):
        raise ImportError(f"fact {f.name!r} needs a per-row form grouped by some of {_LANE_COLUMNS} for the bulk read")
    return f.name, _AT[f.name], _key_getter(tuple(_LANE_COLUMNS.index(k) for k in p.keys))


_KEYED = tuple(keyed_in_bulk(f) for f in PLAIN if f.name not in _OWN_IN_BULK)
_AG_AT, _GL_AT, _LIMITED_AT = _AT["agent_anchor"], _AT["goal_anchor"], _AT["limited"]
_MANY_TURN_SQL = {d: compiled(select(FACT["turn"].expr), d) for d in DIALECTS}

# ``_BLOB_KEYS`` for every lane at once: a BLOB key reads as NULL here, so ``_damages`` matches it
# to the lanes it could belong to, as the guard above does for NULL keys (SQLite only; one scan).
_IS_BLOB = text_value("blob")


def _blob_as_null(column: ColumnElement[Any], *also: ColumnElement[bool]) -> ColumnElement[Any]:
    return case((or_(func.typeof(column) == _IS_BLOB, *also), null()), else_=column)


def _many_blob(c: Any, *, goal_wide_as_null: bool) -> Any:
    # A goal-wide rule ('' agent) applies to every agent of its goal: its agent reads as NULL too.
    agent = _blob_as_null(c.agent_id, c.agent_id == EMPTY) if goal_wide_as_null else _blob_as_null(c.agent_id)
    # Its anchor reads as missing: a BLOB agent holds every lane of its goal (``_BLOB_KEYS``), which
    # is what ``_damages`` makes of a NULL agent whose anchor is missing.
    return select(_blob_as_null(c.goal_id), agent, _blob_as_null(c.automation_id), ONE, ZERO).where(
        or_(*(func.typeof(c[k]) == _IS_BLOB for k in ("goal_id", "agent_id", "automation_id")))
    )


_MANY_BLOB_SQL = compiled(union_all(_many_blob(_s, goal_wide_as_null=False), _many_blob(_r, goal_wide_as_null=True)), "sqlite")


def read_facts_many(tx: DriverTx, lanes: list[Lane], turn_id: str, trigger_us: int) -> dict[Lane, Facts | StoreUnavailable]:
    """``read_facts`` of every lane in ``lanes`` (one turn id and trigger for all), in four
    statements (one more on a relaxed store, one more on SQLite) whatever their number. A lane whose rows are damaged maps
    to its ``StoreUnavailable``, as ``read_facts`` of that lane alone would raise; the others stand."""
    params = {"tr": trigger_us}
    done: dict[str, list[tuple]] = {}  # type: ignore[type-arg]

    def rows(read: _Read) -> list[tuple]:  # type: ignore[type-arg]
        sql = read.sql[tx.dialect]
        found = done.get(sql)
        if found is None:
            found = done[sql] = tx.rows(sql, {k: params[k] for k in read.params})
        return found

    rules = rows(_RULES)
    turn_found = tx.row(_MANY_TURN_SQL[tx.dialect], {"t": turn_id})
    keyed = {name: {row[: r.keys]: row[r.at] for row in rows(r)} for name, _, _ in _KEYED for r in (_READS[name],)}
    damaged = list(rows(_READS["damaged"])) if tx.relaxed else []
    if tx.dialect == "sqlite":
        damaged += tx.rows(_MANY_BLOB_SQL, {})
    turn_text = turn_found[0] if turn_found is not None else None
    goal_anchor = goal_anchors(keyed["agent_anchor"])  # the goal anchor fact in bulk
    # The rules a lane's aggregate selects: agent_id IN ('', :a) and automation_id IN ('', :xr), or
    # NULL (which fails the decoder); kept in the statement's order.
    by_scope: dict[tuple[str, str, str], list[tuple[int, tuple, int]]] = {}  # type: ignore[type-arg]
    null_scoped: dict[str, list[tuple[int, str | None, str | None, tuple, int]]] = {}  # type: ignore[type-arg]
    for i, row in enumerate(rules):
        g, a, x = row[:3]
        rule, limited = tuple(row[at] for at in _RULE_AT), row[_LIMITED_READ.at]
        if a is None or x is None:
            null_scoped.setdefault(g, []).append((i, a, x, rule, limited))
        else:
            by_scope.setdefault((g, a, x), []).append((i, rule, limited))
    # The goals with a goal rule whose floor counts across agents (the goal anchor fact's condition).
    across = {g for (g, a, x), found in by_scope.items() if a == x == "" for _, rule, _ in found if _floor_across(rule)}
    out: dict[Lane, Facts | StoreUnavailable] = {}
    memo: dict[tuple[str, tuple], RuleRef] = {}  # type: ignore[type-arg]
    folds: dict[tuple[int, ...], Folded] = {}  # by the rules' identities (memo keeps them alive)
    for lane in lanes:
        goal, agent, automation = lane
        x, xr = automation or "", automation or _NO_LANE  # as ``facts_params``
        found = [r for key in {(goal, "", ""), (goal, "", xr), (goal, agent, ""), (goal, agent, xr)} for r in by_scope.get(key, ())]
        found += [
            (i, rule, limited)
            for i, a, r_x, rule, limited in null_scoped.get(goal, ())
            if (a is None or a in ("", agent)) and (r_x is None or r_x in ("", xr))
        ]
        # The lane's row, as ``read_facts`` reads it: a column per fact in ``FACTS``' order.
        lane_row: list[Any] = [None] * len(FACTS)
        lane_row[_TURN_AT] = turn_text
        lane_key = (goal, agent, x)
        for name, at, key_of in _KEYED:
            lane_row[at] = keyed[name].get(key_of(lane_key))
        if tx.relaxed:  # the agent anchor's ``also``: the goal's starts without an agent group under None
            lane_row[_AG_AT] = stored_max(lane_row[_AG_AT], keyed["agent_anchor"].get((goal, None)))
        lane_row[_DAMAGED_AT] = 1 if any(_damages(d, goal, agent, x) for d in damaged) else None
        try:
            lane_row[_GL_AT] = goal_anchor.get(goal) if goal in across else None  # as the fact: read for such a goal only
            values = _start_values(lane_row, goal, agent, turn_id)
            # ``_floor`` of the lane's rules, each rule decoded once for all lanes.
            refs = [_memo_rule_ref(memo, rule, goal) for _, rule, _ in sorted(found, key=_first)]
            key = tuple(map(id, refs))
            folded = folds.get(key)
            if folded is None:
                folded = folds[key] = fold(refs)
            floor, agent_us, lane_us = floor_us(effective_floor(goal, agent, automation, folded))
            lane_row[_LIMITED_AT] = sum(1 for *_, lim in found if lim)
            out[lane] = _finish(values, lane_row, floor, agent_us, lane_us, goal + "/" + agent)
        except StoreUnavailable as exc:
            out[lane] = exc
    return out


def _floor_across(rule: tuple) -> bool:  # type: ignore[type-arg]
    """Whether a goal rule's row (``RULE_COLUMNS``) sets a floor across agents (a damaged one fails its decoder)."""
    interval, across = rule[RULE_COLUMNS.index("min_interval_us")], rule[RULE_COLUMNS.index("across_agents")]
    return type(interval) is int and interval > 0 and (across is True or (type(across) is int and across == 1))


def _first(found: tuple) -> int:  # type: ignore[type-arg]
    return found[0]  # type: ignore[no-any-return]


def _memo_rule_ref(memo: dict[tuple[str, tuple], RuleRef], rule: tuple, goal: str) -> RuleRef:  # type: ignore[type-arg]
    ref = memo.get((goal, rule))
    if ref is None:
        ref = memo[(goal, rule)] = rule_row(rule, goal)  # the decoded value depends on goal and row only
    return ref


def _damages(row: tuple, goal: str, agent: str, lane: str) -> bool:  # type: ignore[type-arg]
    """Whether a row the guard found is one ``_GUARD_COLUMNS`` would find for this lane."""
    g, a, x, no_anchor, no_trigger = row
    if g is None:
        return True
    if g == goal and a is None:  # any agent's: its automation's lanes, or the goal's when it cannot count
        return x is None or x == lane or bool(no_anchor)
    if (g, a) != (goal, agent):
        return False
    return bool(no_anchor) or x is None or (x == lane and bool(no_trigger))


def _sqlite_rank(value: object) -> int:
    return 0 if isinstance(value, (int, float)) else 1 if isinstance(value, str) else 2


def stored_max(a: object, b: object) -> object:
    """SQL's MAX of two stored values (NULL ignored), in SQLite's order across types (numbers, then
    text, then BLOBs), so a value a hand edit wrote wins as it does in the statement and fails the
    decoder there (PostgreSQL's columns hold only numbers)."""
    if a is None or b is None:
        return b if a is None else a
    ra, rb = _sqlite_rank(a), _sqlite_rank(b)
    if ra != rb:
        return a if ra > rb else b
    return max(a, b)  # type: ignore[call-overload]


def goal_anchors(agent_anchors: Mapping[Any, Any]) -> dict[Any, Any]:
    """The ``goal_anchor`` fact of every goal from its agents' latest anchors (keyed goal, agent;
    the starts without an agent too): the largest of them, as ``stored_max`` orders them."""
    out: dict[Any, Any] = {}
    for (goal, _), value in agent_anchors.items():
        out[goal] = stored_max(out.get(goal), value)
    return out
