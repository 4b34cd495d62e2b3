"""Post/redirect/get for the console's forms: every POST is answered with a 303 redirect to a
page, and what the POST did travels in a short-lived cookie that the next page shows once and
clears. Reloading that page shows the page again; it never submits the form again.

The cookie holds only what the server itself wrote (a message, a status, a form's draft); a
browser that edits its own cookie changes only what its own next page says, and templates escape
everything they show.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

FLASH_COOKIE = "floorgate_flash"
FLASH_TTL = 120  # seconds: the redirect is followed at once; a stale message is not worth keeping
MAX_BYTES = 3000  # a cookie holds about 4 KB; drafts beyond this are cut, not the page


def redirect(to: str, *, text: str, failed: bool = False, status: int = 200, secure: bool = False, **extra: Any) -> Response:
    """A 303 to ``to`` carrying one message (and a form's ``extra`` values) for the next page."""
    doc = {"text": text, "failed": failed, "status": status, **extra}
    raw = json.dumps(doc, separators=(",", ":"))
    if len(raw) > MAX_BYTES:
        raw = json.dumps({"text": text[:500], "failed": failed, "status": status}, separators=(",", ":"))
    response = RedirectResponse(to, status_code=303)
    value = base64.urlsafe_b64encode(raw.encode()).decode()
    response.set_cookie(FLASH_COOKIE, value, max_age=FLASH_TTL, path="/", httponly=True, samesite="strict", secure=secure)
    return response


def peek(request: Request) -> dict[str, Any] | None:
    """The message the last POST left for this page, if any (``clear`` it on the response)."""
    value = request.cookies.get(FLASH_COOKIE)
    if not value:
        return None
    try:
        doc = json.loads(base64.urlsafe_b64decode(value.encode()))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("text"), str):
        return None
    return doc


def clear(request: Request, response: Response) -> None:
    """Shown once: the page that showed the message drops the cookie."""
    if FLASH_COOKIE in request.cookies:
        response.delete_cookie(FLASH_COOKIE, path="/")
