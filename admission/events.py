"""Events and their webhook deliveries: an outbox in the store.

An event is a past-tense record (``ask_pending``, ``floor_changed``, ...) with an id and a UTC
time, written by ``record`` on the connection of the change it describes, so it commits with that
change or not at all. ``record`` fans the event out, in the same transaction, to one delivery row
per webhook subscribed to its kind; delivering (``scheduler.notify``) happens later, outside any
admission transaction: claim what is due, POST it, record the attempt. Delivery is at least once;
the event id is the receiver's deduplication key. A failed attempt stays in the log with its
status and is retried with backoff; after ``MAX_ATTEMPTS`` failed attempts the delivery is
``dead``: kept, counted and listed (``floorgate notify list``, the console), never retried on its
own and never silently dropped.

Events that are observed rather than caused by a write (``host_lost``: a heartbeat gone stale;
``timer_drift``: a host's live timer read back different from the applied one) are written by
``Events.note`` under a key naming the occurrence, once however many observers see it.

The body is signed with HMAC-SHA256 under the webhook's secret (``signature``), which is shown
once when the webhook is added. The secret is stored as given, not hashed: signing needs it. It
lives in the same store as every floor and turn, which floorgate creates owner-only (0600) on
SQLite; PostgreSQL keeps it behind the database's own access control. It is never printed again.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import ipaddress
import json
import re
import secrets
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy import and_, delete, func, insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection

from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row, stored
from .clock import iso, read_clock
from .errors import InvalidInput, NotFound
from .scope import check_limit

SIGNATURE_HEADER = "X-Floorgate-Signature"
EVENT_ID_HEADER = "X-Floorgate-Event-Id"
EVENT_KIND_HEADER = "X-Floorgate-Event"
# Retry backoff: the first retry after BACKOFF_BASE, doubling each attempt, capped at BACKOFF_MAX.
BACKOFF_BASE = timedelta(seconds=30)
BACKOFF_MAX = timedelta(hours=1)
# How long a claimed delivery is reserved for the deliverer that claimed it (another host waits).
CLAIM_LEASE = timedelta(minutes=2)
# After this many failed attempts a delivery is dead (about 7 h of backoff): kept and shown.
MAX_ATTEMPTS = 12


class EventKind(StrEnum):
    """What happened (past tense)."""

    ASK_PENDING = "ask_pending"  # an ask was filed and waits for its owner
    ASK_DECIDED = "ask_decided"  # an ask was approved, denied or found expired
    AUTOMATION_HELD = "automation_held"  # an automation was held (e.g. its mission got stuck)
    FLOOR_CHANGED = "floor_changed"  # a rule was written at a scope: its floor, limits or compute block (its data: which)
    MISSION_STUCK = "mission_stuck"  # a mission settled stuck (an envelope bound, a denied ask, a failure)
    LATCH_SET = "latch_set"  # a mission's accounting latch was set: new dispatch is blocked in enforce
    TIMER_DRIFT = "timer_drift"  # a host's live timer was read back different from the applied one
    TIMER_ORPHANED = "timer_orphaned"  # an automation was removed but its host could not confirm removing its timer
    HOST_LOST = "host_lost"  # a timer host's heartbeat went stale without a clean stop
    OWNER_WRITE_REFUSED = "owner_write_refused"  # a managed turn tried an owner write (floor, ask, ...): refused
    TURN_FAILED = "turn_failed"  # a managed turn settled failed (its task or the infrastructure)
    TURN_TIMED_OUT = "turn_timed_out"  # a managed turn was stopped at its timeout
    AUTOMATION_TRIGGERED = "automation_triggered"  # new work arrived for an automation (a trigger, once per trigger id)
    AUTOMATION_FAILING = "automation_failing"  # a second consecutive turn failed: its starts slow down (once per streak)
    # Written by the admission that crossed them, in its transaction, at most once per window and scope:
    BUDGET_THRESHOLD = "budget_threshold"  # a budget's use (settled + held) crossed an owner-set percentage
    BUDGET_EXHAUSTED = "budget_exhausted"  # an admitted start spent a count or budget: the next start in its window is denied
    BOUND_OVERSHOT = "bound_overshot"  # a turn succeeded but its reported usage went over an envelope bound


class WebhookFormat(StrEnum):
    """What a webhook is POSTed: the signed event document, or a Slack-compatible message."""

    JSON = "json"  # the event document (``Event.body``)
    SLACK = "slack"  # {"text": "..."} for a Slack (or Mattermost, Rocket.Chat) incoming webhook


class DeliveryState(StrEnum):
    PENDING = "pending"  # not yet delivered: never tried, or the last attempt failed (see attempts)
    DELIVERED = "delivered"  # the receiver answered 2xx
    DEAD = "dead"  # MAX_ATTEMPTS attempts failed: no more retries; kept in the log and counted


class DeliveryFailure(StrEnum):
    """Why an attempt failed, as recorded in the delivery log: a category, never the socket's own
    error text (which would tell a closed port, an open one and an HTTP server apart)."""

    INVALID_URL = "invalid_url"  # the stored URL is not one ``check_url`` accepts
    ADDRESS_DENIED = "address_denied"  # every resolved address is outside the deployment's allowed ranges
    CONNECT_FAILED = "connect_failed"  # no name resolution or no connection
    TIMEOUT = "timeout"  # the whole attempt (connect, send, response head) outlived its deadline
    TLS_ERROR = "tls_error"  # the TLS handshake or the certificate failed
    BAD_RESPONSE = "bad_response"  # closed early, a malformed status line, or an oversized head
    REDIRECT_REFUSED = "redirect_refused"  # a 3xx: never followed (the error names the Location)
    HTTP_STATUS = "http_status"  # any other non-2xx answer (recorded as ``http_status_<code>``)
    INTERNAL_ERROR = "internal_error"  # the deliverer itself failed on this delivery


def failure_text(failure: DeliveryFailure, status: int | None = None, location: str | None = None) -> str:
    """The recorded error: the category (``http_status_503`` for a status), and for a redirect the
    Location it pointed at, reduced to printable ASCII and truncated."""
    if failure is DeliveryFailure.HTTP_STATUS and status is not None:
        return f"{failure.value}_{status}"
    if failure is DeliveryFailure.REDIRECT_REFUSED:
        shown = "".join(c for c in location or "" if "!" <= c <= "~")
        return f"{failure.value} (Location: {shown[:200] + ('...' if len(shown) > 200 else '') if shown else 'none'})"
    return failure.value


class Event(Frozen):
    event_id: str
    kind: EventKind
    subject: str
    data: dict[str, Any]
    occurred_at: datetime

    def body(self) -> bytes:
        """The JSON document POSTed to webhooks (the bytes the signature covers)."""
        doc = {
            "id": self.event_id,
            "kind": self.kind.value,
            "subject": self.subject,
            "occurred_at": iso(self.occurred_at),
            "data": self.data,
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("utf-8")

    def text(self) -> str:
        """One line for a person: what happened, to what, when, and its id."""
        details = ", ".join(
            f"{k}={v}" for k, v in sorted(self.data.items()) if isinstance(v, str | int | float) and not isinstance(v, bool)
        )
        return (
            f"floorgate {self.kind.value}: {self.subject}"
            + (f" ({details})" if details else "")
            + f" at {iso(self.occurred_at)} [{self.event_id}]"
        )

    def payload(self, fmt: WebhookFormat) -> bytes:
        """The bytes POSTed in ``fmt`` (the signature covers exactly these)."""
        if fmt is WebhookFormat.SLACK:
            return json.dumps({"text": self.text()}, separators=(",", ":")).encode("utf-8")
        return self.body()


class Webhook(Frozen):
    webhook_id: str
    url: str
    events: tuple[EventKind, ...]
    created_at: datetime
    format: WebhookFormat = WebhookFormat.JSON
    pending: int = 0
    delivered: int = 0
    dead: int = 0  # deliveries given up after MAX_ATTEMPTS failed attempts
    failing: int = 0  # pending deliveries whose last attempt failed
    last_status: int | None = None
    last_error: str | None = None
    last_attempt_at: datetime | None = None


class Delivery(Frozen):
    webhook_id: str
    event_id: str
    state: DeliveryState
    attempts: int
    last_status: int | None
    last_error: str | None
    last_attempt_at: datetime | None
    next_attempt_at: datetime
    delivered_at: datetime | None


class Due(Frozen):
    """A claimed delivery: what to POST where, signed with which secret."""

    webhook_id: str
    url: str
    secret: str
    event: Event
    attempts: int
    format: WebhookFormat = WebhookFormat.JSON


def signature(secret: str, body: bytes) -> str:
    """The signature header's value: ``sha256=`` and the hex HMAC-SHA256 of ``body``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def verify(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is the signature of ``body`` under ``secret`` (constant-time compare)."""
    return header is not None and hmac.compare_digest(signature(secret, body), header)


