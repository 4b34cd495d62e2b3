"""The usage ledger budgets count (seed 002's lifecycle, per turn): admission holds a conservative
estimate for the turn (``hold``), settlement reconciles it to what the host reported
(``settle``), once per turn id; usage that cannot be read is recorded as unknown and its estimate
stays held (``mark_unknown``). An agent app's end-of-turn hook reports a turn floorgate did not
launch (``report``), idempotently by the app's own key for that turn.

``window_usage`` is what a budget check reads for one series and window: settled usage plus held
estimates, in tokens and in USD, and ``frees_at`` when enough of it ages out. USD is the cost the
host reported, else tokens at the owner's price per million tokens for the model
(``Prices``); usage with neither is *unpriced*, and a USD budget over it must deny (fail closed),
never guess. A row floorgate did not write (a negative or non-integer amount, an unknown state, a
time out of range) raises ``CorruptState``: the decision denies ``state_unavailable``.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from sqlalchemy import Select, and_, bindparam, insert, literal_column, null, or_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from . import _schema as s
from ._repository import Repository
from ._series import NAMES as _NAMES
from ._series import series_where
from ._types import decode_us
from .clock import aware_utc, read_clock, to_us
from .decide._sql import DIALECTS, compiled, text_value
from .errors import CorruptState, InvalidInput, NotFound
from .limits import Series
from .prices import Price as Price
from .prices import Prices as Prices
from .prices import check_model as check_model
from .prices import cost_micros, estimate_price
from .prices import prices_of as prices_of
from .prices import read_prices as read_prices
from .scope import check_id, check_limit
from .store import DriverTx
from .windows import MAX_TOKENS, NEVER, Window, amount_frees_at

# How far back the largest per-turn usage of a lane is the estimate for its next turn.
ESTIMATE_LOOKBACK = timedelta(days=30)
MAX_USD_MICROS = 10**15


class UsageState(StrEnum):
    """Where a turn's usage stands."""

    HELD = "held"  # admitted: the estimate is held until the turn settles
    SETTLED = "settled"  # reconciled to the reported usage
    UNKNOWN = "unknown"  # settled, but its usage could not be read: the estimate stays held


class UsageSource(StrEnum):
    """Where the row's figures come from (what ``floorgate usage`` shows as its source)."""

    ADMISSION = "admission"  # held at admission, then settled by a managed turn's meter
    METER = "meter"  # a managed turn's meter, for a turn admission held nothing for
    HOOK = "hook"  # an agent app's end-of-turn hook: its own row, or the hold its prompt's admission made


class UsageEntry(NamedTuple):  # a plain immutable value: a budget check decodes one per row of its window
    """One turn's usage as the ledger holds it (built by ``entry_from_row`` alone, which checks every field)."""

    turn_id: str
    goal_id: str
    agent_id: str
    automation_id: str
    at: datetime
    state: UsageState
    model: str | None
    estimate_tokens: int
    tokens: int | None
    usd_micros: int | None
    source: UsageSource

    @property
    def counted_tokens(self) -> int:
        """What a budget counts: the reported tokens once settled, else the held estimate."""
        return self.tokens if self.state is UsageState.SETTLED and self.tokens is not None else self.estimate_tokens

    @property
    def held(self) -> bool:
        return self.state is not UsageState.SETTLED


def _amount(value: object, name: str, turn: object, cap: int, *, nullable: bool) -> int | None:
    if value is None and nullable:
        return None
    if type(value) is not int or not 0 <= value <= cap:
        raise CorruptState(f"malformed usage of turn {turn!r}: {name} {value!r}")
    return value


_IDS = UsageEntry._fields[:4]  # the ids a usage row is checked for first: its leading fields


