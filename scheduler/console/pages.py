"""The console's server-rendered pages: sign-in, settings, owner asks and events (the dashboard,
automation and turn pages are in ``lanes.py``).

Pages render the same documents as the API (``readback_doc``, ``floor_view_doc``...), so the page,
the API and ``floorgate status --json`` show the same state; a page shows times in the zone its
principal picked, to the second (``shown.py``). Every write is a POST form carrying the session's
CSRF token, answered with a redirect (``flash.py``): reloading the page never submits it again.
"""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from floorgate.admission import InvalidInput, Principal, ReductionNotAuthorized, RevisionConflict, Scope
from floorgate.admission.clock import iso, read_clock
from floorgate.admission.intervals import parse_interval

from ..app.floors import ReductionNotShown, parse_compute_text
from ..app.notify import webhook_doc
from ..app.root import Floorgate
from ..views.present import change_doc
from ..views.present_floors import floor_change_doc, floor_view_doc
from ..views.present_limits import no_time_text
from .api import decide, pending_asks
from .auth import SESSION_COOKIE, SESSION_TTL, AuthError, Gatekeeper, client_of, require_owner
from .errors import Surface, error_doc, fix_message
from .flash import clear, peek, redirect
from .shown import COMMON_ZONES, Shown
from .workers import Workers

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"), autoescape=select_autoescape(["html"]))
TEMPLATES.globals["no_time"] = no_time_text  # a next eligible time that is none: "now" only when it is
SIGNIN_COOKIE = "floorgate_signin"  # the sign-in form's CSRF token (double submit), scoped to /signin


