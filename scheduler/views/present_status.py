"""``floorgate status`` as tables: the hosts, every automation's readback (with the notes that
explain it: why it waits, drift, envelopes, limits), then the lanes no automation stands for."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime, timezone, tzinfo
from typing import TYPE_CHECKING

from floorgate.hosts import InvalidSchedule, Schedule

from ..app.readback import STOPPED
from .present import _cells, _envelope_line, agreement_text, floor_text, hosts_text, table_lines, terminal_safe, turn_outcome, when
from .present_limits import NO_TIME, limit_lines

if TYPE_CHECKING:
    from ..app.readback import AutomationReadback, Overview, OverviewStream


def _zone_of(rb: AutomationReadback) -> tzinfo:
    """The zone of the automation's schedule (UTC when it has none or cannot be read)."""
    if rb.automation is None:
        return timezone.utc
    try:
        return Schedule.parse(rb.automation.spec.schedule).zone or timezone.utc
    except InvalidSchedule:
        return timezone.utc


def _next_eligible(rb: AutomationReadback, now: datetime, zone: tzinfo) -> str | None:
    """The NEXT_ELIGIBLE_AT cell: the instant, else what its absence means when it is not "now"
    (a spent limit no wait frees, an unreadable state), else None (shown as ``-``)."""
    e = rb.eligibility
    if e is not None and e.next_eligible_at is not None:
        return when(e.next_eligible_at, now, zone)
    return NO_TIME.get(e.status if e is not None else rb.state.value)


def status_text(view: Overview | OverviewStream) -> str:
    """``floorgate status`` as tables: hosts, automations, then floored lanes no automation stands for."""
    return "\n".join(status_lines(view))


_STATUS_HEADERS = (
    "AUTOMATION",
    "LANE",
    "STATE",
    "NEXT_FIRE",
    "NEXT_ELIGIBLE_AT",
    "LAST_TURN",
    "OUTCOME",
    "TIMER",
    "DESIRED=OBSERVED",
    "GUARANTEE",
)


def status_lines(view: Overview | OverviewStream) -> Iterator[str]:
    """``status_text`` line by line, reading ``view.readbacks`` once: each readback is reduced to
    its table cells and notes as it comes, so a status of many automations never holds them all
    (nor the whole text: the table's widths need only the cells)."""
    rows: list[list[str]] = []
    texts: dict[str, str] = {}  # one string per distinct cell: many automations share a lane, a floor's opening...
    details: list[str] = []
    drifts: list[str] = []
    envelopes: list[str] = []
    failures: list[str] = []
    limits: list[str] = []
    zones: dict[str, tzinfo] = {}
    for rb in view.readbacks:
        schedule = rb.automation.spec.schedule if rb.automation is not None else ""
        zone = zones.get(schedule)
        if zone is None:
            zone = zones[schedule] = _zone_of(rb)
        rows.append(
            _cells(
                texts,
                (
                    rb.automation_id,
                    f"{rb.automation.spec.goal_id}/{rb.automation.spec.agent_id}" if rb.automation else None,
                    rb.state.value,
                    "none (no host)" if rb.no_timer_host else when(rb.next_fire_at, view.now, zone),
                    _next_eligible(rb, view.now, zone),
                    when(rb.last_turn.started_at, view.now, zone) if rb.last_turn else None,
                    turn_outcome(rb.last_turn, rb.mission),
                    rb.automation.spec.timer if rb.automation else None,
                    agreement_text(rb),
                    rb.guarantee,
                ),
            )
        )
        if rb.state.value != "eligible" or rb.no_timer_host:
            # An owner's stop names itself before its note or reason (which may say anything).
            stopped = f"{rb.state.value}: " if rb.state in STOPPED else ""
            details.append(f"  {rb.automation_id}: {stopped}{terminal_safe(rb.detail, lines=False)}")
        if rb.drift is not None:
            drifts.append(f"  {rb.automation_id}: DRIFT: {rb.drift}; re-apply with 'floorgate automation apply {rb.automation_id}'")
        if (line := _envelope_line(rb)) is not None:
            envelopes.append(line)
        limits += limit_lines(rb.automation_id, rb.limits)
        if rb.binding is not None and rb.binding.apply_error:
            failures.append(f"  {rb.automation_id}: apply failed: {rb.binding.apply_error}")
    lanes = view.lanes
    if not rows and not lanes:
        yield "no automations and no floored lanes"
        return
    # The parts, a blank line between each: the hosts, the table, its notes, the lanes' table, theirs.
    parts: list[Iterable[str]] = [[hosts_text(view.hosts, view.now)]] if view.hosts or view.own_timers else []
    if rows:
        parts.append(table_lines(_STATUS_HEADERS, rows))
        notes = [note for kind in (details, drifts, envelopes, limits, failures) for note in kind]
        if notes:
            parts.append(notes)
    if lanes:
        parts.append(
            table_lines(
                ["LANE", "STATUS", "REASON", "FLOOR", "LAST_START", "NEXT_ELIGIBLE_AT"],
                [
                    _cells(
                        None,
                        (
                            "/".join(p for p in (e.goal_id, e.agent_id, e.automation_id) if p),
                            e.status,
                            e.reason.value,
                            floor_text(e.floor) if e.floor else None,
                            f"{e.last_start.turn_id} ({e.last_start.kind.value}) {when(e.last_start.anchor_at, view.now)}"
                            if e.last_start
                            else None,
                            when(e.next_eligible_at, view.now) or NO_TIME.get(e.status),
                        ),
                    )
                    for e in lanes
                ],
            )
        )
        lane_notes = [
            line
            for e in lanes
            for line in limit_lines(
                "/".join(p for p in (e.goal_id, e.agent_id, e.automation_id) if p),
                view.lane_limits.get((e.goal_id, e.agent_id, e.automation_id)),
            )
        ]
        if lane_notes:
            parts.append(lane_notes)
    for i, part in enumerate(parts):
        if i:
            yield ""
        yield from part
