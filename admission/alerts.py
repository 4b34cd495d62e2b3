"""Alerts once per period: the ``budget_threshold`` and ``budget_exhausted`` events an admission
writes, in its own transaction, when the start it admits crosses them.

For each count or budget that binds the lane (``budgets.LimitState``, read in the admitting
transaction), the admitted start moves the window's use from ``used + held`` to that plus what it
holds (one start, or its estimate). Each owner-set percentage (``Limits.alert_at``, default
50/80/100) passed on the way is a ``budget_threshold``; when what is left no longer fits one more
start, the window is spent: ``budget_exhausted``. Each is keyed by (the limit, the window's period,
the percentage) and written insert-if-absent (``events.record_once``), so a retry, a rollback
and redo, or a second host writes it at most once per window. A calendar window's period is the
calendar period (the day, week or month in its zone); a rolling window has none, so its period is
the window's length counted from the Unix epoch (a rolling 1d budget alerts at most once per UTC
day at each percentage).
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.engine import Connection

from .budgets import LimitState
from .clock import iso
from .events import EventKind, record_once
from .limits import LimitKind
from .windows import Window

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def period_start(window: Window, now: datetime) -> datetime:
    """The period an alert of ``window`` at ``now`` is counted once in (see the module docstring)."""
    if window.rolling:
        length = window.nominal_length()
        return _EPOCH + ((now - _EPOCH) // length) * length
    return window.period_start(now)


def crossed(state: LimitState, alerts: tuple[int, ...]) -> tuple[list[int], bool]:
    """The percentages one more start holding ``state.need`` crosses, and whether the window is
    spent after it (one more would not fit). Nothing for a limit that blocks or cannot be checked."""
    if state.blocked or state.need is None:
        return [], False
    amount = state.limit.amount
    before = state.used + state.held
    after = before + state.need
    passed = [p for p in alerts if before * 100 < p * amount <= after * 100]
    return passed, after + state.need > amount


def _key(state: LimitState, period: datetime, what: str) -> str:
    limit = state.limit
    series = limit.series
    name = "|".join(
        [str(limit.scope), limit.kind.value, series.goal_id, series.agent_id or "*", series.automation_id or "*", limit.window.text()]
    )
    return f"budget:{hashlib.sha256(name.encode('utf-8')).hexdigest()[:32]}:{iso(period)}:{what}"


def record_alerts(conn: Connection, states: tuple[LimitState, ...], now: datetime, turn_id: str) -> list[str]:
    """Write the alerts the start ``turn_id``, admitted at ``now`` with the lane's ``states`` (read
    in this transaction), crosses; returns the ids of those written now (not written before)."""
    written: list[str] = []
    for state in states:
        limit = state.limit
        passed, spent = crossed(state, limit.alerts)
        if not passed and not spent:
            continue
        period = period_start(limit.window, now)
        after = state.used + state.held + (state.need or 0)
        data: dict[str, Any] = {
            "scope": str(limit.scope),
            "limit": limit.kind.value,
            "amount": limit.amount,
            "window": limit.window.text(),
            "period_start": iso(period),
            "used": after,
            "turn_id": turn_id,
        }
        if not limit.window.rolling:
            data["period_end"] = iso(limit.window.next_period_start(now))
        subject = limit.describe()
        for percent in passed:
            found = record_once(
                conn, EventKind.BUDGET_THRESHOLD, subject, {**data, "percent": percent}, now, key=_key(state, period, str(percent))
            )
            if found is not None:
                written.append(found)
        if spent:
            reason = "count_exhausted" if limit.kind is LimitKind.STARTS else "budget_exhausted"
            found = record_once(
                conn, EventKind.BUDGET_EXHAUSTED, subject, {**data, "reason": reason}, now, key=_key(state, period, "exhausted")
            )
            if found is not None:
                written.append(found)
    return written
