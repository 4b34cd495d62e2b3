"""Typed JSON errors: every refusal is ``{"error": {"kind", "message", ...}}`` with a status code,
the same kinds as the CLI's ``--json`` errors; an unexpected failure is ``internal`` with no trace.

The typed error carries the data (revisions, the refused reduction's preview); the message names
the fix for the surface it is shown on: the API's fields (``revision``, ``authorize_reduction``)
or the page's controls (Refresh, the authorization tick box), never the CLI's flags.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from floorgate.admission import (
    ApprovalRejected,
    AutomationConflict,
    InvalidInput,
    NotFound,
    ReductionNotAuthorized,
    RevisionConflict,
    StoreUnavailable,
)

from ..app.floors import ReductionNotShown
from .auth import AuthError

log = logging.getLogger("floorgate.console")


class Surface(StrEnum):
    """Where an error is shown, so its message names that surface's fix."""

    API = "api"
    PAGE = "page"


def fix_message(exc: BaseException, surface: Surface) -> str:
    """``exc``'s message, worded for ``surface`` when the CLI's wording would not fit."""
    if isinstance(exc, AutomationConflict) and surface is Surface.API:
        return (
            f"automation {exc.scope} changed since you read it: you sent revision {exc.expected_revision}, it is at revision "
            f"{exc.current_revision}; read it again (GET /api/automations/{exc.scope}), then send revision {exc.current_revision}"
        )
    if isinstance(exc, RevisionConflict):
        if surface is Surface.PAGE:
            return f"{exc.scope} changed since you read it (now revision {exc.current_revision}): refresh, then decide again"
        return (
            f"{exc.scope} changed since you read it: you sent revision {exc.expected_revision}, it is at revision "
            f"{exc.current_revision}; read it again (GET /api/policy?scope={exc.scope}), then send revision {exc.current_revision}"
        )
    if isinstance(exc, ReductionNotShown):
        what = f"{'; '.join(exc.change.reduction_what)} on {exc.scope} is a reduction"
        if surface is Surface.PAGE:
            return f'{what}: tick "I authorize this reduction" and Save again'
        return f"{what}: send authorize_reduction set to the reduction_key of the preview at this revision ({exc.change.reduction_key})"
    return str(exc)


def error_doc(exc: BaseException, surface: Surface = Surface.API) -> tuple[int, dict[str, Any]]:
    """The status code and JSON document for ``exc`` (its message worded for ``surface``)."""
    extra: dict[str, Any] = {}
    if isinstance(exc, AuthError):
        status, kind = exc.status, exc.kind
    elif isinstance(exc, RevisionConflict):
        status, kind = 409, "revision_conflict"
        extra = {"scope": exc.scope, "expected_revision": exc.expected_revision, "current_revision": exc.current_revision}
    elif isinstance(exc, ReductionNotAuthorized):
        status, kind = 403, "reduction_not_authorized"
        extra = {"scope": exc.scope}
        if isinstance(exc, ReductionNotShown):
            extra |= {
                "revision": exc.change.revision,
                "reduction_what": exc.change.reduction_what,
                "reduction_key": exc.change.reduction_key,
            }
    elif isinstance(exc, ApprovalRejected):
        status, kind = 409, "approval_rejected"
    elif isinstance(exc, InvalidInput):
        status, kind = 422, "invalid_input"
        extra = {"field": exc.field}
    elif isinstance(exc, NotFound):
        status, kind = 404, "not_found"
    elif isinstance(exc, StoreUnavailable):
        status, kind = 503, "store_unavailable"
    else:
        log.exception("unexpected error in the console", exc_info=exc)
        return 500, {"error": {"kind": "internal", "message": "unexpected server error; the server log has the details"}}
    return status, {"error": {"kind": kind, "message": fix_message(exc, surface), **extra}}


def error_response(exc: BaseException) -> JSONResponse:
    """``exc`` as its typed JSON document; a 429 carries ``Retry-After`` (seconds until the lock lifts)."""
    status, doc = error_doc(exc)
    retry = exc.retry_after if isinstance(exc, AuthError) else None
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return JSONResponse(doc, status_code=status, headers=headers)


async def json_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(exc)
