"""What the dashboard shows, from one overview read: each automation's readback and its last days
(fires, starts of every kind, denials), the fires of the next 24 h, the floored lanes no
automation stands for, live hosts and the latest events."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from typing import Any

from floorgate.admission.clock import iso
from floorgate.admission.decisions import StartRecord
from floorgate.admission.scope import MAX_LIMIT
from floorgate.admission.tallies import Tallies
from floorgate.hosts.schedule import Schedule

from ..app.preview import PreviewRow
from ..app.readback import STOPPED, AutomationReadback
from ..app.root import Floorgate
from ..views.present import ago, host_doc, lane_doc, readback_doc
from ..views.present_automation import RETRY_NOTE
from .timeline import SLOTS, Zoom, slot_width, timeline

UPCOMING = timedelta(hours=24)
UPCOMING_ROWS = 48  # fires listed per automation; the rest of its 24 h are counted, not listed
UPCOMING_SCAN = 2000  # fires counted past the listed ones: an every-minute schedule's whole day fits
Fires = Callable[[AutomationReadback, int, datetime], list[PreviewRow]]  # an automation's next fires, simulated
RECENT_EVENTS = 8  # on the dashboard; /events shows more


@dataclass(frozen=True)
class Upcoming:
    """One automation's fires in the next 24 h: the listed rows, and how many more there are."""

    rows: list[dict[str, Any]]
    total: int  # fires within the horizon that were counted
    capped: bool  # the count stopped at ``UPCOMING_SCAN``: there are at least ``total``

    def note(self, automation_id: str) -> dict[str, Any] | None:
        """What the page says of the fires not listed (None: every fire is listed)."""
        more = self.total - len(self.rows)
        if more <= 0 and not self.capped:
            return None
        return {
            "automation": automation_id,
            "listed": len(self.rows),
            "more": more,
            "at_least": self.capped,
            "listed_through": self.rows[-1]["at"] if self.rows else None,
        }


def fire_row(f: PreviewRow) -> dict[str, Any]:
    """A simulated fire as the console's pages list it (the dashboard's next 24 h, an automation's
    next fires; ``_macros.fire_runs`` words whether it runs): exact UTC instants."""
    return {
        "at": iso(f.fire_at),
        "runs": f.admitted,
        "runs_at": iso(f.runs_at),
        "late": f.runs_late,
        "denied_by": f.denied_by,
        "retry": RETRY_NOTE if f.retry else None,
    }


def upcoming(rb: AutomationReadback, now: datetime, fires: Fires) -> Upcoming:
    """The fires ``rb`` makes within ``UPCOMING`` of ``now`` (none while it cannot fire), as
    ``fires`` simulates them (``Readback.limited_fires``: a spent count or budget names itself)."""
    if rb.plan is None or rb.no_timer_host or rb.drift is not None or rb.state in STOPPED:
        return Upcoming([], 0, False)
    horizon = now + UPCOMING
    within = [f for f in fires(rb, UPCOMING_ROWS + 1, now) if f.fire_at <= horizon]
    rows = [{"automation": rb.automation_id, **fire_row(f)} for f in within[:UPCOMING_ROWS]]
    if len(within) <= UPCOMING_ROWS:
        return Upcoming(rows, len(rows), False)
    more, capped = _count_until(rb.plan.schedule, within[UPCOMING_ROWS - 1].fire_at, horizon)
    return Upcoming(rows, len(rows) + more, capped)


def _count_until(schedule: Schedule, after: datetime, horizon: datetime) -> tuple[int, bool]:
    """How many times ``schedule`` fires after ``after`` until ``horizon`` (counted, not simulated:
    the listed rows say which run), and whether the count stopped at ``UPCOMING_SCAN``."""
    total, batch = 0, 64
    while total < UPCOMING_SCAN:
        want = min(batch, UPCOMING_SCAN - total)
        found = schedule.occurrences(want, after=after)
        inside = sum(1 for at in found if at <= horizon)
        total += inside
        if inside < want:  # past the horizon, or the schedule ended
            return total, False
        after, batch = found[-1], batch * 4
    return total, True


