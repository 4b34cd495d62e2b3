"""Webhook delivery: POST each due event, signed, and log the attempt (``floorgate notify deliver``,
a running host's notify loop, and ``floorgate serve``'s). Never called inside an admission
transaction: claiming and logging are short store writes, and the HTTP request happens between
them with no lock held.

Each delivery round first looks for lost hosts: a timer host whose heartbeat went stale without a
clean stop is a ``host_lost`` event, once per loss (keyed by the host and its last beat), so any
live deliverer (another host, or the console) reports the one that died."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from admission import Store
from admission.clock import Clock, iso, read_clock
from admission.events import (
    EVENT_ID_HEADER,
    EVENT_KIND_HEADER,
    SIGNATURE_HEADER,
    Delivery,
    DeliveryState,
    Due,
    EventKind,
    Events,
    Webhook,
    WebhookFormat,
    signature,
)
from admission.liveness import HostBeats

TIMEOUT_SECONDS = 5.0
# (url, body, headers) -> HTTP status; raises OSError when there is no answer.
Post = Callable[[str, bytes, dict[str, str]], int]


def http_post(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_SECONDS) as response:
            status: int = response.status
            return status
    except urllib.error.HTTPError as exc:
        return exc.code


def webhook_doc(w: Webhook) -> dict[str, object]:
    """A webhook and its delivery log summed up (never its secret)."""
    return {
        "webhook_id": w.webhook_id,
        "url": w.url,
        "events": [k.value for k in w.events],
        "format": w.format.value,
        "created_at": iso(w.created_at),
        "pending": w.pending,
        "delivered": w.delivered,
        "failing": w.failing,
        "dead": w.dead,
        "last_status": w.last_status,
        "last_error": w.last_error,
        "last_attempt_at": iso(w.last_attempt_at),
    }


def delivery_doc(d: Delivery) -> dict[str, object]:
    """One (webhook, event) delivery: its state and its last attempt."""
    return {
        "webhook_id": d.webhook_id,
        "state": d.state.value,
        "attempts": d.attempts,
        "last_status": d.last_status,
        "last_error": d.last_error,
        "last_attempt_at": iso(d.last_attempt_at),
        "next_attempt_at": iso(d.next_attempt_at) if d.state.value == "pending" else None,
    }


def event_docs(events: Events, limit: int, kind: str | None = None) -> list[dict[str, object]]:
    """The latest events, newest last, each with its deliveries (the CLI and the console show these)."""
    items = events.list(EventKind(kind) if kind else None, limit)
    by_event: dict[str, list[dict[str, object]]] = {}
    for d in events.deliveries(event_ids=[e.event_id for e in items]):
        by_event.setdefault(d.event_id, []).append(delivery_doc(d))
    return [
        {
            "id": e.event_id,
            "kind": e.kind.value,
            "subject": e.subject,
            "occurred_at": iso(e.occurred_at),
            "data": e.data,
            "deliveries": by_event.get(e.event_id, []),
        }
        for e in items
    ]


class DeliveryReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempted: int
    delivered: int
    failed: int
    hosts_lost: int = 0  # host_lost events this round recorded


class NotifyService:
    """Webhook subscriptions, the event outbox, and delivering it."""

    def __init__(self, store: Store, clock: Clock, post: Post | None = None) -> None:
        self.store = store
        self.clock = clock
        self.events = Events(store, clock)
        self.post = post if post is not None else http_post

    # -- subscriptions (every surface adds, lists, removes and retries through these) -----------
    def add_webhook(self, url: str, events: str | list[str], fmt: WebhookFormat | str = WebhookFormat.JSON) -> tuple[Webhook, str]:
        """Subscribe ``url`` to ``events``; the webhook and its signing secret (shown only now)."""
        return self.events.add_webhook(url, events, fmt)

    def webhooks(self) -> list[Webhook]:
        """Every webhook with its delivery log summed up."""
        return self.events.webhooks()

    def remove_webhook(self, webhook_id: str) -> None:
        """Unsubscribe a webhook (``NotFound`` naming it when there is none)."""
        self.events.remove_webhook(webhook_id)

    def retry_dead(self, webhook_id: str) -> int:
        """Make a webhook's dead deliveries due again; how many."""
        return self.events.retry_dead(webhook_id)

    def recent(self, limit: int, kind: str | None = None) -> list[dict[str, object]]:
        """The latest events with their deliveries (``event_docs``)."""
        return event_docs(self.events, limit, kind)

    def delivery_counts(self) -> dict[DeliveryState, int]:
        """Deliveries in each state (every state present), for metrics."""
        return self.events.delivery_counts()

    def note_lost_hosts(self) -> list[str]:
        """Record ``host_lost`` for each host whose heartbeat is stale and that never stopped
        cleanly (once per loss: a host that beats again and is lost again is a new loss)."""
        now = read_clock(self.clock)
        found = []
        for beat in HostBeats(self.store).all():
            if beat.stopped_at is not None or beat.alive(now):
                continue
            data = {"hostname": beat.hostname, "pid": beat.pid, "last_beat_at": iso(beat.beat_at), "started_at": iso(beat.started_at)}
            key = f"host_lost:{beat.host_id}:{iso(beat.beat_at)}"
            if self.events.note(EventKind.HOST_LOST, beat.host_id, data, key=key) is not None:
                found.append(beat.host_id)
        return found

    def deliver(self, limit: int = 100) -> DeliveryReport:
        """Note lost hosts, then deliver every due event once (at most ``limit``); failures are
        logged and retried later."""
        delivered = failed = 0
        lost = self.note_lost_hosts()
        due = self.events.claim_due(limit)
        for item in due:
            status, error = self._send(item)
            self.events.record_attempt(item.webhook_id, item.event.event_id, status=status, error=error)
            if status is not None and 200 <= status < 300 and error is None:
                delivered += 1
            else:
                failed += 1
        return DeliveryReport(attempted=len(due), delivered=delivered, failed=failed, hosts_lost=len(lost))

    def _send(self, item: Due) -> tuple[int | None, str | None]:
        body = item.event.payload(item.format)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "floorgate-webhook",
            EVENT_ID_HEADER: item.event.event_id,
            EVENT_KIND_HEADER: item.event.kind.value,
            SIGNATURE_HEADER: signature(item.secret, body),
        }
        try:
            return self.post(item.url, body, headers), None
        except (OSError, ValueError) as exc:
            return None, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]
