"""A limited lane's decision in one statement: the hot facts and the lane's limit read together.

A lane whose rules carry no count or budget is decided by the hot statement alone, unchanged. A
lane the gate has seen limited (``learn``, from the slow path's read) is kept here with its limit
definitions, decoded from ``defs``: the applicable rules' rows as one JSON text. Its next decision
sends ``statement``: the hot facts (``_facts.facts_statement``) followed by that same ``defs`` text, the
lane's model and the prices when a budget needs them, and per series and window (from its first
counted microsecond, computed here from the cached definitions) what its limits decide from, not
the rows: a count's starts as their number, earliest and latest anchor (decoded: damage fails)
and, in a rolling window once it holds ``max_starts``, the ``max_starts``-th latest anchor (when
it frees; not walked for below that: it frees nothing); a budget's usage as
groups of rows equal in every column the arithmetic reads (``usage.GROUP_COLUMNS``, each decoded
as a row is); and the lane's largest recent turn when its estimate is that. One SELECT: one round
trip on PostgreSQL, one read statement on SQLite. Each series is read as its two index ranges (the
window's, walked once, and rows dated before the epoch: damage, one probe), so a decision reads its
window and never the lane's history; the lane's largest recent turn is an index walk (migration 0031).

The numbers gathered are handed to the one arithmetic (``budgets.states_of``,
``usage.usage_of_groups``, ``usage.largest_of``, ``usage.pick_estimate``). A rolling budget that
binds needs each row's time to say when it frees: that decision is the slow path's (a second read,
on that denial only). A statement whose ``defs`` differ from the cached
text (a rule changed since) gathered for stale definitions: ``read_known`` answers no check, the
caller decides by the slow path (``_limit_check.check_lane``) and learns the new definitions; stale
limits never admit. The cache is per process, keyed by lane and bounded; so are the gathered
values decoded (by their text: the same text decodes to the same values) and each calendar window's
current period. On SQLite's marked store a read's check may stand for the next decision that
finds the same mark (``_limit_keep``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, Text, and_, bindparam, case, cast, func, literal_column, null, or_, select, type_coerce
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from . import _schema as s
from ._facts import decode_facts, facts_params, facts_statement, read_facts
from ._limit_check import LaneCheck, check_lane, code_of
from ._limit_decode import USAGE_COLUMNS, counted, json_list, largest_rows, prices_from, rows_of, usage
from ._limit_decode import forget as forget_decoded
from ._limit_keep import BOUND, KEPT, LOOKBACK_US, NEVER_US, PERIODS, Kept, keep, length_us, marks_intact_at, period_us
from ._series import series_legs
from ._types import decode_us
from .budgets import Gathered, states_of
from .clock import Clock, from_us, read_clock, to_us
from .decide._sql import ONE, compiled
from .decide.checks import Request
from .decide.facts import FACTS, Facts, first_row
from .envelope import merge
from .errors import CorruptState, StoreUnavailable
from .limits import BoundLimit, LimitKind, bound_limits, limits_from_columns, owner_estimate
from .policies import read_compute, rule_ref
from .scope import ScopeKind
from .store import DriverTx
from .usage import (
    GROUP_COLUMNS,
    RowsNeeded,
    largest_of_entries,
    largest_where,
    pick_estimate,
)
from .windows import Counted, Window

_RULE_COLUMNS = (
    "goal_id agent_id automation_id min_interval_us revision compute_json max_starts starts_window "
    "budget_tokens budget_usd_micros budget_window estimate_tokens across_agents alert_at"
).split()
_ZERO = timedelta(0)
_LANE = ("g", "a", "x")  # the hot statement's parameters: goal, agent, lane ('' for none)


class LaneLimits(NamedTuple):
    """A limited lane's definitions as decoded from ``key`` (its ``defs`` text)."""

    key: str
    bound: tuple[BoundLimit, ...]
    budgets: bool  # a token or USD budget: the estimate and the model are needed
    usd: bool  # a USD budget: the prices are needed
    max_tokens: int  # the envelope's (0: none; then the largest recent turn is read)
    owner_estimate: int | None
    across: bool  # a limit counts across the goal's agents (the goal's lock)

    # The rows to gather, once per series and window (a token and a USD budget of one series and
    # window share theirs): whether they are starts, by agent, by automation, and the window.
    reads: tuple[tuple[bool, bool, bool, Window], ...]
    shape: tuple[Any, ...]  # what ``statement`` depends on (many lanes share one)

    # Worked out once per lane, not per decision: each read's rolling length in microseconds
    # (None: a calendar window), each bound limit's read (its index in ``reads``) and, for a
    # rolling count, its index among the offsets ``nths`` (each its ``amount`` - 1).
    lengths_us: tuple[int | None, ...] = ()
    read_at: tuple[int, ...] = ()
    nth_at: tuple[int | None, ...] = ()
    nths: tuple[int, ...] = ()
    # A rolling count's frees-at is gathered with its read's count: how many each read carries,
    # and where each offset's value lands among them all (reads in order, then offsets).
    nths_of: tuple[int, ...] = ()
    nth_order: tuple[int, ...] = ()


