"""One page of ``status``: the readbacks in status order after a cursor, optionally of one state.

A page costs its own automations: readbacks are computed a chunk at a time (each chunk's tables
read once, as ``Readback.many`` does for all), and a filter walks on chunk by chunk until the page
is full. The cursor is the last listed automation's sort key, ``goal/automation`` (an id never
holds a ``/``); the floored lanes without an automation come with the first page only.
"""

from __future__ import annotations

from dataclasses import dataclass

from floorgate.admission import Automation, Eligibility

from ._readback_reads import _Bulk, _Direct
from ._readback_values import Overview
from .budget_readback import LaneLimits
from .readback import AutomationReadback, Readback, ReadbackState, _collector_paused, _unreadable

CHUNK = 500  # readbacks computed together (one read of each table per chunk)


@dataclass(frozen=True)
class StatusPage(Overview):
    """The overview of one page: its readbacks, the lanes (first page only) and their limits, the
    hosts, and ``next``, the next page's cursor (None on the last page)."""

    next: str | None = None


def status_page(
    rb: Readback, goal: str | None, agent: str | None, *, after: str | None, limit: int, state: ReadbackState | None
) -> StatusPage:
    """Up to ``limit`` readbacks after the cursor ``after`` (None: from the start), only those in
    ``state`` when given; ``next`` is None on the last page."""
    ctx = rb.context()
    with _collector_paused():
        found, broken = rb.automations.scan(goal=goal, agent=agent)
        rows: list[tuple[tuple[str, str], Automation | str]] = [((a.spec.goal_id, a.automation_id), a) for a in found.values()]
        rows += [(("", aid), reason) for aid, reason in broken.items()]
        rows.sort(key=lambda row: row[0])
        start = 0
        if after is not None:
            g, _, aid = after.partition("/")
            start = next((i for i, (key, _) in enumerate(rows) if key > (g, aid)), len(rows))
        out: list[AutomationReadback] = []
        cursor: str | None = None
        i = start
        while i < len(rows) and len(out) < limit:
            chunk = rows[i : i + max(limit, CHUNK)]
            automations = [x for _, x in chunk if not isinstance(x, str)]
            sources: _Direct | _Bulk = _Bulk(rb, automations) if len(automations) > 1 else _Direct(rb)
            for key, x in chunk:
                i += 1
                readback = _unreadable(key[1], x) if isinstance(x, str) else rb.of(x, ctx, sources)
                if state is None or readback.state == state:
                    out.append(readback)
                    if len(out) == limit:
                        cursor = f"{key[0]}/{key[1]}" if i < len(rows) else None
                        break
    listed: list[tuple[Eligibility, LaneLimits | None]] = []
    if after is None:
        covered = {(a.spec.goal_id, a.spec.agent_id, a.automation_id) for a in found.values()}
        listed = rb.lanes_with_limits(goal, agent, None, covered)
    limits = {(e.goal_id, e.agent_id, e.automation_id): x for e, x in listed if x is not None}
    return StatusPage(now=ctx.now, readbacks=out, lanes=[e for e, _ in listed], hosts=ctx.hosts, next=cursor, lane_limits=limits)
