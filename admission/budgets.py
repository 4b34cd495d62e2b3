"""Where each limit across runs stands for one lane at one instant: the facts a count or budget
check decides from, read on the caller's connection (inside the decision's read, or for readback).

``limit_states`` takes the lane's ``BoundLimit``s (``limits.bound_limits``) and answers, per
limit, what is used (settled), held (in flight), left, whether one more start (holding
``estimate_tokens``) would cross it, and when it will not (``frees_at``: the instant a start leaves
a rolling window or enough usage ages out, or the next calendar period). A limit that cannot be
checked (no estimate for a token budget, no price for a USD one) is ``blocked`` with a
``problem``: fail closed, never a guess. A damaged start or usage row raises ``CorruptState``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import Select, select
from sqlalchemy.engine import Connection

from . import _schema as s
from ._series import series_where
from .limits import BoundLimit, LimitKind, Series
from .prices import cost_micros, estimate_price
from .usage import WindowUsage, read_prices, window_usage
from .windows import NEVER, Counted, Window, counted, counted_frees_at

_NO_ESTIMATE = "no estimate for a turn of this lane: set --estimate-tokens (or the envelope's max_tokens)"


class LimitState(NamedTuple):
    """One limit of a lane at ``now``. ``used`` settled, ``held`` in flight (starts: all of them
    are ``used``), ``need`` what one more start would add; ``blocked``: it would cross the limit,
    or cannot be checked (``problem``); ``frees_at``: when it would not (None: it does not block;
    ``windows.NEVER``: not by waiting)."""

    limit: BoundLimit
    used: int
    held: int
    need: int | None
    blocked: bool
    frees_at: datetime | None
    problem: str | None = None

    @property
    def left(self) -> int:
        return max(0, self.limit.amount - self.used - self.held)

    @property
    def short_by(self) -> int | None:
        """What the next start would hold, when that is why a budget with some of it left blocks
        (None otherwise: it does not block, blocks with nothing left, or cannot be checked)."""
        blocked_by_need = self.blocked and self.problem is None and self.need is not None and self.need > self.left > 0
        return self.need if blocked_by_need and self.limit.kind is not LimitKind.STARTS else None


@functools.cache
def _starts_statement(by_agent: bool, by_automation: bool) -> Select[Any]:
    # Built once per shape and bound per call: building Core statements is most of a limited
    # lane's cost, and a cached statement also hits SQLAlchemy's compiled cache.
    return select(s.starts.c.anchor_us).where(series_where(s.starts, "anchor_us", by_agent, by_automation))


def starts_in_window(conn: Connection, series: Series, window: Window, now: datetime) -> list[datetime]:
    """The anchors of ``series``' starts (reserved and confirmed, manual ones included) that the
    window at ``now`` counts (and any dated after ``now``); one indexed statement."""
    stmt = _starts_statement(series.agent_id is not None, series.automation_id is not None)
    params = {"goal": series.goal_id, "since": window.start(now), "agent": series.agent_id, "automation": series.automation_id}
    anchors = [row.anchor_us for row in conn.execute(stmt, params)]
    return [a for a in anchors if window.counts(a, now)]


class Gathered(NamedTuple):
    """What a lane's limits are checked from, however it was read: per limit (in the order given)
    its starts as ``windows.Counted`` (a count) or its usage (a budget), and the prices (USD budgets)."""

    starts: dict[int, Counted]
    usage: dict[int, WindowUsage]
    prices: dict[str, int]


def limit_states(
    conn: Connection, limits: list[BoundLimit], now: datetime, *, estimate_tokens: int | None, model: str | None
) -> list[LimitState]:
    """Each limit's state for one more start of a lane whose turn holds ``estimate_tokens`` of
    ``model`` (``usage.lane_estimate``); reads starts, usage and prices once each per series."""
    # Prices matter to a USD budget only: a lane without one does not read them.
    prices: dict[str, int] = read_prices(conn) if any(x.kind is LimitKind.USD for x in limits) else {}
    gathered = Gathered({}, {}, prices)
    for i, limit in enumerate(limits):
        if limit.kind is LimitKind.STARTS:
            gathered.starts[i] = counted(starts_in_window(conn, limit.series, limit.window, now), limit.amount, limit.window, now)
        else:
            gathered.usage[i] = window_usage(conn, limit.series, limit.window, now, prices)
    return states_of(limits, gathered, now, estimate_tokens=estimate_tokens, model=model)


def states_of(
    limits: Sequence[BoundLimit], gathered: Gathered, now: datetime, *, estimate_tokens: int | None, model: str | None
) -> list[LimitState]:
    """``limit_states`` from what was ``gathered`` for ``limits``: the one arithmetic of a count
    or budget verdict and when it frees (a start's anchors past ``now`` count too)."""
    out: list[LimitState] = []
    prices = gathered.prices
    for i, limit in enumerate(limits):
        if limit.kind is LimitKind.STARTS:
            found = gathered.starts[i]
            frees = counted_frees_at(found, limit.amount, limit.window, now)
            out.append(LimitState(limit, found.starts, 0, 1, frees is not None, frees))
            continue
        usage = gathered.usage[i]
        if limit.kind is LimitKind.TOKENS:
            need = estimate_tokens
            if need is None:
                out.append(LimitState(limit, usage.settled_tokens, usage.held_tokens, None, True, NEVER, _NO_ESTIMATE))
                continue
            frees = usage.tokens_frees_at(limit.amount, need)
            out.append(LimitState(limit, usage.settled_tokens, usage.held_tokens, need, frees is not None, frees))
            continue
        problem = None
        price = estimate_price(model, prices)
        if estimate_tokens is None:
            problem = _NO_ESTIMATE
        elif price is None or usage.unpriced:
            missing = {m for m in usage.unpriced if m not in prices} | ({model} if price is None else set())
            names = ", ".join(sorted(m or "(no model)" for m in missing))
            problem = f"usage of {names} has no reported cost and no price: set one with 'floorgate policy price MODEL --usd-per-mtok X'"
        if problem is not None or estimate_tokens is None or price is None:
            out.append(LimitState(limit, usage.settled_usd_micros, usage.held_usd_micros, None, True, NEVER, problem))
            continue
        need_usd = cost_micros(estimate_tokens, price)
        frees = usage.usd_frees_at(limit.amount, need_usd)
        out.append(LimitState(limit, usage.settled_usd_micros, usage.held_usd_micros, need_usd, frees is not None, frees))
    return out


def binding(states: list[LimitState]) -> LimitState | None:
    """The limit that binds: of the blocked ones, the one that frees last (None: none blocks)."""
    blocked = [x for x in states if x.blocked]
    return max(blocked, key=lambda x: x.frees_at or NEVER) if blocked else None
