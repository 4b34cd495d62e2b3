"""Hook use cases: admit an agent app's prompt before its model wakes, count a tool call.

The hook commands (``floorgate hook ...``) parse their host's payload, call one method here and
speak their host's protocol (exit code, stderr); every failure blocks, and that is theirs to do.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from floorgate.admission import Admission, Automations, Decision, FloorgateError, Journal, Missions, NotFound, Store
from floorgate.admission.clock import Clock, read_clock
from floorgate.admission.limits import owner_estimate
from floorgate.admission.liveness import HookAnswers
from floorgate.admission.policies import Policies
from floorgate.admission.usage import Usage, UsageEntry, lane_estimate

from .app_usage import claude_turn_usage, codex_turn_usage, digest, unread_key

if TYPE_CHECKING:
    from ..app.readback import AutomationReadback


@dataclass(frozen=True)
class PromptAnswer:
    """The admission decision for one prompt, and the lane's readback when it was denied.

    ``managed_turn``: the prompt is the wake of this managed turn, admitted when it started (no
    decision of its own)."""

    decision: Decision | None
    readback: AutomationReadback | None
    recorded: bool = True  # False: the answer could not be recorded (readback under-claims the hook)
    managed_turn: str | None = None

    @property
    def admitted(self) -> bool:
        return self.managed_turn is not None or (self.decision is not None and self.decision.admitted)


def hook_turn_id(session_id: object) -> str:
    """A turn id for one prompt: the session's digest (any payload value is safe) and a nonce."""
    return f"hook-{digest(session_id)}-{uuid.uuid4().hex[:12]}"  # the Stop hook settles it by this prefix


class HookService:
    """Admission and envelope checks for hooks, on one store."""

    def __init__(self, store: Store, clock: Clock, envelope_mode: str | None, *, sleep: Callable[[float], None] | None = None) -> None:
        self.store = store
        self.clock = clock
        self.envelope_mode = envelope_mode
        self.sleep = sleep if sleep is not None else time.sleep  # looked up late: a test can replace it

    def admit_prompt(
        self,
        *,
        goal: str,
        agent: str,
        automation: str,
        manual_reason: str | None,
        session_id: object,
        wait: timedelta = timedelta(0),
        managed_turn: str | None = None,
    ) -> PromptAnswer:
        """Reserve and confirm a start for this prompt (the model wakes once the hook exits 0).
        A denial writes nothing; its readback says when the lane's next fire may run.

        ``wait``: an app's timer fires by its own clock, and the floor is anchored at the hook's
        admission a few milliseconds after the fire, so the next fire one floor later lands just
        before the floor opens. A denial whose floor opens within ``wait`` sleeps until then and
        asks once more instead of losing the whole period; the floor is never shortened.

        ``managed_turn`` ($FLOORGATE_TURN_ID, which ``floorgate turn run`` sets for its host): when
        it names a live turn of this automation, that turn's admission is this prompt's, and a
        second reservation would find the floor it just took."""
        if managed_turn is not None:
            record = Journal(self.store, self.clock).get(str(managed_turn)[:200])
            if record is not None and record.automation_id == automation and record.phase in ("confirmed", "launched"):
                return PromptAnswer(None, None, managed_turn=record.turn_id)
        admission = Admission(self.store, self.clock)
        turn_id = hook_turn_id(session_id)

        def reserve() -> Decision:
            return admission.reserve(
                goal=goal,
                agent=agent,
                automation=automation,
                turn_id=turn_id,
                trigger_time=read_clock(self.clock),
                manual_reason=manual_reason,
            )

        decision = reserve()
        gap = decision.opens_within(wait)
        if gap is not None:
            self.sleep(gap.total_seconds())
            decision = reserve()
        if not decision.admitted:
            from ..app.readback import Readback  # a denial's readback only: an admission never loads it

            recorded = self._answered(automation, False)
            try:
                readback: AutomationReadback | None = Readback(self.store, self.clock).automation(automation)
            except NotFound:
                readback = None  # a lane with no saved automation: the decision says it all
            return PromptAnswer(decision, readback, recorded)
        admission.confirm(turn_id)
        return PromptAnswer(decision, None, self._answered(automation, True))

    def _answered(self, automation_id: str, admitted: bool) -> bool:
        """Record the hook's answer for a saved automation: the liveness record the pre-model-hook
        guarantee is computed from (the one write a denial makes; it is not admission state).
        False when it could not be written: the answer stands, and the guarantee is under-claimed."""
        try:
            if Automations(self.store, self.clock).exists(automation_id):
                HookAnswers(self.store).record(automation_id, admitted=admitted, at=read_clock(self.clock))
        except FloorgateError:
            return False
        return True

    def record_turn_usage(
        self, *, goal: str, agent: str, automation: str, payload: dict[str, Any], app: str = "claude"
    ) -> tuple[UsageEntry, bool, str | None]:
        """Record the usage of the app turn that just ended (its end-of-turn hook): settle the
        estimate its prompt's admission held in this session, else write the turn; once per turn
        (the same turn again is a no-op). Unreadable usage is recorded unknown, holding the lane's
        estimate. Returns (entry, changed, problem)."""
        session_id = payload.get("session_id")
        if app == "codex":
            turn = codex_turn_usage(session_id, payload.get("turn_id"), payload.get("transcript_path"), payload.get("model"))
        else:
            turn = claude_turn_usage(session_id, payload.get("transcript_path"))
        estimate = 0
        if turn.tokens is None:
            from ..app.envelope_gate import EnvelopeGate, envelope_mode  # unreadable usage only

            envelope, _ = EnvelopeGate(self.store, clock=self.clock, mode=envelope_mode(self.envelope_mode)).envelope(
                goal, agent, automation
            )
            rules = Policies(self.store, self.clock).applicable(goal, agent, automation)
            with self.store.read() as conn:
                found = lane_estimate(
                    conn, goal, agent, automation, read_clock(self.clock),
                    envelope_max_tokens=envelope.max_tokens, owner_estimate=owner_estimate(r.limits for r in rules),
                )  # fmt: skip
            estimate = found if found is not None else 0
        entry, changed = Usage(self.store, self.clock).report(
            turn.key,
            goal=goal,
            agent=agent,
            automation=automation,
            tokens=turn.tokens,
            model=turn.model,
            turn_prefix=f"hook-{digest(session_id)}-",
            unread_key=unread_key(session_id),
            estimate_tokens=estimate,
        )
        return entry, changed, turn.problem

    def count_tool_call(self, mission_id: str) -> str | None:
        """Count one tool call of the mission; the refusal text when the call must not run."""
        from ..app.envelope_gate import EnvelopeGate, envelope_mode

        mission = Missions(self.store, self.clock).get(mission_id)
        automation = Automations(self.store, self.clock).get(mission.automation_id)
        return EnvelopeGate(self.store, clock=self.clock, mode=envelope_mode(self.envelope_mode)).count_tool_call(automation, mission)