def entry_from_row(row: Any) -> UsageEntry:
    """The one decoder of a usage row; anything floorgate never writes raises ``CorruptState``."""
    ids = (row.turn_id, row.goal_id, row.agent_id, row.automation_id)
    turn = ids[0]
    for value in ids:
        if not isinstance(value, str):
            raise CorruptState(f"malformed usage of turn {turn!r}: {_IDS[ids.index(value)]} {value!r}")
    try:
        state, source = UsageState(row.state), UsageSource(row.source)
    except ValueError:
        raise CorruptState(f"malformed usage of turn {turn!r}: state {row.state!r}, source {row.source!r}") from None
    at = row.at_us if isinstance(row.at_us, datetime) else decode_us(row.at_us)
    estimate = _amount(row.estimate_tokens, "estimate_tokens", turn, MAX_TOKENS, nullable=False) or 0
    tokens = _amount(row.tokens, "tokens", turn, MAX_TOKENS, nullable=True)
    usd = _amount(row.usd_micros, "usd_micros", turn, MAX_USD_MICROS, nullable=True)
    if state is UsageState.SETTLED and tokens is None and usd is None:
        raise CorruptState(f"malformed usage of turn {turn!r}: settled without tokens or cost")
    if row.model is not None and not isinstance(row.model, str):
        raise CorruptState(f"malformed usage of turn {turn!r}: model {row.model!r}")
    return UsageEntry(*ids, at=at, state=state, model=row.model, estimate_tokens=estimate, tokens=tokens, usd_micros=usd, source=source)


class RowsNeeded(Exception):
    """A rolling budget's frees-at was asked of usage gathered as sums (``usage_of_groups``):
    when enough ages out depends on each row's time, so the caller reads the rows."""


class WindowUsage(NamedTuple):
    """A series' usage in a window at ``now``: settled and held, in tokens and micro-dollars.
    ``unpriced``: models (None: a turn without one) whose tokens have no cost reported and no
    price set; while it is not empty the USD figures are incomplete, and a USD budget denies.
    ``weights``: how many rows each entry stands for (1 each when read as rows; gathered as sums,
    an entry stands for a group of equal rows and ``exact`` is False: a rolling window's frees-at
    then raises ``RowsNeeded``)."""

    window: Window
    now: datetime
    entries: tuple[UsageEntry, ...]
    settled_tokens: int
    held_tokens: int
    settled_usd_micros: int
    held_usd_micros: int
    unpriced: frozenset[str | None]
    usd_of: tuple[int | None, ...]  # per entry, its cost in micro-dollars (None: unpriced)
    weights: tuple[int, ...] = ()
    exact: bool = True

    @property
    def tokens(self) -> int:
        return self.settled_tokens + self.held_tokens

    @property
    def usd_micros(self) -> int:
        return self.settled_usd_micros + self.held_usd_micros

    def _weights(self) -> tuple[int, ...]:
        return self.weights or (1,) * len(self.entries)

    def _frees_at(self, amounts: builtins.list[tuple[datetime, int]], budget: int, need: int) -> datetime | None:
        found = amount_frees_at(amounts, budget, need, self.window, self.now)
        if found is not None and found != NEVER and self.window.rolling and not self.exact:
            raise RowsNeeded(f"when {self.window} frees up needs its usage rows")
        return found

    def tokens_frees_at(self, budget: int, need: int) -> datetime | None:
        """None when ``need`` more tokens fit the ``budget`` now; else when enough ages out
        (``windows.NEVER`` when ``need`` alone is over the budget)."""
        if self.tokens + need <= budget:  # all of it fits, so what the window counts of it fits
            return None
        return self._frees_at([(e.at, e.counted_tokens * n) for e, n in zip(self.entries, self._weights(), strict=True)], budget, need)

    def usd_frees_at(self, budget_micros: int, need_micros: int) -> datetime | None:
        """As ``tokens_frees_at`` for micro-dollars; ``windows.NEVER`` while any usage is unpriced
        (it cannot be known to fit: fail closed until the owner sets a price)."""
        if self.unpriced:
            return NEVER
        if self.usd_micros + need_micros <= budget_micros:  # all of it fits (amounts are never negative)
            return None
        found = zip(self.entries, self.usd_of, self._weights(), strict=True)
        return self._frees_at([(e.at, usd * n) for e, usd, n in found if usd is not None], budget_micros, need_micros)