class Pages:
    """Page handlers over one ``Floorgate`` and one ``Gatekeeper``."""

    def __init__(self, fg: Floorgate, gate: Gatekeeper, work: Workers, runners: Workers, *, secure_cookies: bool = False) -> None:
        self.fg, self.gate, self.work, self.runners, self.secure = fg, gate, work, runners, secure_cookies

    # -- helpers -----------------------------------------------------------------------------
    def render(self, request: Request, name: str, principal: Principal | None, status: int = 200, **values: Any) -> HTMLResponse:
        """``name`` filled with ``values``, the message the last POST left (shown once), and the
        principal's way of showing times (``t``)."""
        session = self.gate.session(request)
        values.setdefault("flash", peek(request))
        values.setdefault("t", self.shown(principal))
        values.setdefault("common_zones", COMMON_ZONES)
        html = TEMPLATES.get_template(name).render(
            principal=principal, csrf=session.csrf if session else "", path=request.url.path, query=str(request.url.query), **values
        )
        response = HTMLResponse(html, status_code=status)
        clear(request, response)
        return response

    def shown(self, principal: Principal | None) -> Shown:
        """How times are shown to ``principal``: its zone (UTC until it picks one), now."""
        return Shown(principal.zone if principal is not None and principal.zone else "UTC", read_clock(self.fg.clock))

    def back(self, form: Any, default: str) -> str:
        """Where a form returns to: its ``back`` field when that is a path on this console, else ``default``."""
        to = str(form.get("back") or "")
        return to if to.startswith("/") and not to.startswith("//") and "\\" not in to and len(to) < 500 else default

    async def signed_in(self, request: Request) -> Principal | None:
        return await self.work(self.gate.page_principal, request)

    # -- sign-in -----------------------------------------------------------------------------
    async def home(self, request: Request) -> Response:
        return RedirectResponse("/dashboard", status_code=303)

    async def signin_form(self, request: Request) -> Response:
        """The sign-in form; after a refused sign-in (a redirect here) it says why once, with the
        refusal's status (401, 403, 429 and its ``Retry-After``), so a reload never posts the token again."""
        flash = peek(request)
        if flash is None or flash.get("form") != "signin" or not flash.get("failed"):
            return self.signin_page(request)
        status = flash.get("status")
        response = self.signin_page(request, status if isinstance(status, int) and 400 <= status < 500 else 401, flash["text"])
        retry = flash.get("retry_after")
        if isinstance(retry, int) and retry > 0:
            response.headers["Retry-After"] = str(retry)
        return response

    def _signin_refused(self, status: int, why: str, retry_after: int | None = None) -> Response:
        """A refused sign-in: a redirect to the form, which shows why (and keeps the status)."""
        extra: dict[str, Any] = {"retry_after": retry_after} if retry_after is not None else {}
        return redirect("/signin", text=why, failed=True, status=status, secure=self.secure, form="signin", **extra)

    def signin_page(self, request: Request, status: int = 200, error: str | None = None) -> Response:
        """The sign-in form, carrying a sign-in CSRF token that matches its cookie (double submit):
        a form posted from anywhere but this page, which alone can read the token, is refused."""
        token = request.cookies.get(SIGNIN_COOKIE, "")
        if not (20 <= len(token) <= 100 and token.replace("-", "").replace("_", "").isalnum()):
            token = secrets.token_urlsafe(32)
        response = self.render(request, "signin.html", None, status=status, error=error, signin_csrf=token)
        response.set_cookie(SIGNIN_COOKIE, token, path="/signin", httponly=True, samesite="strict", secure=self.secure)
        return response

    async def signin(self, request: Request) -> Response:
        form = await request.form()
        cookie, posted = request.cookies.get(SIGNIN_COOKIE, ""), form.get("signin_csrf")
        if not cookie or not isinstance(posted, str) or not hmac.compare_digest(posted.encode(), cookie.encode()):
            return self._signin_refused(403, "the sign-in form expired or came from elsewhere; sign in on this page again")
        try:
            session = await self.work(self.gate.sign_in, str(form.get("token") or ""), client_of(request))
        except AuthError as exc:
            return self._signin_refused(exc.status, str(exc), exc.retry_after)
        response = RedirectResponse("/dashboard", status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            session.session_id,
            max_age=int(SESSION_TTL.total_seconds()),
            httponly=True,
            samesite="strict",
            secure=self.secure,
        )
        return response

    async def _posted(self, request: Request) -> tuple[Any, Any, Response | None]:
        """A write form: its fields and signed-in principal, or the response that refuses it (a
        missing or wrong CSRF token, no session)."""
        form = await request.form()
        try:
            self.gate.check_csrf(request, form.get("csrf"))
        except AuthError as exc:
            return form, None, self._signin_refused(exc.status, str(exc))
        principal = await self.signed_in(request)
        if principal is None:
            return form, None, RedirectResponse("/signin", status_code=303)
        return form, principal, None

    async def signout(self, request: Request) -> Response:
        form = await request.form()
        try:
            session = self.gate.check_csrf(request, form.get("csrf"))
        except AuthError as exc:
            return self._signin_refused(exc.status, str(exc))
        self.gate.sign_out(session.session_id)
        response = RedirectResponse("/signin", status_code=303)
        response.delete_cookie(SESSION_COOKIE)
        return response

    # -- events ------------------------------------------------------------------------------
    async def events(self, request: Request) -> Response:
        principal = await self.signed_in(request)
        if principal is None:
            return RedirectResponse("/signin", status_code=303)
        events, hooks = await self.work(lambda: (self.fg.notify.recent(200), self.fg.notify.webhooks()))
        return self.render(
            request, "events.html", principal, events=list(reversed(events)), webhooks=[webhook_doc(w) for w in hooks],
            show_urls=principal.can_write,
        )  # fmt: skip

    # -- settings ----------------------------------------------------------------------------
    async def settings(self, request: Request) -> Response:
        principal = await self.signed_in(request)
        if principal is None:
            return RedirectResponse("/signin", status_code=303)
        target = request.query_params.get("target")
        try:
            values = await self.work(self._settings, target)
        except InvalidInput as exc:
            values = await self.work(self._settings, None)
            return self.render(request, "settings.html", principal, status=422, error=str(exc), **values)
        outcome = await self.work(self._saved_outcome, peek(request), values.get("target"))
        return self.render(request, "settings.html", principal, **values, **outcome)

    def _saved_outcome(self, flash: dict[str, Any] | None, target: str | None) -> dict[str, Any]:
        """What the last Save left for this page: saved, or its error with the owner's draft (a
        refused reduction's before -> after is previewed again, at the revision the draft read)."""
        if flash is None or flash.get("form") != "settings" or flash.get("target") != target:
            return {}
        if not flash.get("failed"):
            return {"saved": flash["text"]}
        out: dict[str, Any] = {
            "error": flash["text"],
            "draft": {"min_interval": flash.get("min_interval", ""), "note": flash.get("note", "")},
        }
        if isinstance(flash.get("conflict"), int):
            out["conflict"] = flash["conflict"]
        if flash.get("reduction") and target:
            try:
                change = self.fg.floors.preview(
                    Scope.parse(target),
                    revision=_revision(flash.get("revision")),
                    min_interval=parse_interval(str(flash.get("min_interval") or ""), "min_interval"),
                )
                out["draft"]["change"] = floor_change_doc(change)
            except Exception:  # the rule moved on: the page's own preview asks again as the owner types
                out["error"] += "; the rule changed since: refresh"
        return out

    def _settings(self, target: str | None) -> dict[str, Any]:
        targets = self.fg.floors.targets()
        if not target and targets:
            target = next(iter(targets))
        scope = Scope.parse(target) if target else None
        view = floor_view_doc(self.fg.floors.read(scope)) if scope is not None else None
        changes = [change_doc(c) for c in self.fg.policies.history(scope, limit=20) if c.scope == scope][:5] if scope is not None else []
        return {"targets": targets, "target": target, "view": view, "changes": changes}

    async def settings_preview(self, request: Request) -> Response:
        """The before -> after of an edit, for the page's few lines of script (a read: no CSRF)."""
        principal = await self.signed_in(request)
        if principal is None:
            return JSONResponse({"error": {"kind": "unauthenticated", "message": "sign in first"}}, status_code=401)
        q = request.query_params
        try:
            change = await self.work(
                self.fg.floors.preview,
                Scope.parse(q.get("target") or ""),
                revision=_revision(q.get("revision")),
                min_interval=parse_interval(q.get("min_interval") or "", "min_interval"),
            )
        except Exception as exc:
            status, doc = error_doc(exc, Surface.PAGE)
            return JSONResponse(doc, status_code=status)
        return JSONResponse(floor_change_doc(change))

    async def settings_save(self, request: Request) -> Response:
        """One Save: preview at the revision read, apply at it, read back; success only when the
        readback shows the write. Answered with a redirect to the settings page, which shows the
        outcome once (a refused save keeps what the owner typed, and offers a reduction's
        authorization)."""
        form, principal, refused = await self._posted(request)
        if refused is not None:
            return refused
        target = str(form.get("target") or "")
        typed, note = str(form.get("min_interval") or ""), str(form.get("note") or "")
        draft: dict[str, Any] = {
            "form": "settings",
            "target": target,
            "min_interval": typed[:100],
            "note": note[:500],
            "revision": str(form.get("revision") or "")[:20],
        }
        to = f"/settings?target={quote(target, safe='/')}" if target else "/settings"
        try:
            require_owner(principal)
            applied = await self.work(
                lambda: self.fg.floors.apply(
                    Scope.parse(target),
                    revision=_revision(form.get("revision")),
                    min_interval=parse_interval(typed, "min_interval"),
                    compute=parse_compute_text(str(form.get("compute") or "")),
                    principal=principal,
                    authorize_reduction=str(form.get("authorize_reduction")) if form.get("authorize_reduction") else None,
                    note=note or None,
                )
            )
            if applied.confirmed:
                return redirect(
                    to, text=f"saved {target} at revision {applied.rule.revision}; the readback shows it", secure=self.secure, **draft
                )
            return redirect(
                to,
                text="the write returned but the readback does not show it; refresh and check",
                failed=True,
                status=500,
                secure=self.secure,
                **draft,
            )
        except RevisionConflict as exc:
            return redirect(
                to, text=fix_message(exc, Surface.PAGE), failed=True, status=409, conflict=exc.current_revision, secure=self.secure, **draft
            )
        except ReductionNotShown as exc:
            return redirect(to, text=fix_message(exc, Surface.PAGE), failed=True, status=403, reduction=True, secure=self.secure, **draft)
        except (ReductionNotAuthorized, InvalidInput, AuthError) as exc:
            return redirect(
                to, text=fix_message(exc, Surface.PAGE), failed=True, status=error_doc(exc, Surface.PAGE)[0], secure=self.secure, **draft
            )

    # -- asks --------------------------------------------------------------------------------
    async def asks(self, request: Request) -> Response:
        principal = await self.signed_in(request)
        if principal is None:
            return RedirectResponse("/signin", status_code=303)
        items = await self.work(pending_asks, self.fg)
        return self.render(request, "asks.html", principal, asks=items, now=iso(read_clock(self.fg.clock)))

    async def asks_decide(self, request: Request) -> Response:
        """Approve or deny one ask; answered with a redirect to the inbox, which shows the outcome once."""
        form, principal, refused = await self._posted(request)
        if refused is not None:
            return refused
        approval_id = request.path_params["approval_id"]
        decision = form.get("decision")
        try:
            if decision not in ("approve", "deny"):
                raise InvalidInput("decision", "approve or deny")
            done = await self.work(decide, self.fg, principal, approval_id, decision == "approve")
            text = f"{done['ask']['state']} {approval_id}: mission {done['ask']['mission']} is {done['mission_status']}"
            return redirect(self.back(form, "/asks"), text=text, secure=self.secure)
        except Exception as exc:
            status, doc = error_doc(exc)
            return redirect(self.back(form, "/asks"), text=doc["error"]["message"], failed=True, status=status, secure=self.secure)

    # -- preferences -------------------------------------------------------------------------
    async def preferences(self, request: Request) -> Response:
        """The zone the console shows this principal times in (remembered in the store, per principal)."""
        form, principal, refused = await self._posted(request)
        if refused is not None:
            return refused
        zone = str(form.get("zone") or "").strip()
        try:
            await self.work(self.fg.principals.set_zone, principal.name, None if zone in ("", "UTC") else zone)
        except InvalidInput as exc:
            return redirect(self.back(form, "/dashboard"), text=str(exc), failed=True, status=422, secure=self.secure)
        return redirect(self.back(form, "/dashboard"), text=f"times are shown in {zone or 'UTC'}", secure=self.secure)


def _revision(value: object) -> int:
    text = str(value or "")
    if not text.isdigit():
        raise InvalidInput("revision", "reload the page: the form lost the revision it read")
    return int(text)


class PagePart:
    """Handlers that live beside ``Pages`` and use its helpers (``self.pages``) and its ``Floorgate``."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages
        self.fg = pages.fg
