"""The pages an owner acts from: the dashboard (one compact table of automations, troubled ones
first), an automation's page (its readback, timeline, recent turns) and a turn's page (verdict,
usage, the tail of its log); and the forms on them: run now, pause, resume (which also releases
a hold). Every form is a POST answered with a redirect back to where it was sent from.
"""

from __future__ import annotations

import os
import stat
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from floorgate.admission import NotFound, Principal
from floorgate.admission.clock import read_clock
from floorgate.admission.tallies import Tallies
from floorgate.scheduler.console import runs
from floorgate.scheduler.console.auth import require_owner, signed_in_page
from floorgate.scheduler.console.dashboard import RecentStarts, dashboard, fire_row
from floorgate.scheduler.console.errors import error_doc
from floorgate.scheduler.console.flash import redirect
from floorgate.scheduler.console.pages import PagePart
from floorgate.scheduler.console.timeline import SLOTS, Zoom, slot_width, timeline
from floorgate.scheduler.views.present import mission_doc, readback_doc, terminal_safe, turn_doc
from floorgate.scheduler.views.present_automation import switched_text

RUN_WAIT = 5.0  # seconds a Run now form waits for the verdict before saying the turn is running
LOG_TAIL = 64 * 1024  # bytes of a turn's log a page shows (its end)
TURNS_LISTED = 20


class LanePages(PagePart):
    """Dashboard, automation and turn pages, and their forms, on top of ``Pages``' helpers."""

    # -- pages -------------------------------------------------------------------------------
    @signed_in_page
    async def dashboard(self, request: Request, principal: Principal) -> Response:
        t = self.pages.shown(principal)
        zoom = Zoom.parse(request.query_params.get("zoom"))
        values = await self.pages.work(dashboard, self.fg, zoom, t.zone)
        return self.pages.render(request, "dashboard.html", principal, t=t, **values)

    @signed_in_page
    async def automation(self, request: Request, principal: Principal) -> Response:
        t = self.pages.shown(principal)
        zoom = Zoom.parse(request.query_params.get("zoom"))
        aid = request.path_params["automation"]
        try:
            values = await self.pages.work(self._automation, aid, zoom, t.zone)
        except NotFound as exc:
            return self.pages.render(request, "missing.html", principal, status=404, what=str(exc))
        return self.pages.render(request, "automation.html", principal, t=t, **values)

    def _automation(self, aid: str, zoom: Zoom, zone: Any) -> dict[str, Any]:
        detail = self.fg.automations.show(aid, fires=5, ticks=1)
        rb = detail.readback
        now = read_clock(self.fg.clock)
        since = now - zoom.span
        counts = Tallies(self.fg.store).slot_counts(aid, since, slot_width(zoom), SLOTS)
        doc = readback_doc(rb)
        doc["timeline"] = timeline(counts, RecentStarts(self.fg, since).of(aid), now, zoom, zone)
        turns = self.fg.turns.recent(aid, TURNS_LISTED)
        return {
            "r": doc,
            "fires": [fire_row(f) for f in detail.fires],
            "turns": [turn_doc(x) for x in turns],
            "zoom": zoom.value,
            "zooms": [z.value for z in Zoom],
        }

    @signed_in_page
    async def turn(self, request: Request, principal: Principal) -> Response:
        turn_id = request.path_params["turn_id"]
        record = await self.pages.work(self.fg.turns.get, turn_id)
        if record is None:
            return self.pages.render(request, "missing.html", principal, status=404, what=f"turn {turn_id!r} has no journal record")
        tail, note = await self.pages.work(log_tail, record.log_path)
        mission = await self.pages.work(self._mission, record.mission_id)
        return self.pages.render(request, "turn.html", principal, turn=turn_doc(record), log=tail, log_note=note, mission=mission)

    def _mission(self, mission_id: str | None) -> dict[str, Any] | None:
        """The usage the turn's mission has counted (turns, tool calls, tokens, wall) and its bounds."""
        if mission_id is None:
            return None
        detail = self.fg.envelopes.show(mission_id)
        return mission_doc(detail.mission, detail.envelope)

    # -- forms -------------------------------------------------------------------------------
    async def run_now(self, request: Request) -> Response:
        """Run now: a manual turn with the owner's reason, as the API's; back to where it was asked."""
        form, principal, refused = await self.pages._posted(request)
        if refused is not None:
            return refused
        aid = request.path_params["automation"]
        back = self.pages.back(form, "/dashboard")
        try:
            require_owner(principal)
            settled, doc = await self.pages.work(runs.run_now, self.fg, self.pages.runners, principal, aid, form.get("reason"), RUN_WAIT)
        except Exception as exc:
            status, err = error_doc(exc)
            return redirect(back, text=err["error"]["message"], failed=True, status=status, secure=self.pages.secure)
        if not settled:
            text = f"{aid}: turn {doc['turn_id']} is running (see /turns/{doc['turn_id']})"
            return redirect(back, text=text, secure=self.pages.secure, turn=doc["turn_id"])
        v = doc["verdict"]
        if v["status"] == "denied" and doc["detail"] and doc["turn"] is None:
            # Refused before anything was journaled (paused, held): the refusal's one line, no turn page to link.
            return redirect(back, text=doc["detail"], failed=True, secure=self.pages.secure)
        text = f"{aid}: turn {doc['turn_id']} {v['status']} ({v['stop_reason']})" + (f": {doc['detail']}" if doc["detail"] else "")
        return redirect(back, text=text, failed=v["status"] != "succeeded", secure=self.pages.secure, turn=doc["turn_id"])

    async def pause(self, request: Request) -> Response:
        return await self._set_state(request, pause=True)

    async def resume(self, request: Request) -> Response:
        return await self._set_state(request, pause=False)

    async def _set_state(self, request: Request, *, pause: bool) -> Response:
        """Pause (with the owner's note) or resume (which also releases a hold), as the CLI does."""
        form, principal, refused = await self.pages._posted(request)
        if refused is not None:
            return refused
        aid = request.path_params["automation"]
        back = self.pages.back(form, "/dashboard")
        note = str(form.get("note") or "").strip()
        try:
            require_owner(principal)
            switched = await self.pages.work(self._apply_state, aid, pause, note, principal)
        except Exception as exc:
            status, err = error_doc(exc)
            return redirect(back, text=err["error"]["message"], failed=True, status=status, secure=self.pages.secure)
        return redirect(back, text=switched_text(switched, pause=pause), secure=self.pages.secure)

    def _apply_state(self, aid: str, pause: bool, note: str, principal: Principal) -> Any:
        signed = f"{note or ('paused' if pause else 'resumed')} from the console (by {principal.name}, authenticated)"
        if pause:
            return self.fg.automations.pause(aid, signed)
        return self.fg.automations.resume(aid, signed)


def log_tail(path: str | None) -> tuple[str | None, str | None]:
    """The end of a turn's log (at most ``LOG_TAIL`` bytes, control characters made visible), and
    a note on what is not shown. A log that is missing, not a regular file, or a link is not read."""
    if not path:
        return None, "this turn has no log"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        return None, f"the log {path} cannot be read: {exc.strerror or exc}"
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None, f"the log {path} is not a regular file; not shown"
        start = max(0, info.st_size - LOG_TAIL)
        os.lseek(fd, start, os.SEEK_SET)
        data = os.read(fd, LOG_TAIL)
    finally:
        os.close(fd)
    text = terminal_safe(data.decode("utf-8", errors="replace"))
    note = f"the last {len(data):,} of {info.st_size:,} bytes" if start else None
    return text, note