def entry_usd(e: UsageEntry, prices: dict[str, int]) -> int | None:
    """What a USD budget counts of one entry, in micro-dollars: the cost the host reported once
    settled, else its tokens at the owner's price (``estimate_price`` while held, its model's once
    settled); None: unpriced."""
    if e.state is UsageState.SETTLED and e.usd_micros is not None:
        return e.usd_micros
    price = estimate_price(e.model, prices) if e.held else prices.get(e.model) if e.model is not None else None
    return cost_micros(e.counted_tokens, price) if price is not None else None


@functools.cache
def _series_statement(by_agent: bool, by_automation: bool) -> Select[Any]:
    # Built once per shape and bound per call (see ``budgets._starts_statement``).
    return select(s.usage).where(series_where(s.usage, "at_us", by_agent, by_automation)).order_by(s.usage.c.at_us)


def series_rows(conn: Connection, series: Series, since: datetime) -> builtins.list[Any]:
    """The raw usage rows of ``series`` at or after ``since`` (one indexed statement)."""
    stmt = _series_statement(series.agent_id is not None, series.automation_id is not None)
    params = {"goal": series.goal_id, "since": since, "agent": series.agent_id, "automation": series.automation_id}
    return list(conn.execute(stmt, params))


def window_usage(conn: Connection, series: Series, window: Window, now: datetime, prices: dict[str, int] | None = None) -> WindowUsage:
    """Settled usage and held estimates of ``series`` in ``window`` at ``now`` (``prices``:
    micro-dollars per million tokens by model, read with ``read_prices`` when not given).
    Raises ``CorruptState`` on a damaged row: a budget over it denies ``state_unavailable``."""
    if prices is None:
        prices = read_prices(conn)
    return usage_of(series_rows(conn, series, window.start(now)), window, now, prices)


def usage_of(rows: Iterable[Any], window: Window, now: datetime, prices: dict[str, int]) -> WindowUsage:
    """``window_usage`` from a series' usage rows read from the window's start on (``series_rows``,
    or the same rows gathered in another statement): the one arithmetic of a window's usage."""
    entries = [e for e in map(entry_from_row, rows) if window.counts(e.at, now)]
    return _totals(window, now, entries, [1] * len(entries), prices, exact=True)


def usage_of_groups(groups: Iterable[tuple[Any, int]], window: Window, now: datetime, prices: dict[str, int]) -> WindowUsage:
    """``usage_of`` from a series' usage gathered as groups of rows that agree on every column the
    arithmetic reads (``GROUP_COLUMNS``): ``(row, n)`` with the group's values, its earliest
    ``at_us`` and how many rows it holds, read by the window's exact predicate (every row counts).
    Each group is decoded by ``entry_from_row``, so a damaged value fails as a damaged row does.
    A rolling window's frees-at cannot be told from groups: it raises ``RowsNeeded``."""
    entries, weights = [], []
    for row, n in groups:
        if type(n) is not int or n < 1:
            raise CorruptState(f"a usage group could not be read: {n!r} rows")
        entries.append(entry_from_row(row))
        weights.append(n)
    return _totals(window, now, entries, weights, prices, exact=False)


# The columns a window's usage arithmetic reads besides the time: rows equal in all of them are
# summed alike, so a statement may gather them as one group (``usage_of_groups``).
GROUP_COLUMNS = ("state", "model", "estimate_tokens", "tokens", "usd_micros", "source")


def _totals(
    window: Window, now: datetime, entries: builtins.list[UsageEntry], weights: builtins.list[int], prices: dict[str, int], *, exact: bool
) -> WindowUsage:
    settled_t = held_t = settled_usd = held_usd = 0
    unpriced: set[str | None] = set()
    usd_of: list[int | None] = []
    for e, n in zip(entries, weights, strict=True):
        tokens = e.counted_tokens
        if e.held:
            held_t += tokens * n
        else:
            settled_t += tokens * n
        usd = entry_usd(e, prices)
        if usd is None:
            unpriced.add(e.model)
        usd_of.append(usd)
        if usd is not None:
            if e.held:
                held_usd += usd * n
            else:
                settled_usd += usd * n
    found = (window, now, tuple(entries), settled_t, held_t, settled_usd, held_usd, frozenset(unpriced), tuple(usd_of))
    return WindowUsage(*found, weights=tuple(weights), exact=exact)