def _read_of(b: BoundLimit) -> tuple[bool, bool, bool, Window]:
    return b.kind is LimitKind.STARTS, b.series.agent_id is not None, b.series.automation_id is not None, b.window


# The windows' start parameters by read, and the rolling counts' offsets (a lane has at most two
# windows per applicable rule, three rules: far fewer than these).
_S = tuple(f"s{i}" for i in range(64))
_O = tuple(f"o{j}" for j in range(64))
_KNOWN: dict[tuple[str, str, str | None], LaneLimits] = {}


def known(goal: str, agent: str, automation: str | None) -> LaneLimits | None:
    """The lane's cached definitions (None: not seen limited by this process)."""
    return _KNOWN.get((goal, agent, automation))


def forget_all() -> None:
    """Drop every lane (a test's fresh process), and every value kept for one."""
    _KNOWN.clear()
    forget_decoded()
    PERIODS.clear()
    KEPT.clear()


def forget(goal: str, agent: str, automation: str | None) -> None:
    """Drop the lane (its rules no longer carry a count or budget)."""
    _KNOWN.pop((goal, agent, automation), None)


# -- the statement's parts, as Core, compiled once per dialect to ``:name`` SQL -------------------
def _agg(dialect: str, row: ColumnElement[Any], *order: ColumnElement[Any]) -> ColumnElement[Any]:
    """A JSON array of ``row`` over the selected rows, as text (NULL when there are none)."""
    if dialect == "sqlite":
        return func.json_group_array(row)
    return cast(func.json_agg(aggregate_order_by(row, *order) if order else row), Text)


def _array(dialect: str, *columns: ColumnElement[Any]) -> ColumnElement[Any]:
    return (func.json_array if dialect == "sqlite" else func.json_build_array)(*columns)


def _raw(table: Any, names: list[str]) -> list[ColumnElement[Any]]:
    return [type_coerce(table.c[n], BigInteger) if n.endswith("_us") else table.c[n] for n in names]


def _defs(dialect: str) -> Any:
    """The applicable rules' rows (goal, agent and automation scope), widest first, as JSON text."""
    r = s.rules
    agent: Any = bindparam("a")
    lane: Any = bindparam("xr")
    none: Any = literal_column("''")  # the wildcard key, inline
    where = and_(
        r.c.goal_id == bindparam("g"),
        or_(
            and_(r.c.agent_id == none, r.c.automation_id == none),
            and_(r.c.agent_id == agent, r.c.automation_id == none),
            and_(r.c.agent_id == agent, r.c.automation_id == lane),
        ),
    )
    if dialect == "sqlite":  # json_group_array keeps the order of its (ordered) source
        inner = select(*_raw(r, _RULE_COLUMNS)).where(where).order_by(r.c.agent_id, r.c.automation_id).subquery()
        return select(_agg(dialect, _array(dialect, *inner.c)))
    return select(_agg(dialect, _array(dialect, *_raw(r, _RULE_COLUMNS)), r.c.agent_id, r.c.automation_id)).where(where)


