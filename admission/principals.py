"""Owners as principals: named tokens with a role, for the owner console.

A token is shown once, when the principal is added; the store keeps only its SHA-256 hash, and a
presented token is checked with a constant-time compare. The token names its principal
(``fgo_<name>.<secret>``) so checking it reads one row and compares one hash.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import delete, insert, select, update

from . import _schema as s
from ._repository import Repository
from ._types import Frozen, stored
from .clock import read_clock
from .errors import InvalidInput, NotFound
from .policies import check_owner_ref
from .scope import check_key

TOKEN_PREFIX = "fgo_"


class Role(StrEnum):
    """What a principal may do: ``owner`` writes and decides asks; ``viewer`` only reads."""

    OWNER = "owner"
    VIEWER = "viewer"


def _check_role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        raise InvalidInput("role", f"{role!r} is not a role; use owner or viewer") from None


class Principal(Frozen):
    """A named owner or viewer of the console."""

    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None
    zone: str | None = None  # the IANA zone the console shows this principal times in (None: UTC)

    @property
    def can_write(self) -> bool:
        return self.role is Role.OWNER and self.revoked_at is None


def check_zone(zone: str) -> str:
    """``zone`` when it names an IANA time zone this machine knows, else one line naming the fix."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        check_key(zone, "zone", max_len=64)
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, InvalidInput):
        raise InvalidInput("zone", f"{zone[:64]!r} is not an IANA time zone; use a name like Europe/Berlin or UTC") from None
    return zone


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def _missing(name: str) -> NotFound:
    return NotFound(f"principal {name!r} does not exist (see 'floorgate owner list')")


def _principal(row) -> Principal:  # type: ignore[no-untyped-def]
    with stored(f"principal {row.name!r}"):
        return Principal(name=row.name, role=Role(row.role), created_at=row.created_at_us, revoked_at=row.revoked_at_us, zone=row.zone)


