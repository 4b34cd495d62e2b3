"""The owner console: a Starlette app over one ``Floorgate`` (``floorgate serve`` runs it).

``/api/...`` is the JSON API (bearer tokens), ``/api/openapi.json`` its schema, the pages are
``/signin``, ``/dashboard``, ``/settings`` and ``/asks`` (session cookie, CSRF on every form), and
``/metrics`` is Prometheus text read from the store (a bearer token of any role).
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._version import floorgate_version
from ..app.root import Floorgate
from .api import routes as api_routes
from .auth import SESSION_COOKIE, Gatekeeper
from .errors import error_response, json_error
from .forms import AutomationForms
from .guard import MAX_BODY, ConsoleGuard
from .lanes import LanePages
from .openapi import openapi
from .pages import Pages
from .runs import RUNNERS
from .workers import Workers

__all__ = ["SESSION_COOKIE", "create_app"]


def create_app(
    fg: Floorgate, *, secure_cookies: bool = False, allowed_hosts: frozenset[str] | None = None, max_body: int = MAX_BODY
) -> Starlette:
    """The console over ``fg`` (``secure_cookies``: mark the session cookie Secure, behind TLS),
    behind its ``ConsoleGuard``: only ``allowed_hosts`` as Host (None: any, for an embedded
    console; ``serve`` always names them), bodies up to ``max_body`` bytes."""
    from .metrics import CONTENT_TYPE, render

    gate = Gatekeeper(fg.principals, fg.clock)
    work = Workers()
    runners = Workers(RUNNERS)  # manual turns: minutes long, never on the request workers
    schema = openapi(floorgate_version())

    async def schema_route(request: Request) -> JSONResponse:
        return JSONResponse(schema)

    async def metrics_route(request: Request) -> Response:
        try:
            await work(gate.bearer, request)
            every_lane = request.query_params.get("lanes") == "all"  # opt-in: every lane's series
            body = await work(render, fg, every_lane)
        except Exception as exc:
            return error_response(exc)
        return Response(body, media_type=CONTENT_TYPE)

    routes = [
        Route("/api/openapi.json", schema_route, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
        *api_routes(fg, gate, work),
    ]
    pages = Pages(fg, gate, work, runners, secure_cookies=secure_cookies)
    routes += page_routes(pages)
    guard = Middleware(ConsoleGuard, allowed_hosts=allowed_hosts, max_body=max_body)
    app = Starlette(routes=routes, exception_handlers={Exception: json_error}, middleware=[guard])
    app.state.floorgate = fg
    app.state.gate = gate
    app.state.workers = work
    app.state.runners = runners
    return app


def page_routes(pages: Pages) -> list[Route]:
    """Every page and form of the console: (method, path, handler), in the order they match."""
    forms, lanes = AutomationForms(pages), LanePages(pages)
    table = (
        ("GET", "/", pages.home),
        ("GET", "/signin", pages.signin_form),
        ("POST", "/signin", pages.signin),
        ("POST", "/signout", pages.signout),
        ("GET", "/settings", pages.settings),
        ("GET", "/settings/preview", pages.settings_preview),
        ("POST", "/settings", pages.settings_save),
        ("GET", "/asks", pages.asks),
        ("GET", "/events", pages.events),
        ("POST", "/asks/{approval_id}/decide", pages.asks_decide),
        ("POST", "/preferences", pages.preferences),
        ("GET", "/new-automation", forms.new),
        ("POST", "/new-automation", forms.create),
        ("GET", "/automation-preview", forms.preview),
        ("GET", "/automations/{automation}/edit", forms.edit),
        ("POST", "/automations/{automation}/edit", forms.change),
        ("GET", "/dashboard", lanes.dashboard),
        ("GET", "/automations/{automation}", lanes.automation),
        ("POST", "/automations/{automation}/run", lanes.run_now),
        ("POST", "/automations/{automation}/pause", lanes.pause),
        ("POST", "/automations/{automation}/resume", lanes.resume),
        ("GET", "/turns/{turn_id}", lanes.turn),
    )
    return [Route(path, handler, methods=[method]) for method, path, handler in table]
