"""Typed JSON errors: every refusal is ``{"error": {"kind", "message", ...}}`` with a status code,
the same kinds as the CLI's ``--json`` errors; an unexpected failure is ``internal`` with no trace."""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from admission import ApprovalRejected, InvalidInput, NotFound, ReductionNotAuthorized, RevisionConflict, StoreUnavailable

from .auth import AuthError

log = logging.getLogger("floorgate.console")


def error_doc(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """The status code and JSON document for ``exc``."""
    extra: dict[str, Any] = {}
    if isinstance(exc, AuthError):
        status, kind = exc.status, exc.kind
    elif isinstance(exc, RevisionConflict):
        status, kind = 409, "revision_conflict"
        extra = {"scope": exc.scope, "expected_revision": exc.expected_revision, "current_revision": exc.current_revision}
    elif isinstance(exc, ReductionNotAuthorized):
        status, kind = 403, "reduction_not_authorized"
        extra = {"scope": exc.scope}
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
    return status, {"error": {"kind": kind, "message": str(exc), **extra}}


def error_response(exc: BaseException) -> JSONResponse:
    """``exc`` as its typed JSON document; a 429 carries ``Retry-After`` (seconds until the lock lifts)."""
    status, doc = error_doc(exc)
    retry = exc.retry_after if isinstance(exc, AuthError) else None
    headers = {"Retry-After": str(retry)} if retry is not None else None
    return JSONResponse(doc, status_code=status, headers=headers)


async def json_error(request: Request, exc: Exception) -> JSONResponse:
    return error_response(exc)
