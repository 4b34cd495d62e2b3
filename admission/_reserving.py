"""A reservation's serialized statements: where a start may be inserted (``_admit`` on SQLite,
``_reserve_pg`` through PostgreSQL's ``RESERVE_SQL``), each decided by the one rule
(``decide.checks.evaluate``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from ._facts import INSERT_START_SQL, decode_facts, facts_params, read_facts
from ._reserve_sql import RESERVE_HOLD_SQL, RESERVE_SQL
from ._rule import _ADMITTED, _ADMITTING, _AUTOMATIC, _MANUAL
from .budgets import LimitState
from .clock import Clock, read_clock, to_us
from .decide.checks import Request as _Request
from .decide.checks import Verdict as _Verdict
from .decide.checks import evaluate as _evaluate
from .decide.facts import FACTS, Facts
from .decisions import Reason, StartKind
from .errors import StoreUnavailable
from .journal import JournalEntry, write_entry
from .store import DriverTx, lock_id


def _unchecked(verdict: _Verdict, facts: Facts) -> bool:
    """Whether the decision waits on counts or budgets its read did not check (then the client
    checks them). A floor's wait checks them too: the reported time is the latest of all limits
    and the reason names the binding one. Any other denial (a duplicate, a stale trigger) needs no more."""
    return verdict.reason in _WAITS and facts.limited > 0 and facts.limit_code is None


_WAITS = (Reason.STATE_UNAVAILABLE, Reason.INTERVAL_WAIT)


class LimitsChanged(Exception):
    """A guarded reservation found the lane's limits changed since the read it was guarded by:
    ``fg_admit`` did not run and nothing was written (the caller reads the limits again)."""


class RowSender(Protocol):
    """Where ``_reserve_pg`` sends its statement: a driver transaction, or ``Store.locked``'s
    pipeline (the locks and the statement, one transaction)."""

    relaxed: bool

    def row(self, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None: ...


def _admit(
    tx: DriverTx, req: _Request, clock: Clock, journal: JournalEntry | None, *, lim: int | None = None, states: tuple[LimitState, ...] = ()
) -> tuple[_Verdict, datetime]:
    """The serialized evaluation: only here may a start be inserted. The clock is read under the
    lock, after the facts: a start another process committed a moment ago is in the past.
    ``lim`` and ``states``: the lane's limits as checked in this transaction (``_limit_check``)."""
    facts = read_facts(tx, req.goal, req.agent, req.automation, req.turn_id, req.trigger_us, lim)
    if states:
        facts = facts._replace(limits=states)
    return _admit_read(tx, req, facts, read_clock(clock), journal)


def _admit_read(tx: DriverTx, req: _Request, facts: Facts, now: datetime, journal: JournalEntry | None) -> tuple[_Verdict, datetime]:
    """``_admit`` from the facts its caller read in the serialized transaction, the clock read
    after them (``now``): the decision, and the start inserted when it admits."""
    now_us = to_us(now)
    verdict = _evaluate(facts, req, now_us)
    if verdict.reason in _ADMITTING:
        _insert_start(tx, req, now_us)
    if journal is not None and verdict.reason in _ADMITTED:
        write_entry(tx, journal, now_us)  # SQLite: one writer at a time, no key to note
    return verdict, now


