"""Alerts once per period: the ``budget_threshold`` and ``budget_exhausted`` events an admission
writes, in its own transaction, when the start it admits crosses them.

For each count or budget that binds the lane (``budgets.LimitState``, read in the admitting
transaction), the admitted start moves the window's use from ``used + held`` to that plus what it
holds (one start, or its estimate). Each owner-set percentage (``Limits.alert_at``, default
50/80/100) passed on the way is a ``budget_threshold``; when what is left no longer fits one more
start, the window is spent: ``budget_exhausted``. Each is keyed by (the limit with its amount, the
window's period, the percentage) and written insert-if-absent (``events.record_once``), so a retry, a rollback
and redo, or a second host writes it at most once per window. A calendar window's period is the
calendar period (the day, week or month in its zone); a rolling window has none, so its period is
the window's length counted from the Unix epoch (a rolling 1d budget alerts at most once per UTC
day at each percentage).

The readback reads them back (``latest``: each limit's latest alert in its current period, by
those keys; ``counts``: every alert by event and limit kind, for ``/metrics``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection

from . import _schema as s
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


def alerts_due(states: Sequence[LimitState]) -> bool:
    """Whether one more start would write an alert (``record_alerts`` would write or find one)."""
    for state in states:
        passed, spent = crossed(state, state.limit.alerts)
        if passed or spent:
            return True
    return False


def _key(state: LimitState, period: datetime, what: str) -> str:
    limit = state.limit
    series = limit.series
    # The amount too: a raised (or lowered) limit is another limit, whose percentages are alerted
    # afresh and whose readback never shows an alert of the old one against the new amount.
    name = "|".join(
        [
            str(limit.scope), limit.kind.value, series.goal_id, series.agent_id or "*", series.automation_id or "*",
            limit.window.text(), str(limit.amount),
        ]
    )  # fmt: skip
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
                conn,
                EventKind.BUDGET_THRESHOLD,
                f"{percent}% of {subject}",  # the events list tells its thresholds apart
                {**data, "percent": percent},
                now,
                key=_key(state, period, str(percent)),
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


ALERT_KINDS = (EventKind.BUDGET_THRESHOLD, EventKind.BUDGET_EXHAUSTED)


class Alert(NamedTuple):
    """One alert as the readback shows it: its event, what it says (``percent`` for a threshold,
    None for ``budget_exhausted``), the use it recorded and when. ``percent`` and ``used`` are None
    when the event's data cannot be read (its kind and time still can)."""

    event_id: str
    kind: EventKind
    percent: int | None
    used: int | None
    at: datetime
    period_start: datetime


def latest(conn: Connection, states: Sequence[LimitState], now: datetime) -> tuple[Alert | None, ...]:
    """Each limit's latest alert in its current period (None: none yet), in the order of
    ``states``: a read of the events under the keys ``record_alerts`` writes them with (exact
    lookups on the unique key), none when there is no limit."""
    return latest_many(conn, [states], now)[0]


def latest_many(conn: Connection, lanes: Sequence[Sequence[LimitState]], now: datetime) -> list[tuple[Alert | None, ...]]:
    """``latest`` of many lanes' states at once: one statement per ``_KEYS_PER_READ`` keys."""
    keys: dict[str, tuple[int, int, datetime]] = {}
    for lane, states in enumerate(lanes):
        for i, state in enumerate(states):
            period = period_start(state.limit.window, now)
            prefix = _key(state, period, "")
            for what in (*(str(p) for p in state.limit.alerts), "exhausted"):
                keys[prefix + what] = (lane, i, period)
    found: list[list[tuple[int, Alert] | None]] = [[None] * len(states) for states in lanes]
    wanted = list(keys)
    for at in range(0, len(wanted), _KEYS_PER_READ):
        for row in conn.execute(_LATEST, {"keys": wanted[at : at + _KEYS_PER_READ]}):
            lane, i, period = keys[row.dedup_key]
            best = found[lane][i]
            if best is None or row.seq > best[0]:
                found[lane][i] = (row.seq, _alert(row, period))
    return [tuple(x[1] if x is not None else None for x in states) for states in found]


_e = s.events
# Built once (an expanding IN): a status of many limited lanes reads their alerts in a few statements.
_LATEST = select(_e.c.seq, _e.c.event_id, _e.c.kind, _e.c.data_json, _e.c.occurred_at_us, _e.c.dedup_key).where(
    _e.c.dedup_key.in_(bindparam("keys", expanding=True))
)
_KEYS_PER_READ = 500


def _alert(row: Any, period: datetime) -> Alert:
    try:
        data = json.loads(row.data_json)
        percent, used = data.get("percent"), data.get("used")
    except (ValueError, TypeError, AttributeError):
        percent = used = None
    return Alert(
        row.event_id,
        EventKind(row.kind),
        percent if isinstance(percent, int) else None,
        used if isinstance(used, int) else None,
        row.occurred_at_us,
        period,
    )


def counts(conn: Connection) -> dict[tuple[str, str], int]:
    """How many alerts were written, by (event kind, limit kind: ``starts``, ``tokens``, ``usd``;
    ``unknown`` when an event's data cannot be read): a bounded set of series for ``/metrics``."""
    e = s.events
    out: dict[tuple[str, str], int] = {}
    query = select(e.c.kind, e.c.data_json).where(e.c.kind.in_([k.value for k in ALERT_KINDS]))
    for kind, data_json in conn.execute(query):
        try:
            limit = json.loads(data_json).get("limit")
        except (ValueError, TypeError, AttributeError):
            limit = None
        shown = limit if limit in {k.value for k in LimitKind} else "unknown"
        out[(kind, shown)] = out.get((kind, shown), 0) + 1
    return out
