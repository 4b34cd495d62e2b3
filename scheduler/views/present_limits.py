"""A lane's counts and budgets as every surface shows them: for each limit, what is used, held in
flight, left, and when its window frees it (``budget_readback.LaneLimits``), as JSON and as lines."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from floorgate.admission.alerts import Alert
from floorgate.admission.budgets import LimitState
from floorgate.admission.clock import iso
from floorgate.admission.events import EventKind
from floorgate.admission.limits import LimitKind
from floorgate.admission.windows import NEVER

from ..app.budget_readback import amount, usage_text
from ._instants import ceil_second

if TYPE_CHECKING:
    from floorgate.admission import Eligibility

    from ..app.budget_readback import LaneLimits


def limit_doc(x: LimitState, alert: Alert | None = None) -> dict[str, Any]:
    """One limit binding a lane and where it stands, as JSON (USD amounts as decimal strings),
    with its latest alert in its current period (``alert``: None when none was raised)."""
    b = x.limit
    return {
        "kind": b.kind.value,
        "amount": amount(x, b.amount),
        "window": b.window.text(),
        "scope": str(b.scope),
        "revision": b.revision,
        "across_agents": b.series.agent_id is None,
        "used": amount(x, x.used),
        "held": amount(x, x.held),
        "left": amount(x, x.left),
        "next_start_needs": amount(x, x.need),
        "exhausted": x.blocked,
        "frees_at": frees_at(x),
        "problem": x.problem,
        "text": b.describe(),
        "usage": usage_text(x),
        "line": limit_text(x),
        "alert": alert_doc(x, alert),
    }


def alert_doc(x: LimitState, alert: Alert | None) -> dict[str, Any] | None:
    """The latest alert of limit ``x`` in its current period, as JSON (exact instants)."""
    if alert is None:
        return None
    return {
        "event": alert.kind.value,
        "event_id": alert.event_id,
        "percent": alert.percent,
        "used": amount(x, alert.used),
        "at": iso(alert.at),
        "period_start": iso(alert.period_start),
        "figure": alert_figure(x, alert),
        "text": alert_text(x, alert),
    }


def alert_text(x: LimitState, alert: Alert) -> str:
    """``budget_threshold: 80% of 1k tokens per 1d at g/a reached at 2026-12-01T09:00:00Z (used and held 800
    tokens)``, ``budget_exhausted: 2 starts per 1d at g/a spent at ...``:
    what it said, of which limit, when (a recorded instant: to the second)."""
    if alert.kind is EventKind.BUDGET_THRESHOLD:
        what = f"{alert.percent if alert.percent is not None else '?'}% of {x.limit.describe()} reached"
    else:
        what = f"{x.limit.describe()} spent"
    figure = alert_figure(x, alert)
    return f"{alert.kind.value}: {what} at {iso(alert.at.replace(microsecond=0))}{f' ({figure})' if figure else ''}"


def alert_figure(x: LimitState, alert: Alert) -> str | None:
    """The use an alert recorded, in words: a count's starts; a budget's use, what settled plus
    what admitted turns hold in flight (None: not recorded)."""
    if alert.used is None:
        return None
    if x.limit.kind is LimitKind.STARTS:
        return f"{x.limit.quantity(alert.used)} starts"
    return f"used and held {x.limit.quantity(alert.used)}"


def frees_at(x: LimitState) -> str | None:
    """When the limit lets a start through again (None: it does not block, or no wait frees it)."""
    return iso(x.frees_at) if x.frees_at is not None and x.frees_at != NEVER else None


def unadmittable_warnings(found: Iterable[tuple[object, LimitState]]) -> list[str]:
    """A write's warnings for the limits no start can pass (``FloorService.unadmittable``): one
    line each, naming the lane and the limit."""
    return [f"floorgate: warning: {lane}: {x.limit.describe()}: {limit_text(x)}" for lane, x in found]


def limit_text(x: LimitState) -> str:
    """``used 2, held 0, left 1; exhausted until 2026-12-04T00:00:00Z`` (the instant rounded up
    to the whole second, as every text shows a coming one; ``frees_at`` in JSON is exact)."""
    out = usage_text(x)
    if x.problem is not None:
        return f"{out}; cannot admit: {x.problem}"
    if x.blocked:
        until = iso(ceil_second(x.frees_at)) if x.frees_at is not None and x.frees_at != NEVER else "the owner raises it"
        return f"{out}; exhausted until {until}"
    return out


def limits_brief(doc: dict[str, Any] | None) -> str | None:
    """A rule's stored limits (``Limits.doc``, as history records them before and after a write)
    in one cell: the limits that are set, as JSON; ``none`` when none is; None when not recorded."""
    if doc is None:
        return None
    return (
        json.dumps({k: v for k, v in doc.items() if v not in (None, False)})
        if any(v not in (None, False) for v in doc.values())
        else "none"
    )


def limits_doc(limits: LaneLimits | None) -> list[dict[str, Any]]:
    """Every limit of a lane as JSON, each with its latest alert (none: an empty list)."""
    return [limit_doc(x, a) for x, a in limits.with_alerts()] if limits is not None else []


def limit_lines(name: str, limits: LaneLimits | None) -> list[str]:
    """One status note per limit: ``  NAME: limit 3 starts per 1d at g/a: used 1, held 0, left 2``,
    then one per limit that raised an alert in its current period: ``  NAME: alert ...``."""
    if limits is None:
        return []
    lines = [f"  {name}: limit {x.limit.describe()}: {limit_text(x)}" for x in limits.states]
    return lines + [f"  {name}: alert {text}" for text in alert_texts(limits)]


def alert_texts(limits: LaneLimits | None) -> list[str]:
    """``alert_text`` of each limit of the lane with an alert in its current period."""
    if limits is None:
        return []
    return [alert_text(x, a) for x, a in limits.with_alerts() if a is not None]


# What a verdict without a next eligible time means, by its status (any other status: now).
# Shared by every surface (the console's templates too), so none of them says "now" for a lane
# that no wait frees, or whose state cannot be read (fail closed).
NO_TIME = {"limit_wait": "not by waiting", "unavailable": "unknown (fail closed)"}


def no_time_text(status: str | None) -> str:
    """A verdict of ``status`` without a next eligible time, in a table cell: ``now``, ``not by
    waiting`` (a spent limit no window frees) or ``unknown (fail closed)`` (state unreadable)."""
    return NO_TIME.get(status or "", "now")


def next_eligible_text(e: Eligibility) -> str:
    """The verdict's next eligible time in a sentence: an instant, ``now``, ``not by waiting``
    (a spent limit no window frees: the owner must raise it) or ``unknown (fail closed)``."""
    if e.next_eligible_at is not None:
        # Rounded up to the second: a floor shown opening a moment early invites a denied start.
        return iso(ceil_second(e.next_eligible_at)) or ""
    if e.status == "limit_wait":
        return f"{no_time_text(e.status)} (an owner must change a limit or give it what it lacks)"
    return no_time_text(e.status)