def limit_parts(dialect: str, shape: tuple[Any, ...]) -> list[Any]:
    """The limit read's parts in order (``statement``'s columns after the facts; ``_limit_guard``
    compares them under the lock): the rules' rows, the model and the prices where a budget needs
    them, each series' read, the lane's largest recent turn."""
    series, budgets, usd, largest, nths = shape
    parts = [_defs(dialect)]
    if budgets:
        a = s.automations
        model: Any = a.c.model
        if dialect == "sqlite":  # only text is a model (as the slow path reads it): anything else is none
            model = case((func.typeof(model) == literal_column("'text'"), model))
        # ``xr``: the lane's automation, '/' (never an id) for none: a lane without one has no model.
        parts.append(select(model).where(a.c.automation_id == bindparam("xr")))
    if usd:
        p = s.model_prices
        parts.append(select(_agg(dialect, _array(dialect, p.c.model, p.c.usd_per_mtok_micros))))
    for i, (starts, by_agent, by_automation) in enumerate(series):
        # The series' rows as its two index ranges (``usage.series_legs``), read apart: the window's
        # and the damaged ones (dated before the epoch). The window's is read as one table's range
        # (no compound to copy its rows through); the damaged range is one probe whose row, when
        # there is one, is what the decoder meets first, and fails on.
        names = (*_LANE, f"s{i}")
        if starts:  # how many, and the earliest and latest (decoded: a damaged anchor fails)
            t = s.starts
            since, damaged = series_legs(t, "anchor_us", by_agent, by_automation, names)
            anchor = type_coerce(t.c.anchor_us, BigInteger)
            # One walk of the window's index range; the damaged range's earliest is one probe.
            below = select(func.min(anchor)).where(damaged).scalar_subquery()
            frees = [_nth(since, j, func.count()) for j, read in enumerate(nths) if read == i]
            found = _array(dialect, func.count(), func.coalesce(below, func.min(anchor)), func.max(anchor), *frees)
            parts.append(select(found if dialect == "sqlite" else cast(found, Text)).where(since))
        else:  # the window's usage as groups of rows the arithmetic sums alike, not the rows
            damaged_row = _damagedusage(dialect, by_agent, by_automation, names)
            parts.append(select(func.coalesce(damaged_row, _usage_groups(dialect, by_agent, by_automation, names))))
    if largest:  # the lane's largest recent turn: one row, as a JSON array of one
        u = s.usage
        top = first_row(select(u).where(largest_where((*_LANE, "sl"))).order_by(u.c.tokens.desc())).subquery()
        parts.append(select(_agg(dialect, _array(dialect, *_raw(top, USAGE_COLUMNS)))))
    return parts


def _nth(since: Any, j: int, count: Any) -> Any:
    """A rolling count's frees-at: the window's ``o{j}``-th latest start (its amount-th), walked
    from the latest; read only when the window holds that many (``count`` above the offset: else
    it frees nothing, and the walk would cover the whole window for nothing)."""
    t = s.starts
    offset = bindparam(f"o{j}", type_=BigInteger)
    anchor = type_coerce(t.c.anchor_us, BigInteger)
    nth = select(anchor).where(since).order_by(t.c.anchor_us.desc()).limit(ONE).offset(offset).scalar_subquery()
    return case((count > offset, nth))


def _usage_groups(dialect: str, by_agent: bool, by_automation: bool, names: tuple[str, str, str, str]) -> Any:
    """The window's usage as groups of rows equal in every column the arithmetic reads, each with
    how many rows it holds and its earliest time, as a JSON array (NULL over no row)."""
    u = s.usage
    since, _damaged = series_legs(u, "at_us", by_agent, by_automation, names)
    keys = [u.c[n] for n in GROUP_COLUMNS]
    at = type_coerce(u.c.at_us, BigInteger)
    # A group holding a row whose ids are not text (as ``usage.entry_from_row`` reads each row)
    # counts NULL rows: the decoder fails on it, as the slow path fails on the row.
    ids = [u.c.turn_id, u.c.goal_id, u.c.agent_id, u.c.automation_id]
    bad: Any = or_(*(c.is_(None) for c in ids))
    if dialect == "sqlite":
        bad = or_(bad, *(func.typeof(c) != literal_column("'text'") for c in ids))
    n = case((func.max(case((bad, ONE), else_=literal_column("0"))) == ONE, null()), else_=func.count())
    groups = select(*keys, n.label("n"), func.min(at).label("at_us")).where(since).group_by(*keys).subquery()
    return select(_agg(dialect, _array(dialect, *groups.c))).scalar_subquery()


