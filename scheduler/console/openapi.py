"""The OpenAPI document of the console's JSON API, built from the endpoint table (never by hand)."""

from __future__ import annotations

import re
from typing import Any

from .api import ENDPOINTS

_ERROR = {"$ref": "#/components/schemas/Error"}
_ERRORS = {
    "401": "not signed in (kind unauthenticated)",
    "403": "not allowed (forbidden, reduction_not_authorized)",
    "404": "unknown id (not_found)",
    "409": "revision_conflict (with current_revision) or approval_rejected",
    "422": "invalid_input (with field)",
    "429": "this token, or this address, failed too many sign-ins (rate_limited; Retry-After)",
    "503": "store_unavailable",
}


def openapi(version: str) -> dict[str, Any]:
    """OpenAPI 3.1 for ``ENDPOINTS``."""
    paths: dict[str, Any] = {}
    for ep in ENDPOINTS:
        in_path = set(re.findall(r"{(\w+)}", ep.path))
        op: dict[str, Any] = {
            "summary": ep.summary,
            "security": [{"bearer": []}],
            "x-floorgate-role": ep.role.value,
            "parameters": [
                {
                    "name": n,
                    "in": "path" if n in in_path else "query",
                    "required": n in in_path,
                    "description": d,
                    "schema": {"type": "string"},
                }
                for n, d in ep.query.items()
            ],
            "responses": {
                "200": {
                    "description": "the document, as the CLI's --json prints it",
                    "content": {"application/json": {"schema": {"type": "object"}}},
                },
                **{code: {"description": d} for code, d in ep.responses.items()},
                **{code: {"description": d, "content": {"application/json": {"schema": _ERROR}}} for code, d in _ERRORS.items()},
            },
        }
        if ep.body:
            op["requestBody"] = {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "type": "object",
                            "properties": {n: {"type": t, "description": d} for n, (t, _req, d) in ep.body.items()},
                            "required": [n for n, (_t, req, _d) in ep.body.items() if req],
                        }
                    }
                },
            }
        paths.setdefault(ep.path, {})[ep.method.lower()] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": "floorgate owner console", "version": version},
        "paths": paths,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "a token from 'floorgate owner add NAME'"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "properties": {
                        "error": {
                            "type": "object",
                            "properties": {
                                "kind": {"type": "string"},
                                "message": {"type": "string"},
                                "field": {"type": "string"},
                                "current_revision": {"type": "integer"},
                            },
                            "required": ["kind", "message"],
                        }
                    },
                }
            },
        },
    }