def largest_turn(conn: Connection, goal: str, agent: str, automation: str, now: datetime) -> int | None:
    """The largest settled per-turn token usage of the lane in the last ``ESTIMATE_LOOKBACK``
    (None: none reported), read as the one row that holds it; that row damaged raises
    ``CorruptState`` (rows a budget's window counts are all decoded by ``window_usage``)."""
    params = {"goal": goal, "agent": agent, "automation": automation, "since": now - ESTIMATE_LOOKBACK}
    return largest_of(conn.execute(_largest_statement(), params), now)


def largest_where(names: tuple[str, str, str, str] = _NAMES) -> Any:
    """The lane's settled turns that report tokens, from a time on (``series_where``'s ``names``):
    ordered by ``tokens`` descending, the first is the largest (on SQLite a damaged non-integer
    amount sorts first, and fails the decoder)."""
    u = s.usage
    return and_(
        series_where(u, "at_us", True, True, names), u.c.state == literal_column(f"'{UsageState.SETTLED.value}'"), u.c.tokens.is_not(None)
    )


@functools.cache
def _largest_statement() -> Select[Any]:
    u = s.usage
    return select(u).where(largest_where()).order_by(u.c.tokens.desc()).limit(1)


def largest_of(rows: Iterable[Any], now: datetime) -> int | None:
    """``largest_turn`` from the lane's largest usage row(s) read from ``now - ESTIMATE_LOOKBACK``
    on (``largest_where``; older rows are left out here); each is decoded, so a damaged one raises."""
    return largest_of_entries([entry_from_row(r) for r in rows], now)


def largest_of_entries(entries: Iterable[UsageEntry], now: datetime) -> int | None:
    """``largest_of`` from rows already decoded by ``entry_from_row``."""
    since = now - ESTIMATE_LOOKBACK
    values = [e.tokens for e in entries if e.at >= since and e.state is UsageState.SETTLED and e.tokens is not None]
    return max(values) if values else None


def lane_estimate(
    conn: Connection, goal: str, agent: str, automation: str, now: datetime, *, envelope_max_tokens: int, owner_estimate: int | None
) -> int | None:
    """The conservative estimate a turn of the lane holds at admission: the envelope's
    ``max_tokens`` when set (non-zero), else the lane's largest turn in the last 30 days, else the
    owner's ``--estimate-tokens``; None when there is none (a token or USD budget cannot then be
    checked: deny and say to set ``--estimate-tokens``)."""
    return pick_estimate(envelope_max_tokens, lambda: largest_turn(conn, goal, agent, automation, now), owner_estimate)


def pick_estimate(envelope_max_tokens: int, largest: Callable[[], int | None], owner_estimate: int | None) -> int | None:
    """``lane_estimate``'s choice, with the lane's largest recent turn read only when needed."""
    if envelope_max_tokens:
        return envelope_max_tokens
    found = largest()
    return found if found is not None else owner_estimate


def hold(
    conn: Connection, turn_id: str, goal: str, agent: str, automation: str, at: datetime, estimate_tokens: int, model: str | None
) -> bool:
    """Hold ``estimate_tokens`` for ``turn_id`` at ``at`` on the caller's connection (inside the
    admission that admits the turn). Idempotent: a turn already in the ledger keeps its row
    (False); True when it was written."""
    _tokens(estimate_tokens, "estimate_tokens")
    lane = (goal, agent, automation)
    return _insert(conn, turn_id, lane, at, estimate_tokens, UsageSource.ADMISSION, state=UsageState.HELD.value, model=model, once=True)


# An INSERT that leaves an existing row alone (ON CONFLICT DO NOTHING), by dialect.
_insert_once: dict[str, Callable[..., Any]] = {"sqlite": sqlite_insert, "postgresql": postgresql_insert}