def _damagedusage(dialect: str, by_agent: bool, by_automation: bool, names: tuple[str, str, str, str]) -> Any:
    """One usage row of the series dated before the epoch, as a gathered group of one (its time
    fails the decoder: the read denies), or NULL when there is none."""
    u = s.usage
    _since, damaged = series_legs(u, "at_us", by_agent, by_automation, names)
    row = _array(dialect, _array(dialect, *(u.c[n] for n in GROUP_COLUMNS), ONE, type_coerce(u.c.at_us, BigInteger)))
    return first_row(select(row if dialect == "sqlite" else cast(row, Text)).where(damaged)).scalar_subquery()


@functools.cache
def statement(dialect: str, relaxed: bool, shape: tuple[Any, ...], with_facts: bool, marked: bool = False) -> str:
    """The lane's one statement: the hot facts (``with_facts``; as ``_facts.read_facts`` sends
    them, on a relaxed store its guarded form), then its limit read (``shape``:
    ``LaneLimits.shape``), compiled once per dialect and shape. Its parameters are the hot
    statement's, each window's start (``s0``...), each rolling count's offset (``o0``...) and the
    estimate's (``sl``).

    On a ``marked`` store (SQLite, ``Store.marked``) the limit read is one column: NULL when the
    limit mark and the schema's version equal ``m`` and ``v`` (those of the lane's last limit read
    kept, or NULL), the parts then not evaluated (a CASE's other branch is never run), so the
    statement costs the hot facts', one key lookup and the version's read; else the mark, the
    version and the parts as one JSON array. The version is what makes the mark's word good: a
    trigger dropped or made (by any process) changes it."""
    limits = [part.scalar_subquery() for part in limit_parts(dialect, shape)]
    facts = list(facts_statement(dialect, relaxed).selected_columns) if with_facts else []
    also = (*(f"s{i}" for i in range(len(shape[0]))), *(f"o{j}" for j in range(len(shape[4]))), "sl")
    if not marked:
        return compiled(select(*facts, *limits), dialect, also=also)
    m = s.limit_mark
    mark = select(m.c.n).where(m.c.k == literal_column("0")).scalar_subquery()
    # The schema's version: a pragma run as a table, a statement prepared inside this one each
    # time, so it is read once on a hit (in the condition) and again only on a miss.
    version = select(literal_column("schema_version")).select_from(func.pragma_schema_version()).scalar_subquery()
    same = and_(mark == bindparam("m", type_=BigInteger), version == bindparam("v", type_=BigInteger))
    # One CASE, one column: NULL on a hit; on a miss the mark, the version and the parts as one
    # array's values, each part as its text (``|| ''`` drops SQLite's JSON subtype, which would
    # nest a part as JSON rather than keep the text its decoders memoize by).
    packed = case((same, null()), else_=_array(dialect, mark, version, *(part.op("||")(literal_column("''")) for part in limits)))
    return compiled(select(*facts, packed), dialect, also=(*also, "m", "v"))


# -- learning a lane's definitions (the slow path) ------------------------------------------------
def learn(conn: Connection, goal: str, agent: str, automation: str | None) -> None:
    """Read the lane's definitions on ``conn`` (the slow path's read) and keep them when a count or
    budget binds the lane; a damaged rule raises ``StoreUnavailable`` (the caller denies)."""
    dialect = conn.dialect.name
    text = conn.execute(_defs_statement(dialect), {"g": goal, "a": agent, "xr": automation or "/"}).scalar()
    lane = _decode_defs(text, goal, agent)
    if lane is None:
        forget(goal, agent, automation)
        return
    if len(_KNOWN) >= BOUND:
        _KNOWN.clear()
    _KNOWN[(goal, agent, automation)] = lane


@functools.cache
def _defs_statement(dialect: str) -> Any:
    return _defs(dialect)


