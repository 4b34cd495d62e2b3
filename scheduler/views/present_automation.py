"""What ``automation show``, ``automation preview`` and ``automation trigger`` print (and the console's
automation endpoints answer): the next fires and whether each would run, recent ticks and turns."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval

from .present import (
    automation_doc,
    ceil_second,
    command_text,
    floor_text,
    optional,
    readback_doc,
    seconds_of,
    table,
    terminal_safe,
    tick_doc,
    turn_doc,
    turn_outcome,
)
from .present_limits import NO_TIME, alert_texts, limit_text, next_eligible_text

if TYPE_CHECKING:
    from floorgate.admission import EffectiveFloor, Triggered

    from ..app.automations import Detail, Switched, TriggerAnswer, TriggerWake
    from ..app.backfill import BackfillReport
    from ..app.readback import Preview


def fire_doc(row: Any) -> dict[str, Any]:
    return {
        "local": row.fire_at.isoformat(),
        "utc": iso(row.fire_at),
        "admitted": row.admitted,
        "runs_at": iso(row.runs_at),
        "waited_for_floor": row.waited_for_floor,
        "eligible_at": iso(row.eligible_at),
        "denied_by": row.denied_by,
        "retry": row.retry,
    }


def _up(at: datetime | None) -> str | None:
    """A coming instant in text, to the second rounded up (a floor shown opening a moment early
    would invite a start that is denied); ``--json`` keeps the exact instant."""
    return iso(ceil_second(at)) if at is not None else None


def _down(at: datetime | None) -> str | None:
    """A recorded instant in text, to the second (``--json`` keeps the exact instant)."""
    return iso(at.replace(microsecond=0)) if at is not None else None


# How every surface words a fire row that is the early retry after a failure (``PreviewRow.retry``).
RETRY_NOTE = "a retry after a failure, not a schedule fire"


def switched_doc(switched: Switched) -> dict[str, Any]:
    """A pause's or resume's JSON (the CLI's and the API's): the automation, its readback after it,
    and whether it changed anything."""
    rb = switched.readback
    return {
        **(automation_doc(rb.automation) if rb.automation is not None else {}),
        "readback": readback_doc(rb),
        "changed": switched.changed,
    }


def switched_text(switched: Switched, *, pause: bool) -> str:
    """One line for a pause or resume: what it did, or that there was nothing to do."""
    rb = switched.readback
    aid, detail = rb.automation_id, terminal_safe(rb.detail, lines=False)
    if pause:
        return f"paused {aid}: {detail}" if switched.changed else f"{aid} was paused already ({detail}); nothing changed"
    if switched.changed:
        return f"resumed {aid}: {rb.state.value} ({detail})"
    return f"{aid} was not paused, held or failing: nothing to resume; {rb.state.value} ({detail})"


def running_text(turns: tuple[str, ...]) -> str:
    """The lines a removal adds for its automation's turns still running ("" when none)."""
    if not turns:
        return ""
    named = ", ".join(turns)
    return (
        f"\nSTILL RUNNING: turn{'s' if len(turns) > 1 else ''} {named}; removing stops none: each runs to its end "
        "or deadline, and 'floorgate turn show TURN' shows its record"
    )


def _fire_run(row: Any) -> str:
    retry = f" ({RETRY_NOTE})" if row.retry else ""
    if not row.admitted:
        return f"no ({row.denied_by or 'floor'}){retry}"
    if row.runs_late:
        why = "when the lane is next eligible" if row.waited_for_floor else "at once: a missed fire inside the catch-up window"
        return f"yes, at {_up(row.runs_at)} ({why}){retry}"
    return "yes" + retry


def _floor_line(floor: EffectiveFloor | None, when_denied: str) -> str:
    """``1d (a fire inside it: wait)``; ``none`` when no rule sets a floor (as ``preview`` says),
    never ``0 (a fire inside it: ...)``."""
    if floor is not None and not floor.floor:
        return "none"
    return f"{floor_text(floor)} (a fire inside it: {when_denied})"


def detail_doc(d: Detail) -> dict[str, Any]:
    return {
        **readback_doc(d.readback),
        "spec": automation_doc(d.readback.automation) if d.readback.automation is not None else None,
        "next_fire_times": [fire_doc(r) for r in d.fires],
        "recent_ticks": [tick_doc(t) for t in d.ticks],
        "recent_turns": [turn_doc(t) for t in d.turns],
        "counters": d.counters,
        "trigger": trigger_wake_doc(d.trigger),
    }