def _hold_sql(dialect: str) -> str:
    u = s.usage
    values = dict(
        turn_id=bindparam("t"), goal_id=bindparam("g"), agent_id=bindparam("a"), automation_id=bindparam("x"),
        at_us=bindparam("at"), state=text_value(UsageState.HELD.value), model=bindparam("model"),
        estimate_tokens=bindparam("est"), tokens=null(), usd_micros=null(), source=text_value(UsageSource.ADMISSION.value),
        settled_at_us=null(), report_key=null(),
    )  # fmt: skip
    stmt = _insert_once[dialect](u).values(**values).on_conflict_do_nothing(index_elements=[u.c.turn_id])
    return compiled(stmt, dialect, also=("at", "model", "est"))


# ``hold``'s statement, compiled once per dialect for an admission's driver transaction.
HOLD_SQL = {d: _hold_sql(d) for d in DIALECTS}


def hold_on(
    tx: DriverTx, turn_id: str, goal: str, agent: str, automation: str, at: datetime, estimate_tokens: int, model: str | None
) -> None:
    """``hold`` on an admission's driver transaction (``Store.driver``): the same row, written
    by one statement compiled once (idempotent by turn id: a turn already held keeps its row)."""
    _tokens(estimate_tokens, "estimate_tokens")
    params = {
        "t": turn_id,
        "g": goal,
        "a": agent,
        "x": automation,
        "at": to_us(aware_utc(at, "at")),
        "model": model,
        "est": estimate_tokens,
    }
    tx.execute(HOLD_SQL[tx.dialect], params)


def settle_turn(
    conn: Connection,
    turn_id: str,
    *,
    goal: str,
    agent: str,
    automation: str,
    at: datetime,
    tokens: int | None,
    usd_micros: int | None,
    model: str | None,
    now: datetime,
) -> None:
    """At a managed turn's settlement, on the settlement's connection: reconcile the estimate its
    admission held to what its meter reported (once: a turn already reconciled is left as it is),
    or record the turn when nothing was held (so the lane's largest recent turn is known).
    ``tokens`` and ``usd_micros`` None: the meter read nothing usable, the turn is ``unknown`` and
    its estimate stays held."""
    if tokens is not None:
        _tokens(tokens, "tokens")
    _usd(usd_micros, "usd_micros")
    u = s.usage
    row = conn.execute(select(u.c.state).where(u.c.turn_id == turn_id)).first()
    if row is not None and row.state != UsageState.HELD.value:
        return
    values = _settlement(tokens, usd_micros, model, now)
    if row is not None:
        conn.execute(update(u).where(u.c.turn_id == turn_id, u.c.state == UsageState.HELD.value).values(**values))
        return
    _insert(conn, turn_id, (goal, agent, automation), at, 0, UsageSource.METER, **values)


def settle_unread(conn: Connection, turn_id: str, *, now: datetime) -> None:
    """At a managed turn's settlement when no meter reads its usage (its automation has none):
    the estimate its admission held, if any, settles ``unknown``: still counted in full, no
    longer in flight. A turn that held nothing writes nothing."""
    u = s.usage
    conn.execute(update(u).where(u.c.turn_id == turn_id, u.c.state == UsageState.HELD.value).values(**_settlement(None, None, None, now)))


def _insert(
    conn: Connection,
    turn_id: str,
    lane: tuple[str, str, str],
    at: datetime,
    estimate_tokens: int,
    source: UsageSource,
    *,
    once: bool = False,
    **values: Any,
) -> bool:
    """Write ``turn_id``'s ledger row for the lane ``(goal, agent, automation)``, at ``at``:
    ``values`` are its state and what was reported (``_settlement``); the amounts, model,
    settlement time and report key it does not give are NULL. ``once``: a turn already in the
    ledger keeps its row, in the same statement (False when it did)."""
    columns = {"tokens": None, "usd_micros": None, "model": None, "settled_at_us": None, "report_key": None, **values}
    stmt: Any = (_insert_once[conn.dialect.name] if once else insert)(s.usage)
    stmt = stmt.values(
        turn_id=turn_id, goal_id=lane[0], agent_id=lane[1], automation_id=lane[2], at_us=at,
        estimate_tokens=estimate_tokens, source=source.value, **columns,
    )  # fmt: skip
    if not once:
        conn.execute(stmt)
        return True
    stmt = stmt.on_conflict_do_nothing(index_elements=[s.usage.c.turn_id]).returning(s.usage.c.turn_id)
    return conn.execute(stmt).first() is not None  # (a row count is not reported on every connection)