def backoff(attempts: int) -> timedelta:
    """The wait before the next attempt after ``attempts`` failed ones."""
    wait: timedelta = BACKOFF_BASE * (2 ** max(0, min(attempts - 1, 20)))
    return min(BACKOFF_MAX, wait)


def record(conn: Connection, kind: EventKind, subject: str, data: dict[str, Any], at: datetime, *, dedup_key: str | None = None) -> str:
    """Write an event on ``conn`` (the open transaction of the change it describes) and one pending
    delivery per webhook subscribed to ``kind``; returns the event id."""
    kind = EventKind(kind)
    event_id, values = _event_row(kind, subject, data, at, dedup_key)
    conn.execute(insert(s.events).values(**values))
    _fan_out(conn, kind, event_id, at)
    return event_id


def record_once(conn: Connection, kind: EventKind, subject: str, data: dict[str, Any], at: datetime, *, key: str) -> str | None:
    """``record`` an event on ``conn`` unless one under ``key`` exists: the insert-if-absent is
    one statement on the unique key, so a retry or another host in a racing transaction never
    writes a second one (nor aborts its own transaction). Returns the new id, or None."""
    kind = EventKind(kind)
    if not key or len(key) > 200:
        raise InvalidInput("key", "an event key is 1..200 characters")
    event_id, values = _event_row(kind, subject, data, at, key)
    dialect = pg_insert if conn.dialect.name == "postgresql" else sqlite_insert
    statement = dialect(s.events).values(**values).on_conflict_do_nothing(index_elements=["dedup_key"])
    if conn.execute(statement.returning(s.events.c.event_id)).first() is None:
        return None
    _fan_out(conn, kind, event_id, at)
    return event_id


