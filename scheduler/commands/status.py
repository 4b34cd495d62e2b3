"""``floorgate status``: every automation and every floored lane, and why each is where it is."""

from __future__ import annotations

import argparse

from admission import Admission, Automations, InvalidInput, Journal, TickLog
from admission.clock import SystemClock, iso, read_clock
from admission.intervals import format_interval

from ..automation_status import automation_status
from ..cli import EXIT_OK, Context, add_common
from ..present import eligibility_doc, status_doc, table


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="automations and lanes: state, next timer fire, next eligible time, last outcome")
    p.add_argument("--goal")
    p.add_argument("--agent")
    p.add_argument("--automation")
    add_common(p)
    p.set_defaults(handler=_status)


def _agreement(st) -> str:  # type: ignore[no-untyped-def]
    b = st.binding
    if b is None:
        return "not applied"
    if b.desired is None:
        return "held"
    if b.ack_state == "acked" and b.observed_state == "present":
        return f"yes (acked {iso(b.acked_at)})"
    if b.observed_state in (None, "unavailable"):
        return f"unknown ({b.observed_state or 'never read'})"
    if b.observed_state == "absent":
        return "NO (absent on host)"
    return "not acked since the last change"


def _status(ctx: Context) -> int:
    a = ctx.args
    if a.agent is not None and a.goal is None:
        raise InvalidInput("--goal", "--agent needs --goal")
    if a.automation is not None and a.agent is None:
        raise InvalidInput("--agent", "--automation needs --agent")
    store = ctx.store
    admission = Admission(store)
    repo = Automations(store)
    journal, ticklog = Journal(store), TickLog(store)
    now = read_clock(SystemClock())
    automations = [
        x
        for x in repo.list(a.goal, a.agent)
        if a.automation is None or x.automation_id == a.automation
    ]
    statuses = [
        automation_status(x, admission=admission, automations=repo, journal=journal, ticklog=ticklog, now=now)
        for x in automations
    ]
    covered = {(x.spec.goal_id, x.spec.agent_id, x.automation_id) for x in automations}
    if a.agent is not None:
        lane_keys = [(a.goal, a.agent, a.automation)]
    else:
        lane_keys = [k for k in admission.lanes() if a.goal is None or k[0] == a.goal]
    lanes = [admission.eligibility(*k) for k in lane_keys if k not in covered]

    def text() -> str:
        parts = []
        if statuses:
            parts.append(
                table(
                    ["AUTOMATION", "LANE", "STATE", "NEXT_FIRE", "NEXT_ELIGIBLE_AT", "LAST_TURN", "OUTCOME", "TIMER", "DESIRED=OBSERVED", "GUARANTEE"],
                    [
                        (
                            st.automation.automation_id,
                            f"{st.automation.spec.goal_id}/{st.automation.spec.agent_id}",
                            st.state,
                            iso(st.next_fire_at),
                            iso(st.eligibility.next_eligible_at),
                            iso(st.last_turn.started_at) if st.last_turn else None,
                            (f"{st.last_turn.verdict.status} {st.last_turn.verdict.stop_reason}" if st.last_turn and st.last_turn.verdict else (st.last_turn.phase if st.last_turn else None)),
                            st.automation.spec.timer,
                            _agreement(st),
                            st.guarantee,
                        )
                        for st in statuses
                    ],
                )
            )
            parts += [f"  {st.automation.automation_id}: {st.detail}" for st in statuses if st.state not in ("eligible",)]
            parts += [
                f"  {st.automation.automation_id}: mission {st.mission.mission_id} {st.mission.status}: turns {st.mission.turns}"
                + (f"/{st.envelope.max_turns + st.mission.extra_turns}" if st.envelope and st.envelope.max_turns else "")
                + f", tool calls {st.mission.tool_calls}"
                + (f"/{st.envelope.max_tool_calls + st.mission.extra_tool_calls}" if st.envelope and st.envelope.max_tool_calls else "")
                + ", tokens "
                + (str(st.mission.tokens) if st.mission.usage_known else "not reported")
                + (f"/{st.envelope.max_tokens + st.mission.extra_tokens}" if st.envelope and st.envelope.max_tokens else "")
                + (f" (latch: {st.mission.latch})" if st.mission.latch else "")
                for st in statuses
                if st.mission is not None and st.envelope is not None and st.envelope.bounded
            ]
            parts += [
                f"  {st.automation.automation_id}: apply failed: {st.binding.apply_error}"
                for st in statuses
                if st.binding is not None and st.binding.apply_error
            ]
        if lanes:
            parts.append(
                table(
                    ["LANE", "STATUS", "REASON", "FLOOR", "LAST_START", "NEXT_ELIGIBLE_AT"],
                    [
                        (
                            "/".join(p for p in (e.goal_id, e.agent_id, e.automation_id) if p),
                            e.status,
                            e.reason.value,
                            format_interval(e.floor.floor) if e.floor else None,
                            f"{iso(e.last_start.anchor_at)} {e.last_start.kind.value} {e.last_start.turn_id}" if e.last_start else None,
                            iso(e.next_eligible_at),
                        )
                        for e in lanes
                    ],
                )
            )
        return "\n\n".join(parts) if parts else "no automations and no floored lanes"

    ctx.emit({"automations": [status_doc(st) for st in statuses], "lanes": [eligibility_doc(e) for e in lanes]}, text)
    return EXIT_OK
