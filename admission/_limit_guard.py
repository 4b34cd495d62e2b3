"""A known limited lane's admission on PostgreSQL, guarded by the limits its plain read found.

A reservation first reads the lane's facts and limits without a lock (``_limit_read.plain``) and
the client checks them (``LaneCheck``); a denial ends there. An admission needs that check made
under the agent's lock (and the goal's where a limit counts across agents). Rather than read the
limits again under the lock and check them on the client (a statement and a wait more), the
reserving statement reads the same limit parts, with the plain read's parameters, and compares
them with the texts the plain read answered (``guard``). The statement runs after the locks (sent
with them as one pipeline in one transaction, ``Store.locked``), so it sees every start and usage
row committed before them. Equal texts: the client's check is the check a locked read would make
(it is a function of those texts and the instant, and a later instant never binds more), and
fg_admit runs with it. Any difference (a start, a usage row or a rule changed since): fg_admit does
not run, nothing is written, and the caller reads the limits under the lock as before
(``LimitsChanged``).
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import Text, and_, bindparam

from ._limit_check import LaneCheck, held_estimate
from ._limit_read import KnownRead, LaneLimits, limit_parts
from ._reserve_sql import reserve_statement
from ._reserving import LimitsChanged, RowSender, _reserve_pg
from .alerts import alerts_due
from .clock import Clock
from .decide._sql import compiled
from .decide.checks import Request, Verdict
from .store import Store

_E = tuple(f"e{k}" for k in range(64))  # each limit part's text as the plain read answered it


@functools.cache
def _statement(shape: tuple[Any, ...], hold: bool) -> str:
    """The reserving statement (``hold``: holding the estimate) guarded by a lane's limit parts
    (``shape``: ``LaneLimits.shape``), compiled once per shape."""
    parts = limit_parts("postgresql", shape)
    same = and_(*(part.scalar_subquery().is_not_distinct_from(bindparam(_E[k], type_=Text)) for k, part in enumerate(parts)))
    series, _budgets, _usd, _largest, nths = shape
    also = (*(f"s{i}" for i in range(len(series))), *(f"o{j}" for j in range(len(nths))), "sl", *_E[: len(parts)])
    return compiled(reserve_statement(same, hold=hold), "postgresql", also=(*also, *(("model", "est") if hold else ())))


def guard(lane: LaneLimits, seen: KnownRead, *, hold: bool) -> tuple[str, dict[str, Any]] | None:
    """The reserving statement guarded by ``seen`` (a plain read of ``lane`` that checked its limits
    in full) and the guard's parameters; None when ``seen`` cannot stand for a locked read (its
    limits kept from an earlier read, or read for other definitions than ``lane``'s)."""
    if seen.check is None or seen.sent is None or seen.got is None or not seen.got or seen.got[0] != lane.key:
        return None
    params = dict(seen.sent)
    params.update(zip(_E, seen.got, strict=False))
    return _statement(lane.shape, hold), params


def reserve(
    store: Store, req: Request, clock: Clock, lane: LaneLimits, locks: tuple[str, str], seen: KnownRead
) -> tuple[Verdict, datetime] | None:
    """The known ``lane``'s reservation from its plain read ``seen``, in a transaction of its own:
    the locks (``locks``: the agent's, and the outer one taken first, the goal's where a limit
    counts across agents, else the agent's again) and the guarded reserving statement, one pipeline
    (``Store.locked``). None, with nothing written, as ``reserve_on``."""
    agent_lock, outer = locks
    across = outer != agent_lock
    sender = store.locked((outer, agent_lock) if across else (agent_lock,))
    done = reserve_on(sender, req, clock, lane, agent_lock, outer if across else None, seen)
    return (done[0], done[1]) if done is not None else None


def reserve_on(
    tx: RowSender, req: Request, clock: Clock, lane: LaneLimits, agent_lock: str, goal_lock: str | None, seen: KnownRead
) -> tuple[Verdict, datetime, LaneCheck] | None:
    """The reserving statement guarded by ``seen``'s limit texts, on ``tx`` whose transaction holds
    the locks already (the goal's, ``goal_lock``, where a limit counts across agents): the decision,
    the start and the estimate held in one statement, and the check it was decided with. None,
    with nothing written, when the guard found the limits changed or ``seen`` cannot stand for a
    locked read (no full check, or an alert to write): the caller reads them under the lock."""
    check = seen.check
    if check is None or alerts_due(check.states):
        return None
    hold = held_estimate(check)
    guarded = guard(lane, seen, hold=hold is not None)
    if guarded is None:
        return None
    try:
        verdict, now, _ = _reserve_pg(
            tx, req, clock, agent_lock,
            lock_admitted=True, goal_lock=goal_lock, lim=check.code, states=check.states, hold=hold, guard=guarded,
        )  # fmt: skip
    except LimitsChanged:
        return None
    return verdict, now, check
