"""What floorgate can honestly promise about premature model wake-ups, for one automation, and why.

A timer host that launches turns after admission gives ``enforced``. An app that wakes the model
itself is guarded only by a pre-model hook, and only while that hook is seen answering: it must
have answered for the app's latest fire (give or take ``HOOK_GRACE``). A hook that was never
installed, was removed, or that its CLI does not run (an untrusted Codex hook) never answers, so
the readback falls back to ``schedule-only`` and says why. Where ``hook install`` recorded the hook,
the app's own files are read too: a hook its app will skip (untrusted, edited since it was trusted,
removed) is ``schedule-only`` at once, even if it answered a moment ago.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from floorgate.admission import Automation, TimerBinding
from floorgate.admission.clock import iso
from floorgate.admission.liveness import HookAnswer
from floorgate.hosts import InvalidSchedule
from floorgate.hosts.contract import Guarantee
from floorgate.hosts.registry import capabilities
from floorgate.hosts.schedule import parse_canonical

# How far a hook's answer may be from the fire it answers (the app's clock, a slow start).
HOOK_GRACE = timedelta(minutes=5)


@dataclass(frozen=True)
class GuaranteeReadback:
    """The guarantee, why it holds (or what is missing), and when the hook last answered."""

    guarantee: Guarantee
    why: str
    hook_answered_at: datetime | None = None


def guarantee_of(
    automation: Automation,
    binding: TimerBinding | None,
    answer: HookAnswer | None,
    now: datetime,
    *,
    hook_problem: str | None = None,
    launch_problem: str | None = None,
) -> GuaranteeReadback:
    """The guarantee for ``automation`` at ``now``, from its host's capabilities, the hook's last
    answer, ``hook_problem`` (why its agent app will not run the hook as installed; None: it will)
    and ``launch_problem`` (why the line armed on the host cannot launch admitted turns: a line
    that runs something else, or cannot run at all, is never ``enforced``)."""
    caps = capabilities(automation.spec.timer)
    answered = answer.answered_at if answer is not None else None
    if caps.launches_turns and not caps.armed_by_runtime and (binding is None or binding.applied_at is None):
        # A line never written to its host launches nothing: no promise about its fires, green or not.
        failed = f": {binding.apply_error}" if binding is not None and binding.apply_error else ""
        why = f"nothing was ever armed on its {automation.spec.timer.value} host{failed} ('floorgate automation apply {automation.automation_id}')"
        return GuaranteeReadback(Guarantee.NOT_ARMED, why, answered)
    if launch_problem is not None:
        why = f"{launch_problem}: no fire of it passes admission (fix the line, or 'floorgate automation apply' again)"
        return GuaranteeReadback(Guarantee.SCHEDULE_ONLY, why, answered)
    if not caps.needs_hook_for_guarantee:
        return GuaranteeReadback(Guarantee.of(caps, hook_seen=False), "floorgate launches every turn after admission", answered)
    answering, why = _hook_answering(automation, binding, answer, now, hook_problem)
    return GuaranteeReadback(Guarantee.of(caps, hook_seen=answering), why, answered)


def _hook_answering(
    automation: Automation, binding: TimerBinding | None, answer: HookAnswer | None, now: datetime, hook_problem: str | None
) -> tuple[bool, str]:
    """Whether the pre-model hook is seen answering the app's fires, and why (not)."""
    if hook_problem is not None:  # however recently it answered, the app skips it from now on
        return False, hook_problem
    if answer is None:
        return False, "no pre-model hook has answered for this automation (see 'floorgate hook install' and 'floorgate hook status')"
    due = _latest_fire(automation, binding, now - HOOK_GRACE)
    if due is not None and due >= automation.created_at and answer.answered_at < due - HOOK_GRACE:
        return False, (
            f"the pre-model hook last answered at {iso(answer.answered_at)}, not for the app's fire at {iso(due)}: "
            "it may be missing, failing to start, or not trusted by its CLI (see 'floorgate hook status')"
        )
    return True, f"the pre-model hook answered at {iso(answer.answered_at)}"


def _latest_fire(automation: Automation, binding: TimerBinding | None, at: datetime) -> datetime | None:
    """The app's latest fire at or before ``at``, on the schedule it was given (None: unknown or none)."""
    text = binding.desired if binding is not None and binding.desired is not None else automation.spec.schedule
    try:
        return parse_canonical(text).last_at_or_before(at)
    except (InvalidSchedule, ValueError, OverflowError):
        return None  # an unreadable schedule holds the automation elsewhere; it proves nothing here