def _event_row(kind: EventKind, subject: str, data: dict[str, Any], at: datetime, dedup_key: str | None) -> tuple[str, dict[str, Any]]:
    """A new event's id (minted here) and its columns."""
    event_id = "evt-" + secrets.token_urlsafe(18)
    return event_id, dict(
        event_id=event_id,
        kind=kind.value,
        subject=subject,
        data_json=json.dumps(data, sort_keys=True),
        occurred_at_us=at,
        dedup_key=dedup_key,
    )


def _fan_out(conn: Connection, kind: EventKind, event_id: str, at: datetime) -> None:
    """One pending delivery of ``event_id`` per webhook subscribed to ``kind``."""
    w = s.webhooks
    for webhook_id, events in conn.execute(select(w.c.webhook_id, w.c.events)).all():
        if kind.value in events.split(","):
            conn.execute(
                insert(s.deliveries).values(
                    webhook_id=webhook_id, event_id=event_id, state=DeliveryState.PENDING.value, attempts=0, next_attempt_at_us=at
                )
            )


def _event(row) -> Event:  # type: ignore[no-untyped-def]
    with stored(f"event {row.event_id!r}"):
        return Event(
            event_id=row.event_id,
            kind=EventKind(row.kind),
            subject=row.subject,
            data=json.loads(row.data_json),
            occurred_at=row.occurred_at_us,
        )


def parse_kinds(text: str | builtins.list[str] | tuple[str, ...]) -> tuple[EventKind, ...]:
    """Event kinds from ``a,b`` (or a list); refuses an unknown or empty set, naming the field."""
    parts = [p.strip() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    if not parts:
        raise InvalidInput("events", "name at least one event kind: " + ", ".join(k.value for k in EventKind))
    kinds: builtins.list[EventKind] = []
    for part in parts:
        try:
            kind = EventKind(part)
        except ValueError:
            raise InvalidInput("events", f"{part!r} is not an event kind; use {', '.join(k.value for k in EventKind)}") from None
        if kind not in kinds:
            kinds.append(kind)
    return tuple(kinds)


_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62})(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,62}))*\.?")


