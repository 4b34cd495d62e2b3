"""The console's JSON API: each endpoint parses, calls one service method and renders the same
document the CLI's ``--json`` prints. Every endpoint needs ``Authorization: Bearer``; writes and
approvals need the ``owner`` role, and record the principal as authenticated."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal, overload

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from floorgate.admission import InvalidInput, NotFound, Principal, Provenance, Role, Scope
from floorgate.admission.clock import iso, read_clock
from floorgate.admission.events import parse_kinds
from floorgate.admission.intervals import parse_interval

from ..app.automation_spec import doc_text
from ..app.floors import parse_compute_text
from ..app.notify import webhook_doc
from ..app.readback import ReadbackState
from ..app.root import Floorgate
from ..app.status_page import StatusPage, status_page
from ..views.present import (
    automation_doc,
    binding_doc,
    change_doc,
    host_doc,
    lane_doc,
    mission_doc,
    readback_doc,
    rule_doc,
    start_doc,
    tick_doc,
    turn_doc,
)
from ..views.present_automation import detail_doc, preview_doc, switched_doc
from ..views.present_floors import floor_applied_doc, floor_change_doc, floor_view_doc
from . import api_automations, runs
from .auth import Gatekeeper, require_owner
from .errors import error_response
from .workers import Workers

Body = dict[str, Any]
MAX_COUNT = 1000  # the most items a list endpoint returns (``limit``, ``next``, ``ticks``)
MAX_DEPTH = 16  # JSON nesting a body may have (the deepest the API reads is a compute block)
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(r"[\[\]{}]")
MAX_WAIT = timedelta(minutes=1)  # the longest a request waits for a host's readback or a turn's verdict


@dataclass(frozen=True)
class Accepted:
    """A handler's answer for work that goes on after the response (202)."""

    doc: dict[str, Any]


@dataclass(frozen=True)
class Endpoint:
    """One API operation: where, who may call it, what it takes, and its handler."""

    method: str
    path: str
    summary: str
    handler: Callable[[Floorgate, Principal, Request, Body], Any]
    role: Role = Role.VIEWER  # the least role that may call it
    query: dict[str, str] = field(default_factory=dict)  # name -> description
    body: dict[str, tuple[str, bool, str]] = field(default_factory=dict)  # name -> (json type, required, description)
    responses: dict[str, str] = field(default_factory=dict)  # further success codes -> description


# -- parsing -------------------------------------------------------------------------------------
@overload
def text_field(body: Body, name: str, *, required: Literal[True] = True) -> str: ...
@overload
def text_field(body: Body, name: str, *, required: bool) -> str | None: ...
def text_field(body: Body, name: str, *, required: bool = True) -> str | None:
    """The string ``name`` of the body (None when absent and not ``required``)."""
    return doc_text(body, name, required=required)


def int_field(body: Body, name: str) -> int:
    value = body.get(name)
    if type(value) is not int or value < 0:
        raise InvalidInput(name, "must be a whole number (0 when no rule exists yet)")
    return value


def scope_field(value: str | None, name: str = "scope") -> Scope:
    if not value:
        raise InvalidInput(name, "name a target: GOAL, GOAL/AGENT or GOAL/AGENT/AUTOMATION")
    return Scope.parse(value)


def interval_field(body: Body, name: str = "min_interval") -> timedelta | None:
    value = text_field(body, name, required=False)
    return parse_interval(value, name) if value is not None else None


def compute_field(body: Body) -> Any:
    value = body.get("compute")
    if value is None:
        return None
    return parse_compute_text(value if isinstance(value, str) else json.dumps(value))


def wait_field(body: Body, default: str) -> float:
    """Seconds to wait (``wait``: an interval such as 10s), at most ``MAX_WAIT``."""
    value = text_field(body, "wait", required=False)
    wait = parse_interval(value if value is not None else default, "wait")
    if wait > MAX_WAIT:
        raise InvalidInput("wait", f"wait at most {int(MAX_WAIT.total_seconds())}s")
    return wait.total_seconds()


def bool_field(body: Body, name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise InvalidInput(name, "must be true or false")
    return value


def count_field(request: Request, name: str, default: int) -> int:
    """A count from the query string: a whole number from 0 to ``MAX_COUNT``."""
    raw = request.query_params.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) > MAX_COUNT:
        raise InvalidInput(name, f"must be a whole number from 0 to {MAX_COUNT}")
    return int(raw)


