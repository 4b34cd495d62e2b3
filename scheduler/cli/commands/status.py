"""``floorgate status``: every automation and every floored lane, and why each is where it is."""

from __future__ import annotations

import argparse

from floorgate.admission import InvalidInput

from ...views.present import host_doc, lane_doc, readback_doc, streamed
from ...views.present_status import status_lines
from ..context import EXIT_OK, Context, reads


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("status", help="automations and lanes: state, next timer fire, next eligible time, last outcome")
    p.add_argument("--goal")
    p.add_argument("--agent")
    p.add_argument("--automation")
    reads(p, _status)


def _status(ctx: Context) -> int:
    a = ctx.args
    if a.agent is not None and a.goal is None:
        raise InvalidInput("--goal", "--agent needs --goal")
    if a.automation is not None and a.agent is None:
        raise InvalidInput("--agent", "--automation needs --agent")
    # Rendered as read: one readback at a time, into the JSON encoder or the table's cells.
    view = ctx.app.readback.overview_stream(a.goal, a.agent, a.automation)
    ctx.emit(
        {
            "hosts": [host_doc(h, view.now) for h in view.hosts],
            "automations": streamed(readback_doc(rb) for rb in view.readbacks),
            "lanes": [lane_doc(e, view.lane_limits.get((e.goal_id, e.agent_id, e.automation_id))) for e in view.lanes],
        },
        lambda: status_lines(view),
    )
    return EXIT_OK
