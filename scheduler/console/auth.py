"""Who is asking: a bearer token (API) or a signed-in session cookie (pages), and what they may do.

Sessions live in the store (``admission.Sessions``: only a hash of the cookie is kept), so a
restart keeps owners signed in and several ``floorgate serve`` processes on one store share them;
each carries its own CSRF token, checked on every write form.

Failed sign-ins (a bad bearer token on the API or ``/metrics`` counts as one) are counted in this
process's memory (a wrong token is never a store write); when a limit is reached the lock is
written to the store, so every process on it, and a restarted one, refuses the locked sign-ins.
Two thresholds over a 15 min window:

- **the same token** (matched by its SHA-256 fingerprint) failing ``TOKEN_FAILURES`` times is
  refused unchecked (429) until the lock lifts. A scraper or script still holding a revoked or
  mistyped token locks only that token. A good token never fails, so nobody can lock someone
  else's good token this way.
- **many different wrong tokens for one principal name** (the ``<name>`` of ``fgo_<name>.<secret>``)
  from one address (``CLIENT_FAILURES`` distinct fingerprints) is guessing: that name is refused
  from that address, its good token included (answering it would tell a guesser a hit from a
  miss). Other principals, and the same one from other addresses, are unaffected: on loopback
  every local user shares one address, and one guesser must not lock everybody out.

A cross-site request never gets this far (``guard``), so a web page cannot spend anyone's failures.
A lock is never cleared by hand: it lifts by itself when the window has passed (the 429 says when,
and ``Retry-After`` carries the seconds); fix or replace the token meanwhile.
"""

from __future__ import annotations

import functools
import hmac
import math
import threading
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from floorgate.admission import LockReason, Lockout, Principal, Principals, Sessions, token_fingerprint, token_name
from floorgate.admission.clock import Clock, iso, read_clock

SESSION_COOKIE = "floorgate_session"
SESSION_TTL = timedelta(hours=12)
TOKEN_FAILURES = 5  # the same wrong token, within the window: that token is locked
CLIENT_FAILURES = 20  # different wrong tokens for one name from one address, within the window: locked
FAILURE_WINDOW = timedelta(minutes=15)
MAX_TRACKED = 10_000  # tokens and (address, name) pairs remembered; the oldest are forgotten first


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
        self.failures = Failures(self.window, TOKEN_FAILURES, CLIENT_FAILURES)

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
        keys = lock_keys(client, token)
        lock = self.sessions.locked(keys)
        if lock is not None:
            raise _locked(lock, client, token, self.window, read_clock(self.clock))
        principal = self.principals.authenticate(token)
        if principal is None:
            engaged = self.failures.failed(keys, read_clock(self.clock))
            if engaged is not None:
                self.sessions.lock(*engaged)
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


def lock_keys(client: str, token: str) -> tuple[str, str]:
    """The two locks a sign-in of ``token`` from ``client`` answers to: the token's, and its
    principal name's from that address."""
    return f"token:{token_fingerprint(token)}", f"client:{client[:128]}|{token_name(token)}"


class Failures:
    """Failed sign-ins counted in memory (thread-safe, at most ``MAX_TRACKED`` keys of each kind):
    ``failed`` answers the lock to write when a limit is reached."""

    def __init__(self, window: timedelta, per_token: int, per_client: int) -> None:
        self.window, self.per_token, self.per_client = window, per_token, per_client
        self._mutex = threading.Lock()
        self._tokens: OrderedDict[str, deque[datetime]] = OrderedDict()  # token key -> failure times
        self._guesses: OrderedDict[str, dict[str, datetime]] = OrderedDict()  # client key -> token key -> latest

    def failed(self, keys: tuple[str, str], now: datetime) -> tuple[str, Lockout] | None:
        """Count one failure of (token key, client key) at ``now``: the (key, lock) a limit engages, if one does."""
        token_key, client_key = keys
        since = now - self.window
        with self._mutex:
            times = deque((t for t in self._tokens.pop(token_key, ()) if t > since), maxlen=self.per_token)
            times.append(now)
            self._tokens[token_key] = times
            seen = {k: t for k, t in self._guesses.pop(client_key, {}).items() if t > since}
            seen[token_key] = now
            self._guesses[client_key] = seen
            for table in (self._tokens, self._guesses):
                while len(table) > MAX_TRACKED:
                    table.popitem(last=False)
            if len(times) >= self.per_token:
                del self._tokens[token_key]
                return token_key, Lockout(reason=LockReason.TOKEN, limit=self.per_token, until=times[0] + self.window)
            if len(seen) >= self.per_client:
                del self._guesses[client_key]
                until = sorted(seen.values())[-self.per_client] + self.window
                return client_key, Lockout(reason=LockReason.CLIENT, limit=self.per_client, until=until)
        return None


def _locked(lock: Lockout, client: str, token: str, window: timedelta, now: datetime) -> AuthError:
    minutes = int(window.total_seconds() // 60)
    wait = max(1, math.ceil((lock.until - now).total_seconds()))
    if lock.reason is LockReason.TOKEN:
        why = (
            f"this token failed {lock.limit} times within {minutes} min and is refused until {iso(lock.until)}; "
            "other tokens still work (a revoked or mistyped token: use a current one)"
        )
    else:
        name = token_name(token) or "(malformed tokens)"
        why = (
            f"{lock.limit} different wrong tokens for {name} from {client} within {minutes} min: sign-ins as {name} from it "
            f"are refused until {iso(lock.until)}; other principals still sign in"
        )
    return AuthError(429, "rate_limited", why, retry_after=wait)


def signed_in_page(
    handler: Callable[[Any, Request, Principal], Awaitable[Response]],
) -> Callable[[Any, Request], Awaitable[Response]]:
    """A page handler of a console part (whose ``pages`` is the console's ``Pages``) for signed-in
    principals only: anyone else is sent to sign in (303 to ``/signin``); ``handler`` is given the
    principal."""

    @functools.wraps(handler)
    async def page(part: Any, request: Request) -> Response:
        principal = await part.pages.signed_in(request)
        if principal is None:
            return RedirectResponse("/signin", status_code=303)
        return await handler(part, request, principal)

    return page


def require_owner(principal: Principal) -> Principal:
    """Refuse (403) a principal that may not write."""
    if not principal.can_write:
        raise AuthError(403, "forbidden", f"{principal.name} is a {principal.role.value}; writes and approvals need an owner")
    return principal


def _client(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


client_of = _client
