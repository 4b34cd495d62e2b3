"""Why a start is refused before admission, beyond the floor: the automation's state (paused,
held) and its failure streak's wait. A manual run bypasses only the interval, so the state refuses
it as it refuses a timer's fire, with one line saying how to clear it; the streak's wait slows only
automatic starts (a manual run is the owner's explicit intent).
"""

from __future__ import annotations

from datetime import datetime

from floorgate.admission import Automation, AutomationState, HoldKind, Verdict, WakeState, failure_wait
from floorgate.admission.clock import iso

FAILING_REASON = "failing"  # the stop reason of an automatic start refused by its failure streak's wait


def _clear(automation: Automation) -> str:
    """How the owner clears the state that stops ``automation``."""
    aid = automation.automation_id
    if automation.state == AutomationState.PAUSED:
        return f"resume it with 'floorgate automation resume {aid}'"
    kind = automation.hold_kind
    if kind is HoldKind.MISSION_STUCK:
        return (
            f"decide the mission first (see 'floorgate automation show {aid}'), then release the hold: 'floorgate automation resume {aid}'"
        )
    if kind is HoldKind.FAILING:
        return f"fix the cause, then release the hold with 'floorgate automation resume {aid}'"
    return f"release the hold: change the schedule or floor its timer host cannot express, then 'floorgate automation apply {aid}'"


def state_refusal(automation: Automation, *, manual: bool) -> tuple[Verdict, str] | None:
    """The refusal of a start of an automation that is not active (None: it is active), manual
    runs included: one line naming the state and how to clear it."""
    if automation.state == AutomationState.ACTIVE:
        return None
    state = automation.state.value
    kind = f" ({automation.hold_kind.value})" if automation.hold_kind is not None else ""
    note = automation.state_note or ""
    # A hold's note may say how to clear it already: then the line says it once.
    note = f": {note}" if note and "floorgate automation" not in note else (f": {note.split(';')[0]}" if note else "")
    verdict = Verdict.denied(f"automation_{state}")
    lead = "a manual run bypasses only the interval, not this: " if manual else ""
    detail = f"{automation.automation_id} is {state}{kind}{note}; {lead}{_clear(automation)}"
    return verdict, " ".join(detail.split())


def failing_refusal(automation: Automation, wake: WakeState, now: datetime) -> tuple[Verdict, str] | None:
    """The refusal of an automatic start before its failure streak's wait (None: no wait now)."""
    until = failure_wait(wake)
    if until is None or now >= until:
        return None
    verdict = Verdict.denied(FAILING_REASON, retryable=True)
    detail = f"{automation.automation_id} is failing ({wake.failures} consecutive failures): no automatic start before {iso(until)}"
    return verdict, detail
