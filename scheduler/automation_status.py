"""One readback of an automation for every surface: state, next timer fire, floor, last outcome."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta

from admission import (
    Admission,
    Approvals,
    Automation,
    Automations,
    Eligibility,
    Envelope,
    Journal,
    Mission,
    Missions,
    TickLog,
    TimerBinding,
    TimerBindings,
    TurnRecord,
)
from hosts import InvalidSchedule, Schedule

from .wake import next_wake


@dataclass(frozen=True)
class AutomationStatus:
    automation: Automation
    state: str  # eligible, interval_wait, paused, held, running, host_unavailable, awaiting_owner, unavailable
    detail: str
    eligibility: Eligibility
    next_fire_at: datetime | None
    last_turn: TurnRecord | None
    binding: TimerBinding | None = None
    guarantee: str = "enforced"
    mission: Mission | None = None
    envelope: Envelope | None = None


def host_problem(automation: Automation) -> str | None:
    """Why the command host cannot be launched right now, or None."""
    host = automation.spec.host
    if host is None:
        return None  # an external app launches it; floorgate cannot check that host
    if host.cwd is not None and not os.path.isdir(host.cwd):
        return f"working directory {host.cwd} does not exist"
    program = host.argv[0]
    if os.sep in program:
        base = host.cwd if host.cwd is not None and not os.path.isabs(program) else ""
        path = os.path.join(base, program) if base else program
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return f"{program} is not an executable file"
    elif shutil.which(program) is None:
        return f"{program} is not on PATH"
    return None


def automation_status(
    automation: Automation,
    **kwargs,  # type: ignore[no-untyped-def]
) -> AutomationStatus:
    """The status, with the automation's timer binding and the guarantee floorgate can claim."""
    from .timers import guarantee

    base = _status(automation, **kwargs)
    binding = TimerBindings(kwargs["admission"].store).get(automation.automation_id)
    next_fire = base.next_fire_at
    if automation.spec.timer != "apscheduler":
        # Another host keeps this timer: its next fire is the desired schedule's, as armed there.
        next_fire = None
        if binding is not None and binding.desired is not None and base.state not in ("paused", "held"):
            next_fire = Schedule.parse(binding.desired).next_after(kwargs["now"])
    store = kwargs["admission"].store
    missions = Missions(store)
    mission = missions.current(automation.automation_id) or next(iter(missions.recent(automation.automation_id, 1)), None)
    from .envelope_gate import EnvelopeGate

    envelope, problem = EnvelopeGate(store, mode="observe").envelope(automation.spec.goal_id, automation.spec.agent_id, automation.automation_id)
    state, detail = base.state, base.detail
    if mission is not None and mission.status == "awaiting_owner" and state not in ("paused", "held"):
        asks = Approvals(store).pending(mission.mission_id)
        state = "awaiting_owner"
        next_fire = None  # nothing runs until the owner decides
        detail = f"mission {mission.mission_id} waits for its owner: " + (
            f"floorgate approve {asks[0].approval_id} (or deny)" if asks else "no pending ask (expired?)"
        )
    elif mission is not None and mission.latch is not None and state not in ("paused", "held"):
        detail = f"{detail}; ACCOUNTING LATCH on {mission.mission_id}: {mission.latch}"
    if problem is not None:
        detail = f"{detail}; ENVELOPE PROBLEM: {problem}"
    if next_fire is not None and next_fire < kwargs["now"]:
        next_fire = kwargs["now"]  # a due catch-up fires as soon as a host arms the timer
    return AutomationStatus(
        base.automation, state, detail, base.eligibility, next_fire, base.last_turn, binding, guarantee(automation, binding),
        mission, envelope,
    )


def _status(
    automation: Automation,
    *,
    admission: Admission,
    automations: Automations,
    journal: Journal,
    ticklog: TickLog,
    now: datetime,
    catch_up: timedelta = timedelta(hours=1),
) -> AutomationStatus:
    spec = automation.spec
    eligibility = admission.eligibility(spec.goal_id, spec.agent_id, automation.automation_id)
    recent = journal.recent(automation.automation_id, limit=1)
    last_turn = recent[0] if recent else None
    next_fire = None
    try:
        schedule = Schedule.parse(spec.schedule)
        if automation.state == "active":
            next_fire = next_wake(
                schedule,
                previous=None,
                now=now,
                wake=automations.wake_state(automation.automation_id),
                next_eligible_at=eligibility.next_eligible_at if eligibility.status != "unavailable" else None,
                last_ticked=ticklog.last_nominal(automation.automation_id).get(automation.automation_id),
                catch_up=catch_up,
            )
    except InvalidSchedule as exc:
        return AutomationStatus(automation, "held", f"schedule unreadable: {exc}", eligibility, None, last_turn)
    if automation.state in ("paused", "held"):
        note = f": {automation.state_note}" if automation.state_note else ""
        return AutomationStatus(automation, automation.state, f"{automation.state}{note}", eligibility, None, last_turn)
    if journal.unsettled(automation.automation_id):
        return AutomationStatus(automation, "running", "a turn is running", eligibility, next_fire, last_turn)
    problem = host_problem(automation)
    if problem is not None:
        return AutomationStatus(automation, "host_unavailable", problem, eligibility, next_fire, last_turn)
    if eligibility.status == "unavailable":
        return AutomationStatus(automation, "unavailable", eligibility.detail, eligibility, next_fire, last_turn)
    return AutomationStatus(automation, eligibility.status, eligibility.detail, eligibility, next_fire, last_turn)