def check_url(url: object) -> str:
    """``url`` if it is a webhook URL floorgate will POST to, else ``InvalidInput`` naming ``url``:
    http or https, a host name or IP address, a port in 1..65535 if given, no user info, printable
    ASCII without spaces."""
    if not isinstance(url, str) or not url or len(url) > 2000:
        raise InvalidInput("url", "give an http:// or https:// URL of at most 2000 characters")
    if not url.isascii() or any(not " " < c < "\x7f" for c in url):
        raise InvalidInput("url", f"{url!r} has a space, a control or a non-ASCII character; percent-encode it (punycode for a host)")
    try:
        parts = urlsplit(url)
        hostname, port = parts.hostname, parts.port
    except ValueError:
        what = "a malformed [IPv6] host" if "[" in url else "a port that is not a number in 1..65535"
        raise InvalidInput("url", f"{url!r} has {what}") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidInput("url", f"{url!r} is not an http:// or https:// URL")
    if "@" in parts.netloc:
        raise InvalidInput("url", f"{url!r} carries user info (user:password@); give the receiver's URL without it")
    if not hostname:
        raise InvalidInput("url", f"{url!r} names no host")
    if parts.netloc.startswith("["):
        try:
            ipaddress.IPv6Address(hostname)
        except ValueError:
            raise InvalidInput("url", f"{url!r} has a malformed [IPv6] host") from None
    elif not _HOST_NAME.fullmatch(hostname) or len(hostname) > 253:
        raise InvalidInput("url", f"{url!r} has a malformed host name")
    if port is not None and not 1 <= port <= 65535:
        raise InvalidInput("url", f"{url!r} has a port that is not a number in 1..65535")
    return url


