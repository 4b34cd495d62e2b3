"""Create and edit an automation from the console: a form whose fields are the whole-automation
document the API's ``PUT /api/automations/{id}`` takes (one decoder, ``spec_from_doc``: the same
checks and one-line errors as ``automation add``), with a live preview of the next fires and which
of them the floors admit (``automation preview``'s, for the unsaved schedule).

An edit carries the revision the form was read at: saving is a compare-and-set at exactly that
revision, so a change made elsewhere meanwhile is a conflict that asks to refresh, never a silent
overwrite. Fields the form does not show (env, model, meter, labels...) keep their stored values.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from floorgate.admission import InvalidInput, Principal, RevisionConflict
from floorgate.admission.intervals import format_interval
from floorgate.admission.scope import check_id
from floorgate.scheduler.app.automation_spec import spec_doc
from floorgate.scheduler.console.api_automations import save
from floorgate.scheduler.console.auth import require_owner, signed_in_page
from floorgate.scheduler.console.errors import Surface, error_doc, fix_message
from floorgate.scheduler.console.flash import peek, redirect
from floorgate.scheduler.console.pages import PagePart
from floorgate.scheduler.views.present_automation import preview_doc

PREVIEW_FIRES = 8
FORM_FIELDS = ("goal", "agent", "schedule", "command", "cwd", "timeout", "timer")


def form_doc(form: Any, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The document a submitted form describes, over ``base`` (the stored document of an edit):
    one argument per line of ``command``; an empty optional field means its default."""
    doc = dict(base or {})
    for name in FORM_FIELDS:
        raw = str(form.get(name) or "")
        if name == "command":
            argv = [line.strip() for line in raw.splitlines() if line.strip()]
            if argv:
                doc["command"] = argv
            else:
                doc.pop("command", None)
        elif raw.strip():
            doc[name] = raw.strip()
        else:
            doc.pop(name, None)
    return doc


def draft_of(form: Any) -> dict[str, str]:
    """What the owner typed, to fill the form again after a refused save (bounded for the cookie)."""
    return {name: str(form.get(name) or "")[:600] for name in (*FORM_FIELDS, "automation")}


class AutomationForms(PagePart):
    """The new-automation and edit forms, their saves and their live preview."""

    @signed_in_page
    async def new(self, request: Request, principal: Principal) -> Response:
        flash = peek(request)
        draft = (flash or {}).get("draft") or {"timer": "apscheduler"}
        return self.pages.render(request, "automation_form.html", principal, editing=None, draft=draft, revision=0)

    @signed_in_page
    async def edit(self, request: Request, principal: Principal) -> Response:
        aid = request.path_params["automation"]
        try:
            current = await self.pages.work(self.fg.automations.get, aid)
        except Exception as exc:
            return self.pages.render(request, "missing.html", principal, status=error_doc(exc)[0], what=str(exc))
        flash = peek(request)
        stored = spec_doc(current.spec)
        draft = (flash or {}).get("draft") or {
            **{k: v for k, v in stored.items() if k in FORM_FIELDS and k != "command"},
            "command": "\n".join(stored.get("command", [])),
            "timer": stored.get("timer", "apscheduler"),
        }
        conflict = (flash or {}).get("conflict")
        return self.pages.render(
            request, "automation_form.html", principal, editing=aid, draft=draft, revision=current.revision, conflict=conflict
        )

    async def create(self, request: Request) -> Response:
        form, principal, refused = await self.pages._posted(request)
        if refused is not None:
            return refused
        aid = str(form.get("automation") or "").strip()
        try:
            require_owner(principal)
            check_id(aid, "automation")
            if await self.pages.work(self.fg.automations.repo.exists, aid):
                raise InvalidInput("automation", f"{aid!r} exists; pick another name, or edit it")
            await self.pages.work(save, self.fg, aid, form_doc(form), 0)
        except Exception as exc:
            return self._refused(exc, "/new-automation", form)
        return redirect(f"/automations/{quote(aid, safe='')}", text=f"created {aid}", secure=self.pages.secure)

    async def change(self, request: Request) -> Response:
        form, principal, refused = await self.pages._posted(request)
        if refused is not None:
            return refused
        aid = request.path_params["automation"]
        back = f"/automations/{quote(aid, safe='')}/edit"
        try:
            require_owner(principal)
            revision = str(form.get("revision") or "")
            if not revision.isdigit():
                raise InvalidInput("revision", "reload the page: the form lost the revision it read")
            current = await self.pages.work(self.fg.automations.get, aid)
            result, doc = await self.pages.work(save, self.fg, aid, form_doc(form, spec_doc(current.spec)), int(revision))
        except Exception as exc:
            return self._refused(exc, back, form)
        text = f"{aid}: nothing changed" if result == "unchanged" else f"saved {aid} at revision {doc['revision']}"
        return redirect(f"/automations/{quote(aid, safe='')}", text=text, secure=self.pages.secure)

    def _refused(self, exc: Exception, back: str, form: Any) -> Response:
        status, _ = error_doc(exc, Surface.PAGE)
        extra: dict[str, Any] = {"draft": draft_of(form)}
        if isinstance(exc, RevisionConflict):
            extra["conflict"] = exc.current_revision
        return redirect(back, text=fix_message(exc, Surface.PAGE), failed=True, status=status, secure=self.pages.secure, **extra)

    def _schedule(self, text: str) -> str:
        """The schedule as typed, parsed as ``automation add`` parses it; errors name the field."""
        try:
            return str(self.fg.automations.parse_schedule(text))
        except InvalidInput:
            raise
        except ValueError as exc:
            raise InvalidInput("schedule", str(exc).removeprefix("schedule: ")) from None

    async def preview(self, request: Request) -> Response:
        """The next fires of the schedule being typed, and which the floors admit (writes nothing)."""
        principal = await self.pages.signed_in(request)
        if principal is None:
            return JSONResponse({"error": {"kind": "unauthenticated", "message": "sign in first"}}, status_code=401)
        q = request.query_params
        try:
            preview = await self.pages.work(
                lambda: self.fg.automations.preview_new(
                    check_id(q.get("automation") or "new", "automation"),
                    goal=q.get("goal") or "",
                    agent=q.get("agent") or "",
                    schedule=self._schedule(q.get("schedule") or ""),
                    timer=q.get("timer") or "apscheduler",
                    count=PREVIEW_FIRES,
                )
            )
        except Exception as exc:
            status, doc = error_doc(exc, Surface.PAGE)
            return JSONResponse(doc, status_code=status)
        t = self.pages.shown(principal)
        doc = preview_doc(preview)
        doc["floor"] = format_interval(preview.floor) if preview.floor else None
        for fire in doc["fires"]:
            fire["shown"] = t.at(fire["utc"])
            fire["runs_shown"] = t.at(fire["runs_at"], "") if fire["admitted"] else t.at(fire["eligible_at"], "")
        return JSONResponse(doc)