class RecentStarts:
    """The start records since a time, per automation, for the strips: one read of the newest
    ``MAX_LIMIT`` starts of every automation; only when they do not reach back to ``since`` is each
    automation read on its own."""

    def __init__(self, fg: Floorgate, since: datetime) -> None:
        self.fg, self.since = fg, since
        newest = fg.admission.starts(limit=MAX_LIMIT)
        self.complete = len(newest) < MAX_LIMIT or newest[-1].anchor_at < since
        self.by_automation: dict[str | None, list[StartRecord]] = {}
        for st in newest:
            if st.anchor_at >= since:
                self.by_automation.setdefault(st.automation_id, []).append(st)

    def of(self, automation_id: str) -> list[StartRecord]:
        if self.complete:
            return self.by_automation.get(automation_id, [])
        return [st for st in self.fg.admission.starts(automation=automation_id, limit=MAX_LIMIT) if st.anchor_at >= self.since]


# Listed first on the dashboard, in this order: what needs the owner, then what cannot run.
TROUBLE = {"held": 0, "failing": 1, "awaiting_owner": 2, "unavailable": 3, "host_unavailable": 4, "paused": 5}


def failed_last(doc: dict[str, Any]) -> bool:
    """Whether the automation's last settled turn did not succeed."""
    verdict = (doc.get("last_turn") or {}).get("verdict")
    return verdict is not None and verdict.get("status") != "succeeded"


def trouble_rank(doc: dict[str, Any]) -> int:
    """Sort key: held, failing (a failure streak slows its starts), waiting for the owner,
    unreadable, no host, paused, then a failed last turn, then the rest (by id within each)."""
    if doc["state"] in TROUBLE:
        return TROUBLE[doc["state"]]
    return len(TROUBLE) if failed_last(doc) else len(TROUBLE) + 1


def dashboard(fg: Floorgate, zoom: Zoom = Zoom.DAY, zone: tzinfo | None = None) -> dict[str, Any]:
    """The dashboard's values (one overview read, then each automation's strip), troubled
    automations first."""
    view = fg.readback.overview()
    now = view.now
    tallies = Tallies(fg.store)
    since = now - zoom.span
    rows, listed, notes = [], [], []
    recent = RecentStarts(fg, since)
    for rb in view.readbacks:
        doc = readback_doc(rb)
        e = rb.eligibility
        doc["next_eligible_in"] = ago(e.next_eligible_at, now) if e is not None and e.next_eligible_at is not None else None
        doc["next_fire_in"] = ago(rb.next_fire_at, now) if rb.next_fire_at is not None else None
        counts = tallies.slot_counts(rb.automation_id, since, slot_width(zoom), SLOTS)
        doc["timeline"] = timeline(counts, recent.of(rb.automation_id), now, zoom, zone)
        doc["trouble"] = trouble_rank(doc) < len(TROUBLE) + 1
        rows.append(doc)
        ahead = upcoming(rb, now, fg.readback.limited_fires)
        listed += ahead.rows
        note = ahead.note(rb.automation_id)
        if note is not None:
            notes.append(note)
    rows.sort(key=lambda d: (trouble_rank(d), d["automation"]))
    listed.sort(key=lambda u: str(u["at"]))
    return {
        "now": iso(now),
        "zoom": zoom.value,
        "zooms": [z.value for z in Zoom],
        "rows": rows,
        "upcoming": listed,
        "upcoming_more": notes,
        "upcoming_rows": UPCOMING_ROWS,
        "hosts": [host_doc(h, now) for h in view.hosts],
        "lanes": [lane_doc(e, view.lane_limits.get((e.goal_id, e.agent_id, e.automation_id))) for e in view.lanes],
        "events": list(reversed(fg.notify.recent(RECENT_EVENTS))),
    }
