"""Which rows count for one series of a limit from a time on: the predicates the budgets' counts
and the usage ledger share (``series_where``), and the same rows as two index ranges
(``series_legs``) for a statement that must not walk the series' whole history."""

from __future__ import annotations

import builtins
from typing import Any

from sqlalchemy import BigInteger, and_, bindparam, literal_column, or_, type_coerce

NAMES = ("goal", "agent", "automation", "since")  # the bound parameters' default names


def series_where(table: Any, column: str, by_agent: bool, by_automation: bool, names: tuple[str, str, str, str] = NAMES) -> Any:
    """The rows of ``table`` that count for one series from a time on: the series' goal, its
    agent (``by_agent``) and its automation (``by_automation``), ``column`` at or after the time.
    ``names``: the bound parameters of the goal, agent, automation and time. A time below the
    epoch is damage the range would skip: such a row is read too, so it fails the decoder."""
    return and_(*_series_keys(table, by_agent, by_automation, names), or_(*_series_ranges(table, column, names)))


def _series_keys(table: Any, by_agent: bool, by_automation: bool, names: tuple[str, str, str, str]) -> builtins.list[Any]:
    goal, agent, automation, _since = names
    keys = [table.c.goal_id == bindparam(goal)]
    if by_agent:
        keys.append(table.c.agent_id == bindparam(agent))
    if by_automation:
        keys.append(table.c.automation_id == bindparam(automation))
    return keys


def series_legs(table: Any, column: str, by_agent: bool, by_automation: bool, names: tuple[str, str, str, str] = NAMES) -> tuple[Any, Any]:
    """``series_where``'s rows as its two index ranges, each a predicate of its own: those at or
    after the time, and those dated below the epoch (damage). A statement that reads the legs apart
    (``UNION ALL``) walks two ranges of the series' index where the OR of both may walk all of the
    series' history (SQLite chooses that for a covering index)."""
    keys = _series_keys(table, by_agent, by_automation, names)
    since, damaged = _series_ranges(table, column, names)
    return and_(*keys, since), and_(*keys, damaged)


def _series_ranges(table: Any, column: str, names: tuple[str, str, str, str]) -> tuple[Any, Any]:
    at = table.c[column]
    return at >= bindparam(names[3]), type_coerce(at, BigInteger) < literal_column("0")
