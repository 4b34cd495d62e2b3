"""The decision's SQL idiom: SQLAlchemy Core, compiled once per dialect into the string the driver runs.

``compiled`` renders a Core statement for ``sqlite`` or ``postgresql`` with its bind parameters as
``:name`` (the form ``Store.render`` turns into the driver's paramstyle, and ``server_sql`` into a
PostgreSQL function's ``p_name`` arguments), never their values, and refuses a parameter that is
not one of the decision's (``PARAMS``): a Python literal left in an expression would otherwise
become an anonymous parameter no caller sets. Constants are written as ``literal_column`` values.
``json_row`` and ``json_rows`` are the one place the two dialects' JSON spellings differ.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from functools import cache
from typing import Any

from sqlalchemy import BigInteger, Boolean, Integer, String, Text, bindparam, literal_column
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.engine.interfaces import BindTyping
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.elements import ClauseElement, ColumnElement
from sqlalchemy.sql.functions import FunctionElement

DIALECTS = ("sqlite", "postgresql")

# The parameters every decision statement may take (``facts.PARAMS`` holds their order and types
# for the server function; ``kind``, ``lock`` and the tick's are the statements' own).
G = bindparam("g", type_=String)  # goal
A = bindparam("a", type_=String)  # agent
X = bindparam("x", type_=String)  # lane ('' when no automation)
XR = bindparam("xr", type_=String)  # lane, or a placeholder no rule has
T = bindparam("t", type_=String)  # turn
TR = bindparam("tr", type_=BigInteger)  # trigger (us)
NOW = bindparam("now", type_=BigInteger)
LIM = bindparam("lim", type_=Integer)  # what the client found checking limits
GUARDED = bindparam("guarded", type_=Boolean)  # the server function's relaxed-store switch
REASON = bindparam("reason", type_=String)  # a manual run's reason (None: automatic)
KIND = bindparam("kind", type_=String)  # the start's kind
LOCK = bindparam("lock", type_=BigInteger)  # the agent's advisory lock
GOAL_LOCK = bindparam("goal_lock", type_=BigInteger)  # the goal's, taken when its floor counts across agents (NULL: may not)
LOCK_ADMITTED = bindparam("lock_admitted", type_=Boolean)  # whether an 'admit' may take the lock

EMPTY: ColumnElement[Any] = literal_column("''", String)  # an absent scope level
ONE: ColumnElement[Any] = literal_column("1", Integer)
ZERO: ColumnElement[Any] = literal_column("0", Integer)


def text_value(value: str) -> ColumnElement[Any]:
    """A constant text in the statement itself (not a parameter); ``value`` is ours, never input."""
    return literal_column("'" + value.replace("'", "''") + "'", String)


_KNOWN = frozenset({"g", "a", "x", "xr", "t", "tr", "now", "lim", "guarded", "reason", "kind", "lock", "goal_lock", "lock_admitted"})


@cache
def dialect(name: str) -> Dialect:
    """The dialect ``name`` compiling ``:name`` parameters without driver casts."""
    found: Dialect = sqlite.dialect(paramstyle="named") if name == "sqlite" else postgresql.dialect(paramstyle="named")  # type: ignore[no-untyped-call]
    found.bind_typing = BindTyping.NONE  # the driver's statement today carries no casts of its own
    return found


def compiled(statement: ClauseElement, name: str, also: Collection[str] = ()) -> str:
    """``statement`` as the ``name`` dialect's SQL text with ``:param`` placeholders (compile once,
    keep the string: this is what runs on the hot path); ``also``: parameters of the statement's
    own that its caller sets besides the decision's."""
    done = statement.compile(dialect=dialect(name))
    unknown = set(done.params) - _KNOWN - set(also)
    if unknown:
        raise ValueError(f"a decision statement has parameters no caller sets: {sorted(unknown)}")
    return str(done)


def params_of(statement: ClauseElement, name: str) -> tuple[str, ...]:
    """The parameters ``statement`` takes, in the order it first names them."""
    return tuple(statement.compile(dialect=dialect(name)).params)


_PARAM = re.compile(r"(?<![:\w]):(\w+)")


def server_sql(sql: str) -> str:
    """Compiled ``sql`` with its ``:name`` parameters as a function's ``p_name`` arguments."""
    return _PARAM.sub(r"p_\1", sql)


class json_row(FunctionElement[str]):
    """One row as a JSON array (text) of its values, in order."""

    type = Text()
    inherit_cache = True
    name = "json_row"


class json_rows(FunctionElement[str]):
    """An aggregate: the group's rows as one JSON array (text) of arrays (NULL over no row on
    SQLite: '[]'; on PostgreSQL: NULL)."""

    type = Text()
    inherit_cache = True
    name = "json_rows"


# Each dialect's spelling of the two: the SQL written around the comma-separated values.
_JSON_SPELLINGS: dict[tuple[type[FunctionElement[str]], str], tuple[str, str]] = {
    (json_row, "sqlite"): ("json_array(", ")"),
    (json_row, "postgresql"): ("CAST(json_build_array(", ") AS TEXT)"),
    (json_rows, "sqlite"): ("json_group_array(json_array(", "))"),
    (json_rows, "postgresql"): ("CAST(json_agg(json_build_array(", ")) AS TEXT)"),
}


def _spelled(head: str, tail: str) -> Callable[..., str]:
    def compile_json(element: FunctionElement[str], compiler: SQLCompiler, **kw: Any) -> str:
        return head + compiler.process(element.clauses, **kw) + tail

    return compile_json


for (_element, _dialect), (_head, _tail) in _JSON_SPELLINGS.items():
    compiles(_element, _dialect)(_spelled(_head, _tail))
