"""``floorgate notify add|list|remove|deliver|events``: webhooks for the event outbox."""

from __future__ import annotations

import argparse

from admission.clock import iso
from admission.events import EventKind, Webhook

from ..cli import EXIT_OK, Context, add_common
from ..present import table


def register(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("notify", help="webhooks: signed, at-least-once delivery of events (ask_pending, automation_held, ...)")
    nsub = top.add_subparsers(dest="notify_command", metavar="ACTION", parser_class=type(top))
    nsub.required = True
    kinds = ",".join(k.value for k in EventKind)
    p = nsub.add_parser("add", help="subscribe a URL to event kinds and print its signing secret once")
    p.add_argument("url", help="http:// or https:// URL that receives a JSON POST per event")
    p.add_argument("--events", required=True, help=f"comma-separated kinds: {kinds}")
    add_common(p)
    p.set_defaults(handler=_add)
    p = nsub.add_parser("list", help="every webhook with its delivery log (pending, delivered, failing, last status)")
    add_common(p)
    p.set_defaults(handler=_list, reads_only=True)
    p = nsub.add_parser("remove", help="unsubscribe a webhook (its undelivered events go with it)")
    p.add_argument("webhook_id")
    add_common(p)
    p.set_defaults(handler=_remove)
    p = nsub.add_parser("deliver", help="deliver the due events once (a running 'floorgate run' does this on its own)")
    add_common(p)
    p.set_defaults(handler=_deliver)
    p = nsub.add_parser("events", help="the most recent events in the outbox")
    p.add_argument("--kind", choices=[k.value for k in EventKind])
    p.add_argument("--limit", type=int, default=50)
    add_common(p)
    p.set_defaults(handler=_events, reads_only=True)


def webhook_doc(w: Webhook) -> dict[str, object]:
    return {
        "webhook_id": w.webhook_id,
        "url": w.url,
        "events": [k.value for k in w.events],
        "created_at": iso(w.created_at),
        "pending": w.pending,
        "delivered": w.delivered,
        "failing": w.failing,
        "last_status": w.last_status,
        "last_error": w.last_error,
        "last_attempt_at": iso(w.last_attempt_at),
    }


def _add(ctx: Context) -> int:
    webhook, secret = ctx.app.notify.events.add_webhook(ctx.args.url, ctx.args.events)
    ctx.emit(
        {**webhook_doc(webhook), "secret": secret},
        f"added {webhook.webhook_id} -> {webhook.url} ({', '.join(k.value for k in webhook.events)}); "
        f"its signing secret, shown only now (verify X-Floorgate-Signature: sha256=HMAC-SHA256(secret, body)):\n{secret}",
    )
    return EXIT_OK


def _list(ctx: Context) -> int:
    items = ctx.app.notify.events.webhooks()
    ctx.emit(
        {"webhooks": [webhook_doc(w) for w in items]},
        lambda: (
            table(
                ["ID", "URL", "EVENTS", "PENDING", "DELIVERED", "FAILING", "LAST"],
                [
                    (
                        w.webhook_id,
                        w.url,
                        ",".join(k.value for k in w.events),
                        str(w.pending),
                        str(w.delivered),
                        str(w.failing),
                        (w.last_error or "ok") if w.last_attempt_at is not None else "-",
                    )
                    for w in items
                ],
            )
            if items
            else "no webhooks (add one: floorgate notify add URL --events ask_pending,automation_held)"
        ),
    )
    return EXIT_OK


def _remove(ctx: Context) -> int:
    ctx.app.notify.events.remove_webhook(ctx.args.webhook_id)
    ctx.emit({"removed": ctx.args.webhook_id}, f"removed {ctx.args.webhook_id}")
    return EXIT_OK


def _deliver(ctx: Context) -> int:
    report = ctx.app.notify.deliver()
    ctx.emit(
        report.model_dump(),
        f"attempted {report.attempted}: delivered {report.delivered}, failed {report.failed} (retried later; see 'floorgate notify list')",
    )
    return EXIT_OK


def _events(ctx: Context) -> int:
    items = ctx.app.notify.events.list(EventKind(ctx.args.kind) if ctx.args.kind else None, ctx.args.limit)
    docs = [
        {"id": e.event_id, "kind": e.kind.value, "subject": e.subject, "occurred_at": iso(e.occurred_at), "data": e.data} for e in items
    ]
    ctx.emit(
        {"events": docs},
        lambda: (
            table(["ID", "KIND", "SUBJECT", "AT"], [(e.event_id, e.kind.value, e.subject, iso(e.occurred_at) or "") for e in items])
            if items
            else "no events yet"
        ),
    )
    return EXIT_OK
