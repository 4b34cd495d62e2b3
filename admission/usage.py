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
import math
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict
from sqlalchemy import BigInteger, Select, and_, bindparam, insert, literal_column, or_, select, type_coerce, update
from sqlalchemy.engine import Connection

from . import _schema as s
from ._types import decode_us
from .clock import Clock, SystemClock, read_clock
from .errors import CorruptState, InvalidInput, NotFound, ReductionNotAuthorized, RevisionConflict
from .limits import Series
from .policies import check_owner_ref
from .scope import check_id
from .store import Store
from .windows import MAX_TOKENS, NEVER, Window, amount_frees_at, format_usd, micros_to_usd, usd_to_micros

# How far back the largest per-turn usage of a lane is the estimate for its next turn.
ESTIMATE_LOOKBACK = timedelta(days=30)
MAX_USD_MICROS = 10**15
_MAX_PRICE_MICROS = 10_000 * 1_000_000  # $10,000 per million tokens: beyond it, a typo


class UsageState(StrEnum):
    """Where a turn's usage stands."""

    HELD = "held"  # admitted: the estimate is held until the turn settles
    SETTLED = "settled"  # reconciled to the reported usage
    UNKNOWN = "unknown"  # settled, but its usage could not be read: the estimate stays held


class UsageSource(StrEnum):
    """What wrote the row."""

    ADMISSION = "admission"  # held at admission, settled by a managed turn's meter
    METER = "meter"  # a managed turn's meter, for a turn admission held nothing for
    HOOK = "hook"  # reported by an agent app's end-of-turn hook


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


def entry_from_row(row: Any) -> UsageEntry:
    """The one decoder of a usage row; anything floorgate never writes raises ``CorruptState``."""
    turn = row.turn_id
    for name in ("turn_id", "goal_id", "agent_id", "automation_id"):
        if not isinstance(getattr(row, name), str):
            raise CorruptState(f"malformed usage of turn {turn!r}: {name} {getattr(row, name)!r}")
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
    return UsageEntry(
        turn_id=turn,
        goal_id=row.goal_id,
        agent_id=row.agent_id,
        automation_id=row.automation_id,
        at=at,
        state=state,
        model=row.model,
        estimate_tokens=estimate,
        tokens=tokens,
        usd_micros=usd,
        source=source,
    )


class WindowUsage(NamedTuple):
    """A series' usage in a window at ``now``: settled and held, in tokens and micro-dollars.
    ``unpriced``: models (None: a turn without one) whose tokens have no cost reported and no
    price set; while it is not empty the USD figures are incomplete, and a USD budget denies."""

    window: Window
    now: datetime
    entries: tuple[UsageEntry, ...]
    settled_tokens: int
    held_tokens: int
    settled_usd_micros: int
    held_usd_micros: int
    unpriced: frozenset[str | None]
    usd_of: tuple[int | None, ...]  # per entry, its cost in micro-dollars (None: unpriced)

    @property
    def tokens(self) -> int:
        return self.settled_tokens + self.held_tokens

    @property
    def usd_micros(self) -> int:
        return self.settled_usd_micros + self.held_usd_micros

    def tokens_frees_at(self, budget: int, need: int) -> datetime | None:
        """None when ``need`` more tokens fit the ``budget`` now; else when enough ages out
        (``windows.NEVER`` when ``need`` alone is over the budget)."""
        return amount_frees_at([(e.at, e.counted_tokens) for e in self.entries], budget, need, self.window, self.now)

    def usd_frees_at(self, budget_micros: int, need_micros: int) -> datetime | None:
        """As ``tokens_frees_at`` for micro-dollars; ``windows.NEVER`` while any usage is unpriced
        (it cannot be known to fit: fail closed until the owner sets a price)."""
        if self.unpriced:
            return NEVER
        amounts = [(e.at, usd) for e, usd in zip(self.entries, self.usd_of, strict=True) if usd is not None]
        return amount_frees_at(amounts, budget_micros, need_micros, self.window, self.now)


_NAMES = ("goal", "agent", "automation", "since")


def cost_micros(tokens: int, price_micros_per_mtok: int) -> int:
    """Tokens at a price per million tokens, rounded up to a whole micro-dollar (conservative)."""
    return math.ceil(tokens * price_micros_per_mtok / 1_000_000)