def _decode_defs(text: object, goal: str, agent: str) -> LaneLimits | None:
    """The definitions from ``defs`` text (None: no count or budget binds); the one decoders of
    a rule's floor and revision, compute block and limits."""
    if text is None:
        return None
    try:
        rows = json_list(text)
        rules = []
        floor_across = False  # a goal floor across agents: its lanes take the goal's lock too
        for values in rows:
            if not isinstance(values, list) or len(values) != len(_RULE_COLUMNS):
                raise CorruptState(f"malformed rule under goal {goal!r}: {values!r}")
            row = SimpleNamespace(**dict(zip(_RULE_COLUMNS, values, strict=True)))
            if not all(isinstance(v, str) for v in (row.agent_id, row.automation_id)):
                raise CorruptState(f"malformed rule under goal {goal!r}: its scope is {row.agent_id!r}/{row.automation_id!r}")
            ref = rule_ref(goal, row.agent_id, row.automation_id, row.min_interval_us, row.revision)
            compute, _problem = read_compute(row.compute_json)
            limits = limits_from_columns(row, str(ref.scope))
            floor_across = floor_across or (ref.scope.kind is ScopeKind.GOAL and limits.across_agents and ref.min_interval > _ZERO)
            rules.append((ref.scope, ref.revision, limits, compute))
    except CorruptState as exc:
        raise StoreUnavailable(f"a limit of {goal}/{agent} cannot be read: {exc}") from None
    bound = tuple(bound_limits([(scope, rev, limits) for scope, rev, limits, _ in rules], agent))
    if not bound:
        return None
    envelope = merge([(str(scope), compute) for scope, _, _, compute in rules if compute is not None])
    budgets = any(b.kind is not LimitKind.STARTS for b in bound)
    reads = tuple(dict.fromkeys(_read_of(b) for b in bound))
    rolling = _nths(bound)
    nth_reads = [reads.index(_read_of(b)) for b in rolling]
    return LaneLimits(
        key=str(text),
        bound=bound,
        budgets=budgets,
        usd=any(b.kind is LimitKind.USD for b in bound),
        max_tokens=envelope.max_tokens,
        owner_estimate=owner_estimate(limits for _, _, limits, _ in rules),
        across=floor_across or any(b.series.agent_id is None for b in bound),
        reads=reads,
        shape=(
            tuple(r[:3] for r in reads),
            budgets,
            any(b.kind is LimitKind.USD for b in bound),
            budgets and not envelope.max_tokens,
            tuple(nth_reads),
        ),
        lengths_us=tuple(length_us(r[3].length) if r[3].rolling and r[3].length is not None else None for r in reads),
        read_at=tuple(reads.index(_read_of(b)) for b in bound),
        nth_at=tuple(rolling.index(b) if b in rolling else None for b in bound),
        nths=tuple(max(0, b.amount - 1) for b in rolling),
        nths_of=tuple(nth_reads.count(k) for k in range(len(reads))),
        nth_order=tuple(sorted(range(len(nth_reads)), key=lambda j: (nth_reads[j], j)).index(j) for j in range(len(nth_reads))),
    )


def _nths(bound: tuple[BoundLimit, ...]) -> list[BoundLimit]:
    """The count limits of rolling windows: when each frees is its ``amount``-th latest start."""
    return [b for b in bound if b.kind is LimitKind.STARTS and b.window.rolling]


# -- the read -------------------------------------------------------------------------------------
class KnownRead(NamedTuple):
    """What ``read_known`` found: the facts (None: not read), the check (None: the definitions
    changed, decide by the slow path) and the instant both are taken at; with a check read in full
    (not a kept one), the parameters sent and the limit texts the statement answered, in
    ``limit_parts``' order (what ``_limit_guard`` checks the lane's limits unchanged against)."""

    facts: Facts | None
    check: LaneCheck | None
    now: datetime
    sent: dict[str, Any] | None = None
    got: tuple[Any, ...] | None = None


