"""Webhook delivery: POST each due event, signed, and log the attempt (``floorgate notify deliver``,
and a running host's sync loop). Never called inside an admission transaction: claiming and
logging are short store writes, and the HTTP request happens between them with no lock held."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from admission import Store
from admission.clock import Clock
from admission.events import EVENT_ID_HEADER, EVENT_KIND_HEADER, SIGNATURE_HEADER, Due, Events, signature

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


class DeliveryReport(BaseModel):
    model_config = ConfigDict(frozen=True)

    attempted: int
    delivered: int
    failed: int


class NotifyService:
    def __init__(self, store: Store, clock: Clock, post: Post | None = None) -> None:
        self.events = Events(store, clock)
        self.post = post if post is not None else http_post

    def deliver(self, limit: int = 100) -> DeliveryReport:
        """Deliver every due event once (at most ``limit``); failures are logged and retried later."""
        delivered = failed = 0
        due = self.events.claim_due(limit)
        for item in due:
            status, error = self._send(item)
            self.events.record_attempt(item.webhook_id, item.event.event_id, status=status, error=error)
            if status is not None and 200 <= status < 300 and error is None:
                delivered += 1
            else:
                failed += 1
        return DeliveryReport(attempted=len(due), delivered=delivered, failed=failed)

    def _send(self, item: Due) -> tuple[int | None, str | None]:
        body = item.event.body()
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
