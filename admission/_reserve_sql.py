"""PostgreSQL's reserving statement: the whole decision in one statement (``RESERVE_SQL``), and
its forms that hold a turn's estimate (``RESERVE_HOLD_SQL``) or run ``fg_admit`` only under a guard
(``reserve_statement``, for ``_limit_guard``). ``_reserving._reserve_pg`` sends them and decodes the
row with the facts' one decoder (``_facts.decode_facts``)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, String, Text, and_, bindparam, cast, func, null, or_, select, true
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.selectable import Select

from ._schema import usage as _usage_table
from .decide._sql import GOAL_LOCK, GUARDED, KIND, LIM, LOCK, LOCK_ADMITTED, NOW, REASON, TR, XR, ZERO, A, G, T, X, compiled, text_value
from .decide.facts import FACTS


# PostgreSQL: the whole decision in one statement: ``fg_facts`` (inlined SQL) reads the facts in
# the encoding above with what they decide: 'insert', 'admit' or 'deny'. Only when that unlocked
# read may write does the gated lateral subquery call ``fg_admit``, which takes the agent's lock
# (after the goal's, for a goal whose floor counts across agents), reads again and inserts when it
# still admits (OFFSET 0 keeps the subquery unflattened, so its
# condition stays a one-time filter above the call, never a join filter after it). Its columns are
# NULL when it did not run.
def _reserve(labeled: bool = False, guard: ColumnElement[Any] | None = None) -> Select[Any]:
    columns = [*(f.name for f in FACTS), "outcome"]
    lane = (G, A, X, XR, T, cast(TR, BigInteger), cast(NOW, BigInteger))
    reason, lim = cast(REASON, Text), cast(LIM, Integer)
    facts = func.fg_facts(*lane, reason, GUARDED, lim).table_valued(*columns).alias("ff")
    # Fenced (OFFSET 0): the inlined function's outcome, one CASE over every check, is computed once
    # for the row; flattened, PostgreSQL evaluated it again for each of its three uses below (a
    # third of the denial's server time). A ``guard`` is computed there too, once, before the call.
    f = select(*facts.c, *([guard.label("same")] if guard is not None else [])).offset(ZERO).subquery("f")
    read = [c for c in f.c if c.name != "same"]
    locks = (cast(LOCK, BigInteger), cast(GOAL_LOCK, BigInteger))
    admit = func.fg_admit(*lane, KIND, reason, *locks, GUARDED, lim).table_valued(*columns).alias("admitted")
    may_write = or_(f.c.outcome == text_value("insert"), and_(f.c.outcome == text_value("admit"), cast(LOCK_ADMITTED, Boolean)))
    if guard is not None:  # fg_admit runs only when the guard holds
        may_write = and_(f.c.same, may_write)
    r = select(admit).where(may_write).offset(ZERO).lateral("r")
    same = [f.c.same] if guard is not None else []  # last: the columns before it are RESERVE_SQL's
    if labeled:  # each column named apart (f_..., r_...), for a statement that reads the row by name
        named = [*(c.label(f"f_{c.name}") for c in read), *(c.label(f"r_{c.name}") for c in r.c), *same]
        return select(*named).select_from(f.outerjoin(r, true()))
    return select(*read, *r.c, *same).select_from(f.outerjoin(r, true()))


RESERVE_SQL = compiled(_reserve(), "postgresql")


def reserve_statement(guard: ColumnElement[Any] | None = None, *, hold: bool = False) -> Select[Any]:
    """``RESERVE_SQL`` (``hold``: ``RESERVE_HOLD_SQL``) as Core; with ``guard``, a boolean read by
    the same statement before ``fg_admit`` may run: fg_admit runs only when it holds, and it is the
    row's last column (``_limit_guard``: a lane's limits unchanged since its plain read)."""
    return _reserve_holding(guard) if hold else _reserve(guard=guard)


def _reserve_holding(guard: ColumnElement[Any] | None = None) -> Select[Any]:
    """``RESERVE_SQL``'s row, and in the same statement a turn's estimate held when ``fg_admit``
    inserted its start (``usage.hold``'s row; a turn already held keeps its row)."""
    d = _reserve(labeled=True, guard=guard).cte("d")
    u = _usage_table
    held = select(
        T, G, A, X, cast(NOW, BigInteger), text_value("held"), cast(bindparam("model"), String), cast(bindparam("est"), BigInteger),
        null(), null(), text_value("admission"), null(), null(),
    ).where(d.c.r_outcome == text_value("insert"))  # fmt: skip
    names = ["turn_id", "goal_id", "agent_id", "automation_id", "at_us", "state", "model", "estimate_tokens"]
    names += ["tokens", "usd_micros", "source", "settled_at_us", "report_key"]
    hold = postgresql_insert(u).from_select(names, held).on_conflict_do_nothing(index_elements=[u.c.turn_id]).cte("h")
    return select(*d.c).add_cte(hold)


# PostgreSQL's reservation of a lane with a token or USD budget: the decision and the estimate it
# holds in one round trip (``_reserving._reserve_pg`` with ``hold``).
RESERVE_HOLD_SQL = compiled(_reserve_holding(), "postgresql", also=("model", "est"))