def read_known(tx: DriverTx, lane: LaneLimits, req: Request, clock: Clock, *, with_facts: bool, now: datetime | None = None) -> KnownRead:
    """The lane's decision read in one statement (``statement``): its facts (``with_facts``; the
    clock read after them, as a plain read does) and its limits checked at that instant, or at
    ``now`` when given (the serialized decision's reading)."""
    before = now if now is not None else read_clock(clock)
    before_us = to_us(before)
    params = known_params(lane, req, before, before_us)
    marked = tx.marked
    kept = None
    if marked:
        kept = KEPT.get((tx.url, req.goal, req.agent, req.automation))
        if kept is not None and not (kept.key == lane.key and kept.since_us <= before_us < kept.until_us):
            kept = None
        params["m"], params["v"] = (kept.mark, kept.version) if kept is not None else (None, None)
    key = (lane.key, tx.dialect, tx.relaxed, with_facts, marked)
    sql = _STATEMENTS.get(key)
    if sql is None:
        if len(_STATEMENTS) >= BOUND:
            _STATEMENTS.clear()
        sql = _STATEMENTS[key] = statement(tx.dialect, tx.relaxed, lane.shape, with_facts, marked)
    row = tx.row(sql, params)
    if row is None:  # pragma: no cover - a SELECT of scalars always returns one row
        raise StoreUnavailable("the store returned no row for the admission facts")
    # The facts' columns come first (``decode_facts`` reads them by place, none after).
    facts = decode_facts(row, req.goal, req.agent, req.automation, req.turn_id) if with_facts else None
    at = read_clock(clock) if now is None else now
    rest: Sequence[Any] = row[len(FACTS) :] if with_facts else row
    mark = version = None
    if marked:
        packed = rest[0]
        if packed is None:  # nothing the limits read changed since ``kept`` was read: it stands until its horizon
            if kept is None or at < before or at >= kept.until:  # pragma: no cover - a race with the horizon
                return KnownRead(facts, None, at)
            return KnownRead(facts, kept.check, at)
        try:
            found = json_list(packed)
        except CorruptState as exc:
            raise StoreUnavailable(f"a limit of {req.goal}/{req.agent} cannot be read: {exc}") from None
        if len(found) < 3:
            raise StoreUnavailable(f"a limit of {req.goal}/{req.agent} cannot be read: {packed!r}")
        mark, version, rest = found[0], found[1], found[2:]
    if rest[0] != lane.key or at < before:  # changed since (or the clock went back): the slow path
        return KnownRead(facts, None, at)
    try:
        values = list(rest[1:])
        check = _check(lane, values, at)
        if type(mark) is int and type(version) is int:
            # Kept from the instant it was checked at (not the read's: a decision between the two
            # checks its own), and only at a schema version whose triggers were seen intact.
            at_us, until_us = to_us(at), horizon_us(lane, values, before)
            if at_us < until_us and marks_intact_at(tx, version):
                keep(
                    Kept(lane.key, mark, version, at_us, until_us, from_us(until_us), check), (tx.url, req.goal, req.agent, req.automation)
                )
        return KnownRead(facts, check, at, params, tuple(rest))
    except RowsNeeded:  # a rolling budget binds: when it frees is read from its rows by the slow path
        return KnownRead(facts, None, at)
    except CorruptState as exc:
        raise StoreUnavailable(f"a limit of {req.goal}/{req.agent} cannot be read: {exc}") from None


# Each lane's statement by its definitions' text (a str: its hash is kept, the shape's is not).
_STATEMENTS: dict[tuple[str, str, bool, bool, bool], str] = {}


def horizon_us(lane: LaneLimits, values: list[Any], before: datetime) -> int:
    """The first microsecond at which the lane's limit read, taken at ``before``, could find other
    rows with none of them changed: a gathered row leaves its rolling window (the earliest of each
    read: the window counts from ``known_params``' start on), a calendar window's period ends, or
    the largest recent turn leaves the estimate's lookback (``known_params``' ``sl``)."""
    before_us = to_us(before)
    until = NEVER_US
    at = int(lane.budgets) + int(lane.usd)
    for k, read in enumerate(lane.reads):
        length = lane.lengths_us[k]
        if length is None:
            until = min(until, period_us(read[3], before, before_us)[1])
        else:
            earliest = _earliest(values[at], read[0])
            if earliest is not None:
                until = min(until, earliest + length)
        at += 1
    if lane.budgets and not lane.max_tokens:
        for row in rows_of(values[at], len(USAGE_COLUMNS)):
            until = min(until, row[USAGE_COLUMNS.index("at_us")] + LOOKBACK_US)
    return until


def _earliest(text: object, starts: bool) -> int | None:
    """The earliest time among a read's gathered rows (None: none): a count's earliest anchor, or
    the earliest of its usage groups' earliest times."""
    if starts:
        values = json_list(text)
        return values[1] if values and values[0] else None
    times = [r[-1] for r in rows_of(text, len(GROUP_COLUMNS) + 2)]
    return min(times) if times else None