def series_where(table: Any, column: str, by_agent: bool, by_automation: bool, names: tuple[str, str, str, str] = _NAMES) -> Any:
    """The rows of ``table`` that count for one series from a time on: the series' goal, its
    agent (``by_agent``) and its automation (``by_automation``), ``column`` at or after the time.
    ``names``: the bound parameters of the goal, agent, automation and time. A time below the
    epoch is damage the range would skip: such a row is read too, so it fails the decoder."""
    goal, agent, automation, since = names
    at = table.c[column]
    where = [table.c.goal_id == bindparam(goal), or_(at >= bindparam(since), type_coerce(at, BigInteger) < literal_column("0"))]
    if by_agent:
        where.append(table.c.agent_id == bindparam(agent))
    if by_automation:
        where.append(table.c.automation_id == bindparam(automation))
    return and_(*where)


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
    entries = tuple(e for e in map(entry_from_row, rows) if window.counts(e.at, now))
    settled_t = held_t = settled_usd = held_usd = 0
    unpriced: set[str | None] = set()
    usd_of: list[int | None] = []
    for e in entries:
        tokens = e.counted_tokens
        if e.held:
            held_t += tokens
        else:
            settled_t += tokens
        if e.state is UsageState.SETTLED and e.usd_micros is not None:
            usd: int | None = e.usd_micros
        elif e.model is not None and e.model in prices:
            usd = cost_micros(tokens, prices[e.model])
        else:
            usd = None
            unpriced.add(e.model)
        usd_of.append(usd)
        if usd is not None:
            if e.held:
                held_usd += usd
            else:
                settled_usd += usd
    return WindowUsage(window, now, entries, settled_t, held_t, settled_usd, held_usd, frozenset(unpriced), tuple(usd_of))


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
    since = now - ESTIMATE_LOOKBACK
    entries = [entry_from_row(r) for r in rows]
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
    u = s.usage
    if conn.execute(select(u.c.turn_id).where(u.c.turn_id == turn_id)).first() is not None:
        return False
    _insert(conn, turn_id, (goal, agent, automation), at, estimate_tokens, UsageSource.ADMISSION, state=UsageState.HELD.value, model=model)
    return True


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


def _insert(
    conn: Connection, turn_id: str, lane: tuple[str, str, str], at: datetime, estimate_tokens: int, source: UsageSource, **values: Any
) -> None:
    """Write ``turn_id``'s ledger row for the lane ``(goal, agent, automation)``, at ``at``:
    ``values`` are its state and what was reported (``_settlement``); the amounts, model,
    settlement time and report key it does not give are NULL."""
    columns = {"tokens": None, "usd_micros": None, "model": None, "settled_at_us": None, "report_key": None, **values}
    conn.execute(
        insert(s.usage).values(
            turn_id=turn_id, goal_id=lane[0], agent_id=lane[1], automation_id=lane[2], at_us=at,
            estimate_tokens=estimate_tokens, source=source.value, **columns,
        )
    )  # fmt: skip


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


class Usage:
    """The ledger's use cases on a store (each one unit of work)."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()

    def hold(self, turn_id: str, goal: str, agent: str, automation: str, estimate_tokens: int, model: str | None = None) -> bool:
        """``hold`` in a unit of its own, at the clock's now."""
        for value, name in ((goal, "goal"), (agent, "agent"), (automation, "automation")):
            check_id(value, name)
        with self.store.write() as conn:
            return hold(conn, turn_id, goal, agent, automation, read_clock(self.clock), estimate_tokens, model)

    def settle(
        self, turn_id: str, *, tokens: int | None, usd_micros: int | None = None, model: str | None = None
    ) -> tuple[UsageEntry, bool]:
        """Reconcile a held turn to its reported usage, once: (entry, changed). ``tokens`` None
        (and no cost): the usage could not be read, the turn is settled ``unknown`` and its
        estimate stays held. The same report again is a no-op; a different one for a settled
        turn is refused (``InvalidInput``); a turn never held is ``NotFound``."""
        if tokens is not None:
            _tokens(tokens, "tokens")
        _usd(usd_micros, "usd_micros")
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
        estimate_tokens: int = 0,
    ) -> tuple[UsageEntry, bool]:
        """Record the usage of one turn an agent app ran on its own timer, reported by its
        end-of-turn hook under ``report_key`` (the same key again: a no-op). When the lane holds
        an estimate for a turn whose id starts with ``turn_prefix`` (the prompt hook's admission
        in that session), the oldest such is settled; else a settled row is written. ``tokens``
        None: the usage could not be read (recorded unknown, ``estimate_tokens`` held)."""
        for value, name in ((goal, "goal"), (agent, "agent"), (automation, "automation")):
            check_id(value, name)
        if not isinstance(report_key, str) or not 1 <= len(report_key) <= 128:
            raise InvalidInput("report_key", "1..128 characters")
        if tokens is not None:
            _tokens(tokens, "tokens")
        _tokens(estimate_tokens, "estimate_tokens")
        _usd(usd_micros, "usd_micros")
        u = s.usage
        now = read_clock(self.clock)
        with self.store.write() as conn:
            row = conn.execute(select(u).where(u.c.report_key == report_key)).first()
            if row is not None:
                return entry_from_row(row), False
            held = None
            if turn_prefix:
                held = conn.execute(
                    select(u.c.turn_id)
                    .where(
                        u.c.goal_id == goal,
                        u.c.agent_id == agent,
                        u.c.automation_id == automation,
                        u.c.state == UsageState.HELD.value,
                        u.c.turn_id.startswith(turn_prefix, autoescape=True),
                    )
                    .order_by(u.c.at_us)
                    .limit(1)
                ).first()
            values = {**_settlement(tokens, usd_micros, model, now), "report_key": report_key}
            if held is not None:
                conn.execute(update(u).where(u.c.turn_id == held.turn_id).values(**values))
                turn_id = held.turn_id
            else:
                turn_id = report_key
                _insert(conn, turn_id, (goal, agent, automation), now, estimate_tokens, UsageSource.HOOK, **values)
            row = conn.execute(select(u).where(u.c.turn_id == turn_id)).one()
        return entry_from_row(row), True

    def get(self, turn_id: str) -> UsageEntry | None:
        u = s.usage
        with self.store.read() as conn:
            row = conn.execute(select(u).where(u.c.turn_id == turn_id)).first()
        return entry_from_row(row) if row is not None else None

    def in_window(self, series: Series, window: Window) -> WindowUsage:
        """``window_usage`` at the clock's now, in one read."""
        now = read_clock(self.clock)
        with self.store.read() as conn:
            return window_usage(conn, series, window, now)