def json_body(raw: bytes) -> Body:
    """A request body as a JSON object, refused (422) when it is not one or nests deeper than ``MAX_DEPTH``."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput("body", "is not UTF-8 JSON; send a JSON object") from None
    depth = 0
    for bracket in _BRACKETS.finditer(_STRINGS.sub("", text)):
        depth += 1 if bracket.group() in "[{" else -1
        if depth > MAX_DEPTH:
            raise InvalidInput("body", f"nests deeper than {MAX_DEPTH} levels; send a flat JSON object")
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        raise InvalidInput("body", "is not JSON; send a JSON object") from None
    if not isinstance(body, dict):
        raise InvalidInput("body", "send a JSON object")
    return body


# -- handlers ------------------------------------------------------------------------------------
def _whoami(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return {"name": p.name, "role": p.role.value}


STATUS_PAGE = 200  # automations per /api/status page unless ?limit= says otherwise


def _status(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    q = r.query_params
    if q.get("automation") is not None:  # one automation: no page to walk
        view = fg.readback.overview(q.get("goal"), q.get("agent"), q.get("automation"))
        found = StatusPage(now=view.now, readbacks=view.readbacks, lanes=view.lanes, hosts=view.hosts, lane_limits=view.lane_limits)
    else:
        limit = count_field(r, "limit", STATUS_PAGE)
        if limit == 0:
            raise InvalidInput("limit", "must be at least 1")
        state = q.get("state")
        if state is not None and state not in set(ReadbackState):
            raise InvalidInput("state", f"must be one of {', '.join(s.value for s in ReadbackState)}")
        after = q.get("after")
        found = status_page(
            fg.readback, q.get("goal"), q.get("agent"), after=after, limit=limit, state=None if state is None else ReadbackState(state)
        )
    return {
        "hosts": [host_doc(h, found.now) for h in found.hosts],
        "automations": [readback_doc(rb) for rb in found.readbacks],
        "lanes": [lane_doc(e, found.lane_limits.get((e.goal_id, e.agent_id, e.automation_id))) for e in found.lanes],
        "next": found.next,  # the cursor of the next page (?after=), None on the last
    }


def _rules(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return {"rules": [rule_doc(x) for x in fg.policies.list(r.query_params.get("goal"))]}


def _policy(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return floor_view_doc(fg.floors.read(scope_field(r.query_params.get("scope"))))


def _policy_preview(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    scope = scope_field(text_field(b, "scope"))
    return floor_change_doc(
        fg.floors.preview(scope, revision=int_field(b, "revision"), min_interval=interval_field(b), compute=compute_field(b))
    )


def _policy_apply(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    scope = scope_field(text_field(b, "scope"))
    applied = fg.floors.apply(
        scope,
        revision=int_field(b, "revision"),
        min_interval=interval_field(b),
        compute=compute_field(b),
        principal=p,
        authorize_reduction=text_field(b, "authorize_reduction", required=False),
        note=text_field(b, "note", required=False),
    )
    return floor_applied_doc(applied)


def _history(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    raw = r.query_params.get("scope")
    scope = scope_field(raw) if raw else None
    return {"history": [change_doc(c) for c in fg.policies.history(scope, limit=count_field(r, "limit", 100))]}


def _eligibility(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    q = r.query_params
    goal, agent = q.get("goal"), q.get("agent")
    if not goal:
        raise InvalidInput("goal", "is required")
    if not agent:
        raise InvalidInput("agent", "is required")
    return lane_doc(*fg.readback.lane(goal, agent, q.get("automation") or None))


def _automations(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    items, broken = fg.automations.list(r.query_params.get("goal"))
    return {
        "automations": [automation_doc(x) for x in items],
        "unreadable": [{"automation": aid, "reason": why} for aid, why in sorted(broken.items())],
    }


def _automation(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    aid = r.path_params["automation"]
    return detail_doc(fg.automations.show(aid, fires=count_field(r, "next", 5), ticks=count_field(r, "ticks", 10)))


def _automation_preview(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return preview_doc(fg.automations.preview(r.path_params["automation"], count=count_field(r, "next", 10)))


def _pause(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    note = text_field(b, "note", required=False) or "paused from the console"
    return switched_doc(fg.automations.pause(r.path_params["automation"], f"{note} (by {p.name}, authenticated)"))


def _resume(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return switched_doc(fg.automations.resume(r.path_params["automation"]))


def _run_now(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    reason, wait = text_field(b, "reason"), wait_field(b, "10s")
    settled, doc = runs.run_now(fg, r.app.state.runners, p, r.path_params["automation"], reason, wait)
    return doc if settled else Accepted(doc)


def _turn(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    record = fg.turns.get(r.path_params["turn_id"])
    if record is None:
        raise NotFound(f"turn {r.path_params['turn_id']!r} has no journal record")
    return turn_doc(record)


# A TimerService remembers whether its last read asked the running host (``asked_host``): one
# timer operation at a time per console, so two requests never read each other's answer.
_TIMERS = threading.Lock()


def _timer(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    automation = fg.automations.get(r.path_params["automation"])
    binding = fg.timers.bindings.get(automation.automation_id)
    return {
        "automation": automation.automation_id,
        "binding": binding_doc(binding, fg.timers.guarantee(automation, binding)) if binding is not None else None,
        "diff": fg.timers.diff(automation),
    }


def _timer_desired(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    automation = fg.automations.get(r.path_params["automation"])
    with _TIMERS:
        binding = fg.timers.desire(automation)
        return binding_doc(binding, fg.timers.guarantee(automation, binding))


def _observation_doc(obs: Any) -> dict[str, Any] | None:
    return None if obs is None else {"state": obs.state, "text": obs.text, "read_at": iso(obs.read_at), "detail": obs.detail}


def _read_kwargs(b: Body) -> dict[str, Any]:
    return {
        "current_rrule": text_field(b, "current_rrule", required=False),
        "unavailable": bool_field(b, "unavailable"),
        "wait": wait_field(b, "10s"),
    }


def _timer_observe(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    automation = fg.automations.get(r.path_params["automation"])
    kwargs = _read_kwargs(b)
    with _TIMERS:
        observed = fg.timers.observe(automation, **kwargs)
        binding = observed.binding
        doc = (
            binding_doc(binding, fg.timers.guarantee(automation, binding))
            if binding is not None
            else {"automation": automation.automation_id, "binding": None}
        )
    return {**doc, "observation": _observation_doc(observed.observation)}


def _timer_ack(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    automation = fg.automations.get(r.path_params["automation"])
    kwargs = _read_kwargs(b)
    with _TIMERS:
        result = fg.timers.ack(automation, **kwargs)
    return {
        "automation": automation.automation_id,
        "accepted": result.accepted,
        "read_requested": result.asked_host,
        "reason": result.reason,
        "observation": _observation_doc(result.observation),
    }


def _missions(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    items = fg.envelopes.list(r.query_params.get("automation") or None, limit=count_field(r, "limit", 50))
    return {"missions": [mission_doc(m) for m in items]}


def _mission(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    detail = fg.envelopes.show(r.path_params["mission_id"])
    doc = mission_doc(detail.mission, detail.envelope)
    doc["pending_asks"] = [
        {"approval_id": x.approval_id, "bound": x.bound, "proposal": x.proposal, "expires_at": iso(x.expires_at)} for x in detail.asks
    ]
    return doc


def _events(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    kind = r.query_params.get("kind") or None
    if kind is not None:
        kind = parse_kinds(kind)[0].value
    return {"events": fg.notify.recent(count_field(r, "limit", 50), kind)}


def _webhooks(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return {"webhooks": [webhook_doc(w) for w in fg.notify.webhooks()]}


def _webhook_add(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    url, events = text_field(b, "url"), text_field(b, "events")
    fmt = text_field(b, "format", required=False) or "json"
    webhook, secret = fg.notify.add_webhook(url, events, fmt)
    return {**webhook_doc(webhook), "secret": secret}


def _webhook_remove(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    fg.notify.remove_webhook(r.path_params["webhook_id"])
    return {"removed": r.path_params["webhook_id"]}


def _webhook_retry(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return {"webhook_id": r.path_params["webhook_id"], "retried": fg.notify.retry_dead(r.path_params["webhook_id"])}


# bound -> (the mission's counter of it, its extension already granted); wall time is per turn, not counted
_ASK_BOUNDS = {
    "max_turns": ("turns", "extra_turns"),
    "max_tool_calls": ("tool_calls", "extra_tool_calls"),
    "max_tokens": ("tokens", "extra_tokens"),
    "max_wall_seconds": (None, "extra_wall_seconds"),
}


def ask_limit_doc(ask: Any, mission: Any, envelope: Any) -> dict[str, Any]:
    """Which limit an ask is about: the bound, the limit in force (the envelope's plus what was
    granted before), how much the mission used, and the limit approving it would set (None: unknown)."""
    counter, extra = _ASK_BOUNDS.get(ask.bound, (None, None))
    extension = next((v for k, v in ask.proposal.items() if k == ask.bound and type(v) is int), None)
    base = getattr(envelope, ask.bound, None) if envelope is not None else None
    limit = base + getattr(mission, extra) if base and mission is not None and extra is not None else None
    used = getattr(mission, counter) if mission is not None and counter is not None else None
    if ask.bound == "max_tokens" and mission is not None and not mission.usage_known:
        used = None  # no usage reported: unknown, not zero
    return {
        "bound": ask.bound,
        "limit": limit,
        "used": used,
        "extension": extension,
        "proposed_limit": limit + extension if limit is not None and extension is not None else None,
    }


def ask_doc(ask: Any, mission: Any, envelope: Any = None) -> dict[str, Any]:
    """An owner ask with its stored proposal and the limit it is about (the page and the API show the same)."""
    return {
        "approval_id": ask.approval_id,
        "mission": ask.mission_id,
        "automation": mission.automation_id if mission is not None else None,
        "scope": ask.scope,
        "bound": ask.bound,
        "proposal": ask.proposal,
        "limit": ask_limit_doc(ask, mission, envelope),
        "state": ask.state,
        "created_at": iso(ask.created_at),
        "expires_at": iso(ask.expires_at),
        "decided_at": iso(ask.decided_at),
        "decided_by": ask.decided_by,
        "decided_by_kind": ask.decided_by_kind,
    }


def pending_asks(fg: Floorgate) -> list[dict[str, Any]]:
    """Every pending ask's document, with its mission's envelope (the page and the API list these)."""
    out = []
    for ask, mission in fg.envelopes.pending():
        envelope = fg.envelopes.show(mission.mission_id).envelope if mission is not None else None
        out.append(ask_doc(ask, mission, envelope))
    return out


def _asks(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return {"asks": pending_asks(fg)}


def decide(fg: Floorgate, p: Principal, approval_id: str, approve: bool) -> dict[str, Any]:
    """Decide an ask as ``p`` (authenticated): the API and the inbox page both call this."""
    done = fg.envelopes.decide(approval_id, approve, decided_by=require_owner(p).name, provenance=Provenance.AUTHENTICATED)
    return {"ask": ask_doc(done.approval, done.mission), "mission_status": done.mission.status}


def _approve(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return decide(fg, p, r.path_params["approval_id"], True)


def _deny(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    return decide(fg, p, r.path_params["approval_id"], False)


def _starts(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    q = r.query_params
    items = fg.admission.starts(q.get("goal"), q.get("agent"), q.get("automation"), limit=count_field(r, "limit", 50))
    return {"starts": [start_doc(s) for s in items]}


def _ticks(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    aid = r.path_params["automation"]
    fg.automations.get(aid)  # an unknown id is not_found, not an empty list
    return {"ticks": [tick_doc(t) for t in fg.readback.ticklog.recent(aid, count_field(r, "limit", 20))]}


def _hosts(fg: Floorgate, p: Principal, r: Request, b: Body) -> Any:
    now = read_clock(fg.clock)
    return {"hosts": [host_doc(h, now) for h in fg.readback.hosts()]}


_AID = {"automation": "the automation's id (path)"}
_SCOPE_BODY = {
    "scope": ("string", True, "GOAL, GOAL/AGENT or GOAL/AGENT/AUTOMATION"),
    "revision": ("integer", True, "the revision you read (0 when no rule exists)"),
    "min_interval": ("string", False, "e.g. 24h, 45m, PT24H; 0 disables"),
    "compute": ("object", False, "a compute block; {} removes it"),
}
_READ_BODY = {
    "current_rrule": ("string", False, "external timers: the app's current schedule"),
    "unavailable": ("boolean", False, "external timers: the app cannot be read"),
    "wait": ("string", False, "runtime timers: how long to wait for the running host (default 10s, at most 60s)"),
}
ENDPOINTS = [
    Endpoint("GET", "/api/whoami", "The authenticated principal and its role", _whoami),
    Endpoint("GET", "/api/status", "Automations' readbacks a page at a time (?limit=, ?after=next, ?state=, ?goal=), lanes and hosts", _status,
             query={"goal": "narrow to a goal", "agent": "narrow to an agent", "automation": "narrow to one automation",
                    "state": "only automations in this state", "limit": "automations per page (default 200)",
                    "after": "the previous page's next cursor"}),
    Endpoint("GET", "/api/policies", "Every stored rule (floor and compute block)", _rules, query={"goal": "narrow to a goal"}),
    Endpoint("GET", "/api/policy", "A target's stored rule, revision and effective inheritance", _policy, query={"scope": "the target"}),
    Endpoint("POST", "/api/policy/preview", "Preview a change at an exact revision: before/after and whether it reduces", _policy_preview,
             role=Role.OWNER, body=_SCOPE_BODY),
    Endpoint("POST", "/api/policy/apply", "Apply a change at an exact revision, then read it back", _policy_apply, role=Role.OWNER,
             body={**_SCOPE_BODY, "authorize_reduction": ("string", False, "the preview's reduction_key, to authorize exactly that reduction"),
                   "note": ("string", False, "why (one line, recorded with the write's provenance)")}),
    Endpoint("GET", "/api/policy/history", "Provenance of policy writes, newest first", _history,
             query={"scope": "narrow to a target and below", "limit": "at most this many"}),
    Endpoint("GET", "/api/eligibility", "Eligibility of one lane", _eligibility,
             query={"goal": "required", "agent": "required", "automation": "optional"}),
    Endpoint("GET", "/api/automations", "Every automation (and unreadable rows)", _automations, query={"goal": "narrow to a goal"}),
    Endpoint("GET", "/api/automations/{automation}", "One automation: readback, next fires, ticks, turns", _automation,
             query={**_AID, "next": "fires to show", "ticks": "ticks to show"}),
    Endpoint("PUT", "/api/automations/{automation}", "Create an automation, or change it at exactly the revision sent (idempotent)",
             api_automations.put, role=Role.OWNER, query=_AID, body=api_automations.BODY,
             responses={"201": "created"}),
    Endpoint("DELETE", "/api/automations/{automation}", "Remove an automation (its starts and turns are kept)", api_automations.delete,
             role=Role.OWNER, query=_AID),
    Endpoint("GET", "/api/automations/{automation}/preview", "Next host fires and which run", _automation_preview,
             query={**_AID, "next": "fires to show"}),
    Endpoint("POST", "/api/automations/{automation}/pause", "Pause an automation with a note", _pause, role=Role.OWNER, query=_AID,
             body={"note": ("string", False, "why (shown in status)")}),
    Endpoint("POST", "/api/automations/{automation}/resume", "Resume an automation", _resume, role=Role.OWNER, query=_AID),
    Endpoint("POST", "/api/automations/{automation}/trigger", "New work: wake it once after its debounce (floors and budgets decide)",
             api_automations.trigger, role=Role.OWNER, query=_AID, body=api_automations.TRIGGER_BODY),
    Endpoint("GET", "/api/automations/{automation}/ticks", "Recent timer ticks of an automation", _ticks, query={**_AID, "limit": "at most"}),
    Endpoint("POST", "/api/automations/{automation}/run", "Run a managed turn now: the reason bypasses only the interval (as turn run --manual-reason)",
             _run_now, role=Role.OWNER, query=_AID,
             body={"reason": ("string", True, "why (recorded with the start)"),
                   "wait": ("string", False, "how long to wait for the verdict (default 10s, at most 60s); 202 with the turn id after")},
             responses={"202": "still running after wait: follow the turn the answer names"}),
    Endpoint("GET", "/api/turns/{turn_id}", "A turn's journal record and verdict (as turn show)", _turn, query={"turn_id": "the turn's id (path)"}),
    Endpoint("GET", "/api/automations/{automation}/timer", "Desired, applied, observed and ACK of the timer, and their diff", _timer, query=_AID),
    Endpoint("POST", "/api/automations/{automation}/timer/desired", "Compute and record the desired timer (or hold)", _timer_desired,
             role=Role.OWNER, query=_AID),
    Endpoint("POST", "/api/automations/{automation}/timer/observe", "Read the host back now and record what it armed", _timer_observe,
             role=Role.OWNER, query=_AID, body=_READ_BODY),
    Endpoint("POST", "/api/automations/{automation}/timer/ack", "ACK on a fresh readback that matches the desired timer", _timer_ack,
             role=Role.OWNER, query=_AID, body=_READ_BODY),
    Endpoint("GET", "/api/missions", "Recent missions with their counters", _missions, query={"automation": "optional", "limit": "at most"}),
    Endpoint("GET", "/api/missions/{mission_id}", "One mission, what is left of its envelope, and its pending asks", _mission,
             query={"mission_id": "the mission's id (path)"}),
    Endpoint("GET", "/api/events", "Recent events and their webhook deliveries", _events, query={"kind": "optional", "limit": "at most"}),
    Endpoint("GET", "/api/webhooks", "Webhooks and their delivery log (owners only: a URL can be a credential)", _webhooks, role=Role.OWNER),
    Endpoint("POST", "/api/webhooks", "Subscribe a URL to events; the answer carries its signing secret, shown only now", _webhook_add,
             role=Role.OWNER, body={"url": ("string", True, "http(s) URL"), "events": ("string", True, "comma-separated event kinds"),
                                    "format": ("string", False, "json (default) or slack")}),
    Endpoint("POST", "/api/webhooks/{webhook_id}/remove", "Unsubscribe a webhook (its undelivered deliveries go with it)", _webhook_remove,
             role=Role.OWNER, query={"webhook_id": "the webhook's id (path)"}),
    Endpoint("POST", "/api/webhooks/{webhook_id}/retry", "Make a webhook's dead deliveries due again", _webhook_retry,
             role=Role.OWNER, query={"webhook_id": "the webhook's id (path)"}),
    Endpoint("GET", "/api/asks", "Pending owner asks with their stored proposals", _asks),
    Endpoint("POST", "/api/asks/{approval_id}/approve", "Approve an ask (single-use), as the authenticated principal", _approve,
             role=Role.OWNER, query={"approval_id": "auth-<id> (path)"}),
    Endpoint("POST", "/api/asks/{approval_id}/deny", "Deny an ask (single-use), as the authenticated principal", _deny,
             role=Role.OWNER, query={"approval_id": "auth-<id> (path)"}),
    Endpoint("GET", "/api/starts", "Start records, newest first", _starts,
             query={"goal": "optional", "agent": "optional", "automation": "optional", "limit": "at most"}),
    Endpoint("GET", "/api/hosts", "Timer hosts' heartbeats and liveness", _hosts),
]  # fmt: skip


def routes(fg: Floorgate, gate: Gatekeeper, work: Workers) -> list[Route]:
    """Starlette routes for ``ENDPOINTS`` (authentication, role, body parsing, typed errors)."""

    def wrap(ep: Endpoint) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> JSONResponse:
            try:
                principal = await work(gate.bearer, request)
                if ep.role is Role.OWNER:
                    require_owner(principal)
                body: Body = {}
                if ep.method in ("POST", "PUT"):
                    raw = await request.body()
                    if raw.strip():
                        body = json_body(raw)
                doc = await work(ep.handler, fg, principal, request, body)
            except Exception as exc:
                return error_response(exc)
            if isinstance(doc, Accepted):
                return JSONResponse(doc.doc, status_code=202)
            if isinstance(doc, api_automations.Created):
                return JSONResponse(doc.doc, status_code=201)
            return JSONResponse(doc)

        return endpoint

    return [Route(ep.path, wrap(ep), methods=[ep.method]) for ep in ENDPOINTS]
