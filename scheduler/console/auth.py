"""Who is asking: a bearer token (API) or a signed-in session cookie (pages), and what they may do.

Sessions live in the store (``admission.Sessions``: only a hash of the cookie is kept), so a
restart keeps owners signed in and several ``floorgate serve`` processes on one store share them;
each carries its own CSRF token, checked on every write form.

Failed sign-ins (a bad bearer token on the API or ``/metrics`` counts as one) are counted in the
store too, so every process applies one limit, with two thresholds over a 15 min window:

- **the same token** (matched by its SHA-256 fingerprint) failing ``TOKEN_FAILURES`` times is
  refused unchecked (429) until its failures leave the window. A scraper or script still holding a
  revoked or mistyped token locks only that token: on loopback every local user shares one client
  address, and one stale token must not lock out everyone else's good ones. A good token never
  fails, so nobody can lock someone else's good token this way.
- **many different wrong tokens** from one address (``CLIENT_FAILURES`` distinct fingerprints) is
  guessing: the address is refused unchecked, good tokens included (answering them would tell a
  guesser a hit from a miss). The repeats of one token count once here, and the threshold is well
  above what typos at the sign-in form reach.

A lock is never cleared by hand: it lifts by itself when the window has passed (the 429 says when,
and ``Retry-After`` carries the seconds); fix or replace the token meanwhile.
"""

from __future__ import annotations

import hmac
import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from starlette.requests import Request

from admission import LockReason, Lockout, Principal, Principals, Sessions
from admission.clock import Clock, iso, read_clock

SESSION_COOKIE = "floorgate_session"
SESSION_TTL = timedelta(hours=12)
TOKEN_FAILURES = 5  # the same wrong token, within the window: that token is locked
CLIENT_FAILURES = 20  # different wrong tokens from one address, within the window: the address is locked
FAILURE_WINDOW = timedelta(minutes=15)


class AuthError(Exception):
    """Not signed in (401), not allowed (403), too many failed sign-ins (429) or a bad CSRF token (403)."""

    def __init__(self, status: int, kind: str, message: str, *, retry_after: int | None = None) -> None:
        self.status = status
        self.kind = kind
        self.retry_after = retry_after  # seconds, for a 429's Retry-After header
        super().__init__(message)


@dataclass(frozen=True)
class Session:
    """A signed-in principal's session: its name, CSRF token and expiry."""

    session_id: str
    principal: str
    csrf: str
    expires_at: datetime


class Gatekeeper:
    """Authenticates requests; sessions and the failed sign-in count live in the store."""

    def __init__(self, principals: Principals, clock: Clock) -> None:
        self.principals = principals
        self.clock = clock
        self.sessions = Sessions(principals.store, clock)
        self.window = FAILURE_WINDOW

    # -- sign-in -----------------------------------------------------------------------------
    def sign_in(self, token: str, client: str) -> Session:
        """A new session for the principal ``token`` belongs to (401 and one failure counted if none)."""
        principal = self._token(token, client)
        session_id, signed = self.sessions.open(principal.name, SESSION_TTL)
        return Session(session_id, signed.principal, signed.csrf, signed.expires_at)

    def sign_out(self, session_id: str | None) -> None:
        if session_id:
            self.sessions.close(session_id)

    def _token(self, token: str, client: str) -> Principal:
        lock = self.sessions.lockout(client, token, window=self.window, per_token=TOKEN_FAILURES, per_client=CLIENT_FAILURES)
        if lock is not None:
            raise _locked(lock, client, self.window, read_clock(self.clock))
        principal = self.principals.authenticate(token)
        if principal is None:
            self.sessions.failed(client, token, self.window)
            raise AuthError(401, "unauthenticated", "the token is unknown, wrong or revoked")
        return principal

    # -- per request -------------------------------------------------------------------------
    def session(self, request: Request) -> Session | None:
        """The request's live session, if its cookie names one."""
        sid = request.cookies.get(SESSION_COOKIE)
        if not sid:
            return None
        signed = self.sessions.get(sid)
        return Session(sid, signed.principal, signed.csrf, signed.expires_at) if signed is not None else None

    def bearer(self, request: Request) -> Principal:
        """The principal of an ``Authorization: Bearer`` header (401 without a valid one)."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthError(401, "unauthenticated", "send Authorization: Bearer <token> (floorgate owner add NAME prints one)")
        return self._token(token.strip(), _client(request))

    def page_principal(self, request: Request) -> Principal | None:
        """The signed-in principal of a page request, re-read so a revoked one is signed out."""
        session = self.session(request)
        if session is None:
            return None
        principal = self.principals.authenticate_name(session.principal)
        if principal is None:
            self.sign_out(session.session_id)
        return principal

    def check_csrf(self, request: Request, form_token: object) -> Session:
        """The session of a write form whose CSRF token matches it (403 otherwise)."""
        session = self.session(request)
        if session is None:
            raise AuthError(401, "unauthenticated", "sign in first")
        if not isinstance(form_token, str) or not hmac.compare_digest(form_token.encode(), session.csrf.encode()):
            raise AuthError(403, "csrf_failed", "the form's CSRF token is missing or wrong; reload the page and try again")
        return session


def _locked(lock: Lockout, client: str, window: timedelta, now: datetime) -> AuthError:
    minutes = int(window.total_seconds() // 60)
    wait = max(1, math.ceil((lock.until - now).total_seconds()))
    if lock.reason is LockReason.TOKEN:
        why = (
            f"this token failed {lock.limit} times within {minutes} min and is refused until {iso(lock.until)}; "
            "other tokens still work (a revoked or mistyped token: use a current one)"
        )
    else:
        why = (
            f"{lock.limit} different wrong tokens from {client} within {minutes} min: every sign-in from it is refused "
            f"until {iso(lock.until)}"
        )
    return AuthError(429, "rate_limited", why, retry_after=wait)


def require_owner(principal: Principal) -> Principal:
    """Refuse (403) a principal that may not write."""
    if not principal.can_write:
        raise AuthError(403, "forbidden", f"{principal.name} is a {principal.role.value}; writes and approvals need an owner")
    return principal


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


client_of = _client