def _reserve_pg(
    tx: RowSender,
    req: _Request,
    clock: Clock,
    lock_key: str,
    *,
    lock_admitted: bool,
    goal_lock: str | None,
    lim: int | None = None,
    states: tuple[LimitState, ...] = (),
    hold: tuple[int, str | None] | None = None,
    guard: tuple[str, dict[str, Any]] | None = None,
) -> tuple[_Verdict, datetime, Facts]:
    """The decision through PostgreSQL's ``RESERVE_SQL``: one statement, which inserts the start when
    it admits; its facts are decoded and explained here by ``_evaluate``, the decision's one rule.
    ``goal_lock``: the goal's key, which fg_admit takes before the agent's when the goal's floor
    counts across agents (None: the caller may not take it now; such a goal's lane then denies).
    ``hold``: the estimate an admitted turn holds and its model, held by the same statement
    (``RESERVE_HOLD_SQL``, in the caller's transaction) when it inserts the start. ``guard``: that
    statement guarded (``_limit_guard``: its text, chosen with ``hold``, and the guard's parameters);
    ``LimitsChanged`` when the guard did not hold (fg_admit did not run).

    The clock is read before the call, so a start another process committed while the call waited
    for the lock can be later than it: that denial (clock_rollback) is decided once more with a
    fresh reading when the clock has since passed that start (a second call, only in that race)."""
    params = facts_params(req.goal, req.agent, req.automation, req.turn_id, req.trigger_us, lim)
    params["kind"] = (_AUTOMATIC if req.manual_reason is None else _MANUAL).value
    params["reason"] = req.manual_reason
    params["lock"] = lock_id(lock_key)
    params["goal_lock"] = lock_id(goal_lock) if goal_lock is not None else None
    params["guarded"] = tx.relaxed
    params["lock_admitted"] = lock_admitted
    sql = RESERVE_SQL
    if hold is not None:
        sql = RESERVE_HOLD_SQL
        params["est"], params["model"] = hold
    if guard is not None:
        sql, params = guard[0], guard[1] | params
    now = read_clock(clock)
    for retry in (True, False):
        params["now"] = now_us = to_us(now)
        row = tx.row(sql, params)
        if row is None:  # pragma: no cover - the statement always returns one row
            raise StoreUnavailable("fg_facts returned no row")
        if guard is not None:
            if row[-1] is not True:
                raise LimitsChanged(f"the limits of {req.goal}/{req.agent} changed since they were read")
            row = row[:-1]
        if row[_ADMIT_RAN] is not None:  # fg_admit ran: its locked read is the one decided on
            row = row[_OUTCOME + 1 :]
        elif row[_OUTCOME] == "insert":  # pragma: no cover - the gate calls fg_admit whenever it reads 'insert'
            raise StoreUnavailable("fg_facts may admit but fg_admit did not run")
        facts = decode_facts(row[:_OUTCOME], req.goal, req.agent, req.automation, req.turn_id)
        if states:
            facts = facts._replace(limits=states)
        verdict = _evaluate(facts, req, now_us)
        outcome = row[_OUTCOME]
        if (outcome == "insert") != (verdict.reason in _ADMITTING):
            # Fail closed either way; an autocommitted start it made stays an unconfirmed reservation
            # (it holds the floor, never launches), which is what a crash before confirm leaves too.
            if outcome == "deny" and facts.goal_floor_us > 0:  # fg_admit found the goal's floor without its lock
                raise StoreUnavailable(
                    f"goal {req.goal}'s floor counts across agents but its lock was not held (set while this decision waited?)"
                )
            raise StoreUnavailable(
                f"the store's fg_facts decided {outcome!r} where this floorgate decides {verdict.reason.value!r} (a mismatched migration?)"
            )
        if retry and verdict.reason is Reason.CLOCK_ROLLBACK and facts.agent_anchor_us is not None:
            later = read_clock(clock)
            if to_us(later) >= facts.agent_anchor_us:
                now = later
                continue
        break
    return verdict, now, facts


# RESERVE_SQL's row: fg_facts' facts and outcome, then fg_admit's (NULL when it did not run).
_OUTCOME = len(FACTS)
_ADMIT_RAN = 2 * len(FACTS) + 1


def _insert_start(tx: DriverTx, req: _Request, now_us: int) -> None:
    tx.execute(
        INSERT_START_SQL,
        {
            "t": req.turn_id,
            "g": req.goal,
            "a": req.agent,
            "x": req.lane,
            "tr": req.trigger_us,
            "now": now_us,
            "kind": (StartKind.MANUAL if req.manual_reason is not None else StartKind.AUTOMATIC).value,
            "reason": req.manual_reason,
        },
    )