class Principals(Repository):
    """Add, list, revoke and authenticate console principals."""

    def add(self, name: str, role: Role | str) -> tuple[Principal, str]:
        """Store a new principal and return it with its token (shown once; only its hash is kept)."""
        check_owner_ref(name)
        if "." in name:
            raise InvalidInput("name", f"{name!r}: a principal's name cannot contain '.' (it separates the token's parts)")
        role = _check_role(role)
        secret = secrets.token_urlsafe(32)
        now = read_clock(self.clock)
        p = s.principals
        with self.store.write(lock_key=f"principal:{name}") as conn:
            if conn.execute(select(p.c.name).where(p.c.name == name)).first() is not None:
                raise InvalidInput("name", f"principal {name!r} exists; pick another name (or revoke it first)")
            conn.execute(insert(p).values(name=name, role=role.value, token_sha256=_hash(secret), created_at_us=now, revoked_at_us=None))
        return Principal(name=name, role=role, created_at=now, revoked_at=None), f"{TOKEN_PREFIX}{name}.{secret}"

    def revoke(self, name: str) -> Principal:
        """Revoke a principal's token and sign its console sessions out: it authenticates nothing from now on."""
        check_key(name, "name", max_len=64)
        p = s.principals
        with self.store.write(lock_key=f"principal:{name}") as conn:
            done = conn.execute(update(p).where(p.c.name == name, p.c.revoked_at_us.is_(None)).values(revoked_at_us=read_clock(self.clock)))
            if done.rowcount != 1 and conn.execute(select(p.c.name).where(p.c.name == name)).first() is None:
                raise _missing(name)
            conn.execute(delete(s.sessions).where(s.sessions.c.principal == name))  # signed out everywhere, at once
        return self.get(name)

    def set_zone(self, name: str, zone: str | None) -> Principal:
        """Remember the IANA zone the console shows ``name`` times in (None: back to UTC)."""
        check_key(name, "name", max_len=64)
        if zone is not None:
            check_zone(zone)
        p = s.principals
        with self.store.write(lock_key=f"principal:{name}") as conn:
            if conn.execute(update(p).where(p.c.name == name).values(zone=zone)).rowcount != 1:
                raise _missing(name)
        return self.get(name)

    def get(self, name: str) -> Principal:
        """The principal ``name``, revoked or not; ``NotFound`` when there is none."""
        row = self._row(check_key(name, "name", max_len=64))
        if row is None:
            raise _missing(name)
        return _principal(row)

    def _row(self, name: str) -> Any:
        p = s.principals
        return self._read_first(select(p).where(p.c.name == name))

    def list(self) -> list[Principal]:
        p = s.principals
        with self.store.read() as conn:
            return [_principal(row) for row in conn.execute(select(p).order_by(p.c.name))]

    def authenticate_name(self, name: str) -> Principal | None:
        """The principal ``name`` while it is not revoked (a session re-checks its principal with it)."""
        try:
            principal = self.get(name)
        except NotFound:
            return None
        return principal if principal.revoked_at is None else None

    def authenticate(self, token: object) -> Principal | None:
        """The live principal ``token`` belongs to, or None (malformed, unknown, wrong or revoked)."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX) or len(token) > 300 or "." not in token:
            return None
        name, _, secret = token[len(TOKEN_PREFIX) :].partition(".")
        row = self._row(name)
        # Compare a hash even for an unknown name, so the answer takes the same work either way.
        stored = row.token_sha256 if row is not None else _hash("")
        matches = hmac.compare_digest(stored.encode("ascii"), _hash(secret).encode("ascii"))
        if row is None or not matches or row.revoked_at_us is not None:
            return None
        return _principal(row)


class SignedIn(Frozen):
    """A console session as stored: whose it is, its CSRF token and when it expires."""

    principal: str
    csrf: str
    expires_at: datetime


class Sessions(Repository):
    """Console sessions and failed sign-ins, in the store: a restart keeps everyone signed in, and
    several ``floorgate serve`` processes on one store share sessions and one rate limit.

    Only a session id's SHA-256 hash is stored (the cookie is the id). Failed sign-ins are counted
    by each console process in memory; only a lock, once a limit is reached, is a row here.
    """

    def open(self, principal: str, ttl: timedelta) -> tuple[str, SignedIn]:
        """A new session for ``principal`` (expired ones are swept); returns its id, shown only now."""
        session_id = secrets.token_urlsafe(32)
        now = read_clock(self.clock)
        signed = SignedIn(principal=principal, csrf=secrets.token_urlsafe(32), expires_at=now + ttl)
        t = s.sessions
        with self.store.write(lock_key="sessions") as conn:
            conn.execute(delete(t).where(t.c.expires_at_us <= now))
            conn.execute(
                insert(t).values(
                    session_sha256=_hash(session_id),
                    principal=principal,
                    csrf=signed.csrf,
                    created_at_us=now,
                    expires_at_us=signed.expires_at,
                )
            )
        return session_id, signed

    def get(self, session_id: str) -> SignedIn | None:
        """The live session ``session_id`` names, or None (unknown, expired or closed)."""
        if not session_id or len(session_id) > 200:
            return None
        t = s.sessions
        row = self._read_first(select(t).where(t.c.session_sha256 == _hash(session_id)))
        if row is None or row.expires_at_us <= read_clock(self.clock):
            return None
        return SignedIn(principal=row.principal, csrf=row.csrf, expires_at=row.expires_at_us)

    def close(self, session_id: str) -> None:
        """Sign a session out (nothing happens for an unknown one)."""
        t = s.sessions
        with self.store.write(lock_key="sessions") as conn:
            conn.execute(delete(t).where(t.c.session_sha256 == _hash(session_id)))

    def locked(self, keys: Sequence[str]) -> Lockout | None:
        """The engaged lock among ``keys`` that lifts last, or None (nothing refuses them now)."""
        t = s.signin_locks
        now = read_clock(self.clock)
        with self.store.read() as conn:
            row = conn.execute(
                select(t).where(t.c.lock_key.in_([k[:200] for k in keys]), t.c.until_us > now).order_by(t.c.until_us.desc()).limit(1)
            ).first()
        if row is None:
            return None
        with stored(f"sign-in lock {row.lock_key!r}"):
            return Lockout(reason=LockReason(row.reason), limit=row.failures, until=row.until_us)

    def lock(self, key: str, lockout: Lockout) -> None:
        """Engage ``lockout`` on ``key`` for every process on the store (expired locks are swept)."""
        t = s.signin_locks
        now = read_clock(self.clock)
        with self.store.write(lock_key="signin-locks") as conn:
            conn.execute(delete(t).where((t.c.until_us <= now) | (t.c.lock_key == key[:200])))
            conn.execute(insert(t).values(lock_key=key[:200], reason=lockout.reason.value, failures=lockout.limit, until_us=lockout.until))


class LockReason(StrEnum):
    """Why a sign-in is refused unchecked: this token kept failing, or this address tried many tokens."""

    TOKEN = "token"
    CLIENT = "client"


class Lockout(Frozen):
    """A refused sign-in: which limit (``limit`` failures within the window) and when it lifts."""

    reason: LockReason
    limit: int
    until: datetime


def token_fingerprint(token: str) -> str:
    """The SHA-256 of a presented token (its first 1000 characters): how a failed one is remembered."""
    return _hash(token[:1000])


def token_name(token: str) -> str:
    """The principal name a token claims (``fgo_<name>.<secret>``), or "" for a malformed one."""
    if not token.startswith(TOKEN_PREFIX):
        return ""
    name, dot, _ = token[len(TOKEN_PREFIX) :].partition(".")
    return name[:64] if dot else ""
