"""Webhook delivery: POST each due event, signed, and log the attempt (``floorgate notify deliver``,
a running host's notify loop, and ``floorgate serve``'s). Never called inside an admission
transaction: claiming and logging are short store writes, and the HTTP request happens between
them with no lock held.

Each delivery round first looks for lost hosts: a timer host whose heartbeat went stale without a
clean stop is a ``host_lost`` event, once per loss (keyed by the host and its last beat), so any
live deliverer (another host, or the console) reports the one that died."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from pydantic import BaseModel, ConfigDict

from floorgate.admission import Store
from floorgate.admission.clock import Clock, iso, read_clock
from floorgate.admission.events import (
    CLAIM_LEASE,
    EVENT_ID_HEADER,
    EVENT_KIND_HEADER,
    SIGNATURE_HEADER,
    Delivery,
    DeliveryFailure,
    DeliveryState,
    Due,
    EventKind,
    Events,
    Webhook,
    WebhookFormat,
    signature,
)
from floorgate.admission.liveness import HostBeats

from ..runtime._webhook_http import DEFAULT_DEADLINE_SECONDS, AddressRanges, Outcome
from ..runtime._webhook_http import post as http_post

log = logging.getLogger("floorgate.notify")

# (url, body, headers) -> the attempt's outcome.
Post = Callable[[str, bytes, dict[str, str]], Outcome]
# Webhooks delivered to at once in a round (each one's deliveries in order): a receiver that holds
# its connections to the deadline holds one of these, not the round.
WORKERS = 4


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
        **_last_attempt_doc(w),
    }


def delivery_doc(d: Delivery) -> dict[str, object]:
    """One (webhook, event) delivery: its state and its last attempt."""
    return {
        "webhook_id": d.webhook_id,
        "state": d.state.value,
        "attempts": d.attempts,
        **_last_attempt_doc(d),
        "next_attempt_at": iso(d.next_attempt_at) if d.state.value == "pending" else None,
    }


def _last_attempt_doc(x: Webhook | Delivery) -> dict[str, object]:
    """How the last delivery attempt (of a webhook, or of one delivery) ended: its HTTP status, its
    error, and when it was made."""
    return {"last_status": x.last_status, "last_error": x.last_error, "last_attempt_at": iso(x.last_attempt_at)}


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

    def __init__(
        self,
        store: Store,
        clock: Clock,
        post: Post | None = None,
        *,
        deadline: float = DEFAULT_DEADLINE_SECONDS,
        ranges: AddressRanges | None = None,
    ) -> None:
        """``deadline``: seconds one attempt may take in all (connect, send, the answer's head);
        ``ranges``: the addresses deliveries may go to (default: any). ``post`` replaces the HTTP
        client (the deadline and ranges are then its own)."""
        self.store = store
        self.clock = clock
        self.events = Events(store, clock)
        self.deadline = deadline
        self.post: Post = post if post is not None else functools.partial(http_post, deadline=deadline, ranges=ranges)

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
        """Note lost hosts, then deliver every due event once (at most ``limit``): each webhook's
        in event order, up to ``WORKERS`` webhooks at a time. Each attempt is logged on its own,
        whatever it raised, and a failed one is retried after its backoff; its webhook's later
        events wait behind it, unattempted, so a receiver never gets them out of order (until it
        is delivered or dead). A claimed delivery that could not start while its claim still
        covers a whole attempt is left, unattempted, for a round after the claim lapses."""
        delivered = failed = 0
        lost = self.note_lost_hosts()
        due = self.events.claim_due(limit)
        # Monotonic, not the store's clock: the claim is measured against real elapsed time here.
        lease_ends = time.monotonic() + CLAIM_LEASE.total_seconds()
        by_webhook: dict[str, list[Due]] = {}
        for item in due:
            by_webhook.setdefault(item.webhook_id, []).append(item)
        with ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="floorgate-webhook") as pool:
            rounds = [pool.submit(self._send_all, items, lease_ends) for items in by_webhook.values()]
            for done in as_completed(rounds):
                sent, behind = done.result()
                for item, outcome in sent:
                    self.events.record_attempt(item.webhook_id, item.event.event_id, status=outcome.status, error=outcome.error)
                    if outcome.failure is None:
                        delivered += 1
                    else:
                        failed += 1
                if behind and time.monotonic() < lease_ends:  # still ours: they follow the retry, not the lease
                    self.events.unclaim([(item.webhook_id, item.event.event_id) for item in behind])
        return DeliveryReport(attempted=delivered + failed, delivered=delivered, failed=failed, hosts_lost=len(lost))

    def _send_all(self, items: list[Due], lease_ends: float) -> tuple[list[tuple[Due, Outcome]], list[Due]]:
        """One webhook's due events, in order, until one fails: what was sent, and the events
        after the failed one (unattempted: they wait behind its retry, ``claim_due``)."""
        sent: list[tuple[Due, Outcome]] = []
        for k, item in enumerate(items):
            outcome = self._send(item, lease_ends)
            if outcome is None:  # the claim is running out: the rest are left for a later round
                break
            sent.append((item, outcome))
            if outcome.failure is not None:
                return sent, items[k + 1 :]
        return sent, []

    def _send(self, item: Due, lease_ends: float) -> Outcome | None:
        if time.monotonic() + self.deadline > lease_ends:
            return None  # another deliverer may claim it once the lease lapses
        try:
            body = item.event.payload(item.format)
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "floorgate-webhook",
                EVENT_ID_HEADER: item.event.event_id,
                EVENT_KIND_HEADER: item.event.kind.value,
                SIGNATURE_HEADER: signature(item.secret, body),
            }
            outcome = self.post(item.url, body, headers)
            if outcome.failure is None and (outcome.status is None or not 200 <= outcome.status < 300):
                return Outcome(outcome.status, DeliveryFailure.BAD_RESPONSE)
            return outcome
        except Exception:  # this delivery's failure, never the round's
            log.exception("delivering %s to webhook %s failed", item.event.event_id, item.webhook_id)
            return Outcome(None, DeliveryFailure.INTERNAL_ERROR)