def known_params(lane: LaneLimits, req: Request, before: datetime, before_us: int | None = None) -> dict[str, Any]:
    """``statement``'s parameters for ``req`` read at ``before`` (``before_us``: the same instant in
    microseconds, when the caller has it): the hot statement's, each window's first counted
    microsecond and each rolling count's offset, from the cached definitions, and the estimate's
    lookback."""
    if before_us is None:
        before_us = to_us(before)
    params = facts_params(req.goal, req.agent, req.automation, req.turn_id, req.trigger_us)
    for i, length in enumerate(lane.lengths_us):
        # A rolling start is exclusive: the first counted microsecond is one after it.
        params[_S[i]] = before_us - length + 1 if length is not None else period_us(lane.reads[i][3], before, before_us)[0]
    if lane.nths:
        params.update(zip(_O, lane.nths, strict=False))
    params["sl"] = before_us - LOOKBACK_US
    return params


def plain(tx: DriverTx, req: Request, clock: Clock) -> tuple[Facts, KnownRead | None, datetime]:
    """A decision's plain read on ``tx``: the hot statement alone for a lane not known limited;
    for a known one its facts and limits in one statement (its ``KnownRead``; the check None when
    its definitions changed: then the caller checks by the slow path). The clock is read after the
    facts."""
    lane = known(req.goal, req.agent, req.automation)
    if lane is None:
        facts = read_facts(tx, req.goal, req.agent, req.automation, req.turn_id, req.trigger_us)
        return facts, None, read_clock(clock)
    found = read_known(tx, lane, req, clock, with_facts=True)
    if found.facts is None:  # pragma: no cover - read with its facts
        raise StoreUnavailable("the lane's facts were not read")
    if found.check is None and not found.facts.limited:
        forget(req.goal, req.agent, req.automation)
    return found.facts, found, found.now


def serialized_check(tx: DriverTx, conn: Connection, req: Request, clock: Clock) -> LaneCheck:
    """The serialized decision's check of the lane's limits (on ``tx``, ``conn`` its connection,
    under its lock): one statement when the lane is known and unchanged, else ``check_lane``,
    after which the lane's definitions are learnt for its next decision."""
    now = read_clock(clock)
    lane = known(req.goal, req.agent, req.automation)
    found = read_known(tx, lane, req, clock, with_facts=False, now=now).check if lane is not None else None
    if found is None:
        found = check_lane(conn, req.goal, req.agent, req.automation, now)
        learn(conn, req.goal, req.agent, req.automation)
    return found


def _check(lane: LaneLimits, values: list[Any], now: datetime) -> LaneCheck:
    """The lane's check from the gathered values, in ``limit_parts``' order."""
    at = 0
    model = None
    if lane.budgets:
        model = values[0] if isinstance(values[0], str) else None
        at = 1
    prices: dict[str, int] = {}
    priced: object = None  # the prices' text: what a budget's usage was decoded with
    if lane.usd:
        prices, priced = prices_from(values[at]), values[at]
        at += 1
    found: list[Any] = []
    nths: list[Any] = []  # each rolling count's frees-at, gathered with its read's count
    for k, read in enumerate(lane.reads):  # a count's number of starts, or a budget's usage
        if read[0]:
            count, frees = counted(values[at], lane.nths_of[k])
            found.append(count)
            nths.extend(frees)
        else:
            found.append(usage(values[at], read[3], now, prices, priced))
        at += 1
    gathered = Gathered({}, {}, prices)
    for i, b in enumerate(lane.bound):
        value = found[lane.read_at[i]]
        if b.kind is LimitKind.STARTS:
            j = lane.nth_at[i]
            nth = nths[lane.nth_order[j]] if j is not None else None
            gathered.starts[i] = Counted(value, decode_us(nth) if nth is not None and value >= b.amount else None)
        else:
            gathered.usage[i] = value
    estimate = None
    if lane.budgets:
        largest = values[at] if not lane.max_tokens else None
        recent: Callable[[], int | None] = lambda: largest_of_entries(largest_rows(largest), now)  # noqa: E731
        estimate = pick_estimate(lane.max_tokens, recent, lane.owner_estimate)
    states = tuple(states_of(lane.bound, gathered, now, estimate_tokens=estimate, model=model))
    return LaneCheck(code_of(states), states, estimate, model, lane.across, lane.budgets)