def detail_text(d: Detail) -> str:
    rb = d.readback
    head = [f"automation {rb.automation_id}", f"  state:          {rb.state.value} ({terminal_safe(rb.detail, lines=False)})"]
    a = rb.automation
    if a is None:
        return "\n".join(head)
    spec = a.spec
    floor = rb.eligibility.floor if rb.eligibility is not None else None
    lines = [
        f"automation {a.automation_id}  ({spec.goal_id}/{spec.agent_id}, revision {a.revision})",
        head[1],
        f"  schedule:       {spec.schedule.replace(chr(10), ' ')}",
        f"  command:        {command_text(spec)}"
        + (f"  (timeout {spec.host.timeout_seconds:g}s, overlap {spec.overlap})" if spec.host else ""),
        f"  timer:          {spec.timer} ({rb.guarantee}: {rb.guarantee_why})",
        f"  on failure:     hold after {spec.holds_after or 'never'}; {rb.failures} consecutive failed"
        + (f", no automatic start before {_up(rb.failing_until)}" if rb.failing_until is not None else ""),
        f"  catch-up:       {spec.catch_up.value if spec.catch_up else 'the deployment'}"
        + (f" within {format_interval(spec.catch_up_window)}" if spec.catch_up_window is not None else ""),
        *(
            [f"  fleet:          external id {spec.external_id or '-'}; labels {_labels(spec.labels)}"]
            if spec.external_id or spec.labels
            else []
        ),
        f"  floor:          {_floor_line(floor, spec.when_denied)}",
        f"  next eligible:  {next_eligible_text(rb.eligibility) if rb.eligibility and (rb.eligibility.next_eligible_at or rb.eligibility.status in NO_TIME) else '-'}",
        *[f"  limit:          {x.limit.describe()}: {limit_text(x)}" for x in (rb.limits.states if rb.limits else [])],
        *[f"  alert:          {alert}" for alert in alert_texts(rb.limits)],
        f"  next turn:      {_up(rb.next_fire_at) or '-'}",
        f"  debounce:       {_debounce(spec.debounce)}",
        f"  trigger:        {_pending_text(d.trigger)}",
        "  next fires (as the timer host fires them):",
        *[f"    {ceil_second(r.fire_at).isoformat()}   {_up(r.fire_at)}   {_fire_run(r)}" for r in d.fires],
        "  recent ticks (nominal -> actual: decision reason):",
        *[f"    {_down(t.nominal_at)} -> {_down(t.actual_at)}: {t.decision} {t.reason} {t.turn_id or ''}" for t in d.ticks],
        "  recent turns:",
        *[f"    {t.turn_id} attempt {t.attempt} {t.kind} {_down(t.started_at)} {turn_outcome(t)}" for t in d.turns],
        "  counters: " + (", ".join(f"{k}/{r}={n}" for k, rs in sorted(d.counters.items()) for r, n in sorted(rs.items())) or "none"),
    ]
    return "\n".join(lines)


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in labels) or "-"


def preview_doc(p: Preview) -> dict[str, Any]:
    return {
        "automation": p.automation_id,
        "schedule": p.schedule.canonical() if p.schedule is not None else None,
        "floor_seconds": seconds_of(p.floor) or 0,
        **({"goal_floor_seconds": seconds_of(p.effective.goal_floor)} if p.effective is not None and p.effective.goal_floor else {}),
        "lane_status": p.lane_status,
        "blocked": p.blocked,
        "off_phase": p.off_phase,
        "held_by": p.held_by,
        "fires": [fire_doc(r) for r in p.rows],
    }