class Events(Repository):
    """The event outbox and its webhook subscriptions and deliveries."""

    # -- events ----------------------------------------------------------------------------------
    def list(self, kind: EventKind | None = None, limit: int = 100) -> builtins.list[Event]:
        """The most recent events, oldest first."""
        e = s.events
        query = select(e).order_by(e.c.seq.desc()).limit(check_limit(limit))
        if kind is not None:
            query = query.where(e.c.kind == EventKind(kind).value)
        with self.store.read() as conn:
            return [_event(row) for row in reversed(conn.execute(query).all())]

    def note(self, kind: EventKind, subject: str, data: dict[str, Any], *, key: str) -> str | None:
        """Record an observed event once per ``key`` (the occurrence it names), however many
        observers see it; returns the new event's id, or None when ``key`` was recorded before."""
        if not key or len(key) > 200:
            raise InvalidInput("key", "an event key is 1..200 characters")
        e = s.events
        seen = select(e.c.event_id).where(e.c.dedup_key == key)
        with self.store.read() as conn:  # the common case, seen before (every status, every round), takes no write lock
            if conn.execute(seen).first() is not None:
                return None
        with self.store.write(lock_key=f"event:{key}") as conn:
            if conn.execute(seen).first() is not None:
                return None
            return record(conn, kind, subject, data, read_clock(self.clock), dedup_key=key)

    # -- webhooks --------------------------------------------------------------------------------
    def add_webhook(
        self, url: str, events: str | builtins.list[str] | tuple[str, ...], fmt: WebhookFormat | str = WebhookFormat.JSON
    ) -> tuple[Webhook, str]:
        """Subscribe ``url`` to ``events``; returns it with its signing secret (shown only now).
        Events from now on are delivered to it; earlier ones are not."""
        url = check_url(url)
        kinds = parse_kinds(events)
        try:
            fmt = WebhookFormat(fmt)
        except ValueError:
            raise InvalidInput("format", f"{fmt!r} is not a format; use {' or '.join(f.value for f in WebhookFormat)}") from None
        webhook_id = "wh-" + secrets.token_urlsafe(9)
        secret = "fgs_" + secrets.token_urlsafe(32)
        now = read_clock(self.clock)
        with self.store.write(lock_key="webhooks") as conn:
            conn.execute(
                insert(s.webhooks).values(
                    webhook_id=webhook_id,
                    url=url,
                    events=",".join(k.value for k in kinds),
                    secret=secret,
                    created_at_us=now,
                    format=fmt.value,
                )
            )
        return Webhook(webhook_id=webhook_id, url=url, events=kinds, created_at=now, format=fmt), secret

    def remove_webhook(self, webhook_id: str) -> None:
        """Unsubscribe a webhook; its undelivered deliveries go with it."""
        with self.store.write(lock_key="webhooks") as conn:
            done = conn.execute(delete(s.webhooks).where(s.webhooks.c.webhook_id == webhook_id))
            if done.rowcount != 1:
                raise NotFound(f"webhook {webhook_id!r} does not exist (see 'floorgate notify list')")
            conn.execute(delete(s.deliveries).where(s.deliveries.c.webhook_id == webhook_id))

    def webhooks(self) -> builtins.list[Webhook]:
        """Every webhook with its delivery log summed up (counts, the last attempt's outcome)."""
        w, d = s.webhooks, s.deliveries
        found: builtins.list[Webhook] = []
        with self.store.read() as conn:
            rows = conn.execute(select(w).order_by(w.c.created_at_us, w.c.webhook_id)).all()
            for row in rows:
                counts: dict[str, int] = dict(
                    conn.execute(select(d.c.state, func.count()).where(d.c.webhook_id == row.webhook_id).group_by(d.c.state)).all()
                )
                failing = conn.execute(
                    select(func.count()).where(d.c.webhook_id == row.webhook_id, d.c.state == DeliveryState.PENDING.value, d.c.attempts > 0)
                ).scalar_one()
                last = conn.execute(
                    select(d.c.last_status, d.c.last_error, d.c.last_attempt_at_us)
                    .where(d.c.webhook_id == row.webhook_id, d.c.last_attempt_at_us.is_not(None))
                    .order_by(d.c.last_attempt_at_us.desc())
                    .limit(1)
                ).first()
                with stored(f"webhook {row.webhook_id!r}"):
                    found.append(
                        Webhook(
                            webhook_id=row.webhook_id,
                            url=row.url,
                            events=parse_kinds(row.events),
                            created_at=row.created_at_us,
                            format=WebhookFormat(row.format),
                            pending=counts.get(DeliveryState.PENDING.value, 0),
                            delivered=counts.get(DeliveryState.DELIVERED.value, 0),
                            dead=counts.get(DeliveryState.DEAD.value, 0),
                            failing=failing,
                            last_status=last.last_status if last is not None else None,
                            last_error=last.last_error if last is not None else None,
                            last_attempt_at=last.last_attempt_at_us if last is not None else None,
                        )
                    )
        return found

    def delivery_counts(self) -> dict[DeliveryState, int]:
        """How many deliveries are in each state, over every webhook (every state present, 0 or more)."""
        d = s.deliveries
        with self.store.read() as conn:
            found: dict[str, int] = dict(conn.execute(select(d.c.state, func.count()).group_by(d.c.state)).all())
        return {state: int(found.get(state.value, 0)) for state in DeliveryState}

    def deliveries(self, webhook_id: str | None = None, *, event_ids: builtins.list[str] | None = None) -> builtins.list[Delivery]:
        """The delivery log: of one webhook, and/or of the events ``event_ids`` (default: all)."""
        d = s.deliveries
        query = select(d).order_by(d.c.next_attempt_at_us, d.c.event_id)
        if webhook_id is not None:
            query = query.where(d.c.webhook_id == webhook_id)
        if event_ids is not None:
            query = query.where(d.c.event_id.in_(event_ids))
        with self.store.read() as conn:
            rows = conn.execute(query).all()
        found: builtins.list[Delivery] = []
        for r in rows:
            with stored(f"delivery of event {r.event_id!r} to webhook {r.webhook_id!r}"):
                found.append(from_row(Delivery, s.deliveries, r, state=DeliveryState(r.state)))
        return found

    def retry_dead(self, webhook_id: str) -> int:
        """Make a webhook's dead deliveries due again now (attempts restart); returns how many."""
        d = s.deliveries
        now = read_clock(self.clock)
        with self.store.write(lock_key="deliveries") as conn:
            if conn.execute(select(s.webhooks.c.webhook_id).where(s.webhooks.c.webhook_id == webhook_id)).first() is None:
                raise NotFound(f"webhook {webhook_id!r} does not exist (see 'floorgate notify list')")
            done = conn.execute(
                update(d)
                .where(d.c.webhook_id == webhook_id, d.c.state == DeliveryState.DEAD.value)
                .values(state=DeliveryState.PENDING.value, attempts=0, next_attempt_at_us=now)
            )
            return int(done.rowcount)

    # -- delivering ------------------------------------------------------------------------------
    def claim_due(self, limit: int = 100) -> builtins.list[Due]:
        """The pending deliveries due now, each reserved for ``CLAIM_LEASE`` (a concurrent
        deliverer skips them); the caller POSTs them and reports each with ``record_attempt``.

        Each webhook gets its events in order: a delivery behind an earlier one of its webhook
        that is still pending and not due (waiting for its retry, or claimed by another deliverer)
        is not due either; a dead one no longer holds the rest back."""
        d, w, e = s.deliveries, s.webhooks, s.events
        now = read_clock(self.clock)
        claimed: builtins.list[Due] = []
        d2, e2 = d.alias("earlier"), e.alias("earlier_event")
        behind = (
            select(d2.c.event_id)
            .join(e2, e2.c.event_id == d2.c.event_id)
            .where(
                d2.c.webhook_id == d.c.webhook_id,
                d2.c.state == DeliveryState.PENDING.value,
                d2.c.next_attempt_at_us > now,
                e2.c.seq < select(e.c.seq).where(e.c.event_id == d.c.event_id).correlate(d).scalar_subquery(),
            )
            .exists()
        )
        due = and_(d.c.state == DeliveryState.PENDING.value, d.c.next_attempt_at_us <= now, ~behind)
        with self.store.read() as conn:  # the common case, nothing due, takes no write lock
            if conn.execute(select(d.c.event_id).where(due).limit(1)).first() is None:
                return claimed
        with self.store.write(lock_key="deliveries") as conn:
            rows = conn.execute(
                select(d.c.webhook_id, d.c.event_id, d.c.attempts, w.c.url, w.c.secret, w.c.format, e)
                .join(w, w.c.webhook_id == d.c.webhook_id)
                .join(e, e.c.event_id == d.c.event_id)
                .where(due)
                .order_by(e.c.seq)
                .limit(limit)
            ).all()
            for row in rows:
                conn.execute(
                    update(d)
                    .where(and_(d.c.webhook_id == row.webhook_id, d.c.event_id == row.event_id))
                    .values(next_attempt_at_us=now + CLAIM_LEASE)
                )
                claimed.append(
                    Due(
                        webhook_id=row.webhook_id,
                        url=row.url,
                        secret=row.secret,
                        event=_event(row),
                        attempts=row.attempts,
                        format=WebhookFormat(row.format),
                    )
                )
        return claimed

    def unclaim(self, keys: builtins.list[tuple[str, str]]) -> None:
        """End the claims on these (webhook, event) deliveries, unattempted: due again at once,
        each still behind its webhook's earlier pending events (``claim_due``)."""
        d = s.deliveries
        now = read_clock(self.clock)
        with self.store.write(lock_key="deliveries") as conn:
            for webhook_id, event_id in keys:
                conn.execute(
                    update(d)
                    .where(d.c.webhook_id == webhook_id, d.c.event_id == event_id, d.c.state == DeliveryState.PENDING.value)
                    .values(next_attempt_at_us=now)
                )

    def record_attempt(self, webhook_id: str, event_id: str, *, status: int | None, error: str | None) -> Delivery | None:
        """Log one attempt: a 2xx ``status`` delivers it; anything else (or ``error``, no answer)
        leaves it pending, retried after ``backoff``, until the ``MAX_ATTEMPTS``-th failure makes it
        dead. None: the webhook was removed meanwhile."""
        d = s.deliveries
        now = read_clock(self.clock)
        key = and_(d.c.webhook_id == webhook_id, d.c.event_id == event_id)
        ok = status is not None and 200 <= status < 300 and error is None
        with self.store.write(lock_key="deliveries") as conn:
            row = conn.execute(select(d.c.attempts, d.c.state).where(key)).first()
            if row is None or row.state != DeliveryState.PENDING.value:
                return None
            attempts = row.attempts + 1
            values: dict[str, Any] = dict(
                attempts=attempts,
                last_status=status,
                last_error=None if ok else (error or failure_text(DeliveryFailure.HTTP_STATUS, status))[:500],
                last_attempt_at_us=now,
            )
            if ok:
                values.update(state=DeliveryState.DELIVERED.value, delivered_at_us=now)
            elif attempts >= MAX_ATTEMPTS:
                values.update(state=DeliveryState.DEAD.value)
            else:
                values.update(next_attempt_at_us=now + backoff(attempts))
            conn.execute(update(d).where(key).values(**values))
        found = [x for x in self.deliveries(webhook_id) if x.event_id == event_id]
        return found[0] if found else None