def _settlement(tokens: int | None, usd_micros: int | None, model: str | None, now: datetime) -> dict[str, Any]:
    """The columns a turn's reconciliation writes: ``settled`` with what was reported, or
    ``unknown`` (nothing usable reported: the amounts stay NULL, the estimate stays held); the
    model only when one was reported."""
    unknown = tokens is None and usd_micros is None
    values: dict[str, Any] = dict(state=(UsageState.UNKNOWN if unknown else UsageState.SETTLED).value, settled_at_us=now)
    if not unknown:
        values.update(tokens=tokens, usd_micros=usd_micros)
    if model is not None:
        values["model"] = model
    return values


def _tokens(value: object, field: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_TOKENS:
        raise InvalidInput(field, f"a whole number of tokens in 0..{MAX_TOKENS}")
    return value


def _usd(value: object, field: str) -> int | None:
    if value is None:
        return None
    if type(value) is not int or not 0 <= value <= MAX_USD_MICROS:
        raise InvalidInput(field, "whole micro-dollars, 0 or more")
    return value


def _check_lane(goal: str, agent: str, automation: str) -> None:
    for value, name in ((goal, "goal"), (agent, "agent"), (automation, "automation")):
        check_id(value, name)


def _check_reported(tokens: int | None, usd_micros: int | None, *estimate_tokens: int) -> None:
    """Refuse reported usage that is not a count of tokens (None: unread) or micro-dollars (and an
    estimate given that is not a count of tokens), in that order."""
    if tokens is not None:
        _tokens(tokens, "tokens")
    for estimate in estimate_tokens:
        _tokens(estimate, "estimate_tokens")
    _usd(usd_micros, "usd_micros")


class Usage(Repository):
    """The ledger's use cases on a store (each one unit of work)."""

    def hold(self, turn_id: str, goal: str, agent: str, automation: str, estimate_tokens: int, model: str | None = None) -> bool:
        """``hold`` in a unit of its own, at the clock's now."""
        _check_lane(goal, agent, automation)
        with self.store.write() as conn:
            return hold(conn, turn_id, goal, agent, automation, read_clock(self.clock), estimate_tokens, model)

    def settle(
        self, turn_id: str, *, tokens: int | None, usd_micros: int | None = None, model: str | None = None
    ) -> tuple[UsageEntry, bool]:
        """Reconcile a held turn to its reported usage, once: (entry, changed). ``tokens`` None
        (and no cost): the usage could not be read, the turn is settled ``unknown`` and its
        estimate stays held. The same report again is a no-op; a different one for a settled
        turn is refused (``InvalidInput``); a turn never held is ``NotFound``."""
        _check_reported(tokens, usd_micros)
        u = s.usage
        now = read_clock(self.clock)
        with self.store.write() as conn:
            row = conn.execute(select(u).where(u.c.turn_id == turn_id)).first()
            if row is None:
                raise NotFound(f"turn {turn_id!r} holds no usage; settle only turns admission held")
            entry = entry_from_row(row)
            unknown = tokens is None and usd_micros is None
            if entry.state is not UsageState.HELD:
                same = (entry.state is UsageState.UNKNOWN) if unknown else (entry.tokens, entry.usd_micros) == (tokens, usd_micros)
                if same:
                    return entry, False
                raise InvalidInput("turn_id", f"turn {turn_id}'s usage was already reconciled ({entry.state.value}); it is reconciled once")
            values = _settlement(tokens, usd_micros, model, now)
            conn.execute(update(u).where(u.c.turn_id == turn_id, u.c.state == UsageState.HELD.value).values(**values))
            row = conn.execute(select(u).where(u.c.turn_id == turn_id)).one()
        return entry_from_row(row), True

    def report(
        self,
        report_key: str,
        *,
        goal: str,
        agent: str,
        automation: str,
        tokens: int | None,
        usd_micros: int | None = None,
        model: str | None = None,
        turn_prefix: str | None = None,
        unread_key: str | None = None,
        estimate_tokens: int = 0,
    ) -> tuple[UsageEntry, bool]:
        """Record the usage of one turn an agent app ran on its own timer, reported by its
        end-of-turn hook under ``report_key`` (the same key again: a no-op). The report is of the
        session's last turn, so it settles the newest of the session's open rows: a hold of the
        prompt hook's (its turn id starting with ``turn_prefix``), or, for a readable report, the
        row an unreadable report of the session left unknown (``unread_key``, the key such a
        report takes: the same turn, read again). An older hold stays held: its prompt never
        reported (an interrupted turn), and its estimate keeps counting. With no open row, a
        settled row is written. ``tokens`` None: the usage could not be read (recorded unknown,
        ``estimate_tokens`` held)."""
        _check_lane(goal, agent, automation)
        if not isinstance(report_key, str) or not 1 <= len(report_key) <= 128:
            raise InvalidInput("report_key", "1..128 characters")
        _check_reported(tokens, usd_micros, estimate_tokens)
        u = s.usage
        now = read_clock(self.clock)
        with self.store.write() as conn:
            row = conn.execute(select(u).where(u.c.report_key == report_key)).first()
            if row is not None:
                return entry_from_row(row), False
            held = None
            open_rows = []
            if turn_prefix:
                open_rows.append(and_(u.c.state == UsageState.HELD.value, u.c.turn_id.startswith(turn_prefix, autoescape=True)))
            if unread_key and unread_key != report_key and (tokens is not None or usd_micros is not None):
                open_rows.append(and_(u.c.state == UsageState.UNKNOWN.value, u.c.report_key == unread_key))
            if open_rows:
                held = conn.execute(
                    select(u.c.turn_id)
                    .where(u.c.goal_id == goal, u.c.agent_id == agent, u.c.automation_id == automation, or_(*open_rows))
                    .order_by(u.c.at_us.desc(), u.c.turn_id.desc())
                    .limit(1)
                ).first()
            values = {**_settlement(tokens, usd_micros, model, now), "report_key": report_key}
            if held is not None:  # the figures are the hook's now, not the admission's estimate
                conn.execute(update(u).where(u.c.turn_id == held.turn_id).values(**values, source=UsageSource.HOOK.value))
                turn_id = held.turn_id
            else:
                turn_id = report_key
                _insert(conn, turn_id, (goal, agent, automation), now, estimate_tokens, UsageSource.HOOK, **values)
            row = conn.execute(select(u).where(u.c.turn_id == turn_id)).one()
        return entry_from_row(row), True

    def get(self, turn_id: str) -> UsageEntry | None:
        u = s.usage
        row = self._read_first(select(u).where(u.c.turn_id == turn_id))
        return entry_from_row(row) if row is not None else None

    def in_window(self, series: Series, window: Window) -> WindowUsage:
        """``window_usage`` at the clock's now, in one read."""
        now = read_clock(self.clock)
        with self.store.read() as conn:
            return window_usage(conn, series, window, now)

    def ledger(self, scope: tuple[str, ...], *, since: datetime | None, limit: int) -> tuple[builtins.list[UsageEntry], dict[str, int]]:
        """The newest ``limit`` entries of ``scope`` ((), (goal,), (goal, agent) or (goal, agent,
        automation)) at or after ``since`` (None: all), newest first, and the owner's prices: one
        read walking an ``at_us`` index backwards. A damaged entry or price raises ``CorruptState``."""
        u = s.usage
        columns = (u.c.goal_id, u.c.agent_id, u.c.automation_id)
        where = [c == check_id(v, n) for c, v, n in zip(columns, scope, ("goal", "agent", "automation"), strict=False)]
        if since is not None:
            where.append(u.c.at_us >= since)
        stmt = select(u).where(*where).order_by(u.c.at_us.desc(), u.c.turn_id.desc()).limit(check_limit(limit))
        with self.store.read() as conn:
            rows, prices = conn.execute(stmt).all(), read_prices(conn)
        return [entry_from_row(r) for r in rows], prices