def preview_text(p: Preview) -> str:
    floor = (floor_text(p.effective) if p.effective is not None else format_interval(p.floor)) if p.floor else "none"
    schedule = p.schedule.canonical().replace("\n", " ") if p.schedule is not None else "(nothing armed)"
    if p.blocked is not None:
        return f"{schedule}   floor {floor}: nothing fires: {p.blocked}"
    runs = sum(r.admitted for r in p.rows)
    phase = f"OFF PHASE: {p.off_phase}\n" if p.off_phase else ""
    held = f"HELD BY A LIMIT: {p.held_by}\n" if p.held_by else ""
    return f"{schedule}   floor {floor}: {runs} of {len(p.rows)} fires would run\n{held}{phase}" + table(
        ["LOCAL", "UTC", "WOULD_RUN", "ELIGIBLE_AT"],
        [(ceil_second(r.fire_at).isoformat(), _up(r.fire_at), _fire_run(r), _up(r.eligible_at)) for r in p.rows],
    )


def _debounce(debounce: Any) -> str:
    if debounce is None:
        return "none (a trigger wakes it at once)"
    cap = f", at most {format_interval(debounce.max_wait)} after the first" if debounce.max_wait is not None else ""
    return f"{format_interval(debounce.quiet)} quiet{cap}"


@optional
def trigger_wake_doc(w: TriggerWake) -> dict[str, Any]:
    """A pending triggered wake as JSON (None: no trigger pending)."""
    return {"pending": w.count, "first_at": iso(w.first_at), "last_at": iso(w.last_at), "due_at": iso(w.due), "wake_at": iso(w.wake_at)}


def _pending_text(w: TriggerWake | None) -> str:
    if w is None:
        return "none pending"
    when = f"wakes at {_up(w.wake_at)}" if w.wake_at is not None else "cannot wake it now (see its state)"
    floor = " (the floor or a failure streak comes first)" if w.wake_at is not None and w.wake_at > w.due else ""
    return f"{w.count} pending since {_down(w.first_at)}, due {_up(w.due)}: {when}{floor}"


def trigger_doc(t: TriggerAnswer) -> dict[str, Any]:
    """``automation trigger`` as JSON: the trigger recorded (or repeated) and the one pending wake."""
    return {**_recorded_doc(t.triggered), "wake": trigger_wake_doc(t.wake), "next_fire_at": iso(t.readback.next_fire_at)}


def _recorded_doc(tr: Triggered) -> dict[str, Any]:
    """The trigger as recorded: its automation, id, key and time, and whether its id was seen before."""
    return {"automation": tr.automation_id, "trigger_id": tr.trigger_id, "key": tr.key, "at": iso(tr.at), "repeated": not tr.new}


def trigger_text(t: TriggerAnswer) -> str:
    """One line: triggered (or a repeated id: nothing new) and when the one pending wake fires."""
    tr = t.triggered
    head = (
        f"triggered {tr.automation_id} (trigger {terminal_safe(tr.trigger_id, lines=False)})"
        if tr.new
        else f"trigger {terminal_safe(tr.trigger_id, lines=False)} of {tr.automation_id} was already recorded at {_down(tr.at)}: nothing new"
    )
    return f"{head}; {_pending_text(t.wake)}"


def backfill_doc(report: BackfillReport) -> dict[str, Any]:
    """A backfill (or its dry run) as JSON: one row per fire of the range."""
    return {
        "automation": report.automation_id,
        "from": iso(report.start),
        "to": iso(report.end),
        "dry_run": report.dry_run,
        "fires": [
            {
                "fire_at": iso(r.fire_at),
                "admitted": r.admitted,
                "reason": r.reason,
                "detail": r.detail or None,
                "turn_id": r.turn_id,
                "status": r.status,
            }
            for r in report.rows
        ],
    }


def backfill_text(report: BackfillReport) -> str:
    """One line per fire: admitted (and its verdict) or why not; a dry run says it wrote nothing."""
    if not report.rows:
        return f"{report.automation_id}: no fire between {iso(report.start)} and {iso(report.end)}"
    verb = "would run" if report.dry_run else "ran"
    rows = [
        (
            iso(r.fire_at),
            ("yes" if report.dry_run else f"yes: {r.status}") if r.admitted else f"no: {r.reason}",
            terminal_safe(r.detail or "", lines=False),
        )
        for r in report.rows
    ]
    admitted = sum(1 for r in report.rows if r.admitted)
    tail = " (dry run: nothing written)" if report.dry_run else ""
    head = f"{report.automation_id}: {verb} {admitted} of {len(report.rows)} fires{tail}"
    return head + "\n" + table(["FIRE", "ADMITTED", "WHY"], rows)