class Price(BaseModel):
    """An owner-set price per million tokens for a model (for usage whose cost is not reported)."""

    model_config = ConfigDict(frozen=True)

    model: str
    usd_per_mtok_micros: int | None  # None: removed
    revision: int
    owner_ref: str
    updated_at: datetime


_PRICES = select(s.model_prices.c.model, s.model_prices.c.usd_per_mtok_micros)  # built once


def read_prices(conn: Connection) -> dict[str, int]:
    """Every set price, micro-dollars per million tokens by model; a damaged one raises ``CorruptState``."""
    return prices_of(conn.execute(_PRICES))


def prices_of(rows: Iterable[Any]) -> dict[str, int]:
    """``read_prices`` from the price rows (``model``, ``usd_per_mtok_micros``), however read."""
    out: dict[str, int] = {}
    for row in rows:
        if row.usd_per_mtok_micros is None:
            continue
        if type(row.usd_per_mtok_micros) is not int or not 0 <= row.usd_per_mtok_micros <= _MAX_PRICE_MICROS:
            raise CorruptState(f"malformed price of model {row.model!r}: {row.usd_per_mtok_micros!r}")
        out[row.model] = row.usd_per_mtok_micros
    return out


def check_model(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or not value.isprintable() or value != value.strip():
        raise InvalidInput("model", "a model name of 1..128 printable characters")
    return value


class Prices:
    """Owner-set prices per million tokens, by model: exact-revision compare-and-set; lowering or
    removing a price (which lets a USD budget admit more) needs ``allow_reduction``."""

    def __init__(self, store: Store, clock: Clock | None = None) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()

    def set(self, model: str, usd_per_mtok: Any, *, expected_revision: int, owner_ref: str, allow_reduction: bool = False) -> Price:
        """Set (a ``Decimal`` amount) or remove (None) the price of ``model``."""
        check_model(model)
        check_owner_ref(owner_ref)
        if type(expected_revision) is not int or expected_revision < 0:
            raise InvalidInput("expected_revision", "pass the revision you read (0 when no price is set)")
        micros = usd_to_micros(usd_per_mtok) if usd_per_mtok is not None else None
        if micros is not None and micros > _MAX_PRICE_MICROS:
            raise InvalidInput("--usd-per-mtok", "above the cap of 10000 USD per million tokens; check for a typo")
        p = s.model_prices
        now = read_clock(self.clock)
        with self.store.write() as conn:
            row = conn.execute(select(p).where(p.c.model == model)).first()
            current = row.revision if row is not None else 0
            if current != expected_revision:
                raise RevisionConflict(f"price of {model}", expected_revision, current)
            before = row.usd_per_mtok_micros if row is not None else None
            if micros is None and before is None:  # nothing to remove: a revision would record a change that is none
                raise InvalidInput("--usd-per-mtok", f"{model} has no price to remove (0 removes a price; give one above 0 to set it)")
            if before is not None and (micros is None or micros < before) and not allow_reduction:
                after = format_usd(micros_to_usd(micros)) if micros is not None else "none"
                raise ReductionNotAuthorized(
                    f"price of {model}", "", "", what=f"lowering the price of {model} ({format_usd(micros_to_usd(before))} -> {after})"
                )
            values = dict(usd_per_mtok_micros=micros, revision=current + 1, owner_ref=owner_ref, updated_at_us=now)
            if row is None:
                conn.execute(insert(p).values(model=model, **values))
            else:
                done = conn.execute(update(p).where(p.c.model == model, p.c.revision == current).values(**values))
                if done.rowcount != 1:
                    raise RevisionConflict(f"price of {model}", expected_revision, current)
        return Price(model=model, usd_per_mtok_micros=micros, revision=current + 1, owner_ref=owner_ref, updated_at=now)

    def list(self) -> builtins.list[Price]:
        p = s.model_prices
        with self.store.read() as conn:
            rows = conn.execute(select(p).order_by(p.c.model)).all()
            read_prices(conn)  # a damaged price fails the readback, never shows as a price
        return [
            Price(
                model=r.model,
                usd_per_mtok_micros=r.usd_per_mtok_micros,
                revision=r.revision,
                owner_ref=r.owner_ref,
                updated_at=r.updated_at_us,
            )
            for r in rows
        ]
