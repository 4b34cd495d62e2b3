"""``floorgate notify add|list|remove|deliver|events``: webhooks for the event outbox."""

from __future__ import annotations

import argparse

from floorgate.admission.events import MAX_ATTEMPTS, EventKind, WebhookFormat

from ...app.notify import webhook_doc
from ...app.owner_gate import Access
from ...views.present import table
from ..context import EXIT_OK, Context, actions, listed, reads, writes


def register(sub: argparse._SubParsersAction) -> None:
    nsub = actions(sub, "notify", "webhooks: signed, at-least-once delivery of events (ask_pending, automation_held, ...)")
    kinds = ",".join(k.value for k in EventKind)
    p = nsub.add_parser("add", help="subscribe a URL to event kinds and print its signing secret once")
    p.add_argument("url", help="http:// or https:// URL that receives a JSON POST per event")
    p.add_argument("--events", required=True, help=f"comma-separated kinds: {kinds}")
    p.add_argument(
        "--format",
        choices=[f.value for f in WebhookFormat],
        default=WebhookFormat.JSON.value,
        help='json: the signed event document (default); slack: {"text": ...} for a Slack-compatible incoming webhook',
    )
    writes(p, _add, Access.OWNER)
    p = nsub.add_parser(
        "list", help=f"every webhook with its delivery log (pending, delivered, failing, dead after {MAX_ATTEMPTS} failed attempts)"
    )
    reads(p, _list)
    p = nsub.add_parser("remove", help="unsubscribe a webhook (its undelivered events go with it)")
    p.add_argument("webhook_id")
    writes(p, _remove, Access.OWNER)
    p = nsub.add_parser("retry", help="make a webhook's dead deliveries due again (after fixing its receiver)")
    p.add_argument("webhook_id")
    writes(p, _retry, Access.OPERATE, existing=True)  # re-sends to receivers an owner added
    p = nsub.add_parser("deliver", help="deliver the due events once (a running 'floorgate run' or 'floorgate serve' does this on its own)")
    writes(p, _deliver, Access.OPERATE, existing=True)
    p = nsub.add_parser("events", help="the most recent events in the outbox")
    p.add_argument("--kind", choices=[k.value for k in EventKind])
    p.add_argument("--limit", type=listed, default=50)
    reads(p, _events)


def _add(ctx: Context) -> int:
    webhook, secret = ctx.app.notify.add_webhook(ctx.args.url, ctx.args.events, ctx.args.format)
    ctx.emit(
        {**webhook_doc(webhook), "secret": secret},
        f"added {webhook.webhook_id} -> {webhook.url} ({', '.join(k.value for k in webhook.events)}); "
        f"its signing secret, shown only now (verify X-Floorgate-Signature: sha256=HMAC-SHA256(secret, body)):\n{secret}",
    )
    return EXIT_OK


def _list(ctx: Context) -> int:
    items = ctx.app.notify.webhooks()
    ctx.emit_table(
        "webhooks",
        items,
        webhook_doc,
        ["ID", "URL", "FORMAT", "EVENTS", "PENDING", "DELIVERED", "FAILING", "DEAD", "LAST"],
        lambda w: (
            w.webhook_id,
            w.url,
            w.format.value,
            ",".join(k.value for k in w.events),
            str(w.pending),
            str(w.delivered),
            str(w.failing),
            str(w.dead),
            (w.last_error or "ok") if w.last_attempt_at is not None else "-",
        ),
        "no webhooks (add one: floorgate notify add URL --events ask_pending,automation_held)",
    )
    return EXIT_OK


def _remove(ctx: Context) -> int:
    ctx.app.notify.remove_webhook(ctx.args.webhook_id)
    ctx.emit({"removed": ctx.args.webhook_id}, f"removed {ctx.args.webhook_id}")
    return EXIT_OK


def _retry(ctx: Context) -> int:
    count = ctx.app.notify.retry_dead(ctx.args.webhook_id)
    ctx.emit({"webhook_id": ctx.args.webhook_id, "retried": count}, f"{ctx.args.webhook_id}: {count} dead deliveries due again")
    return EXIT_OK


def _deliver(ctx: Context) -> int:
    report = ctx.app.notify.deliver()
    ctx.emit(
        report.model_dump(),
        f"attempted {report.attempted}: delivered {report.delivered}, failed {report.failed} (retried later; see 'floorgate notify list')"
        + (f"; {report.hosts_lost} host(s) lost" if report.hosts_lost else ""),
    )
    return EXIT_OK


def _events(ctx: Context) -> int:
    docs = ctx.app.notify.recent(ctx.args.limit, ctx.args.kind)

    def deliveries(doc: dict[str, object]) -> str:
        states = [f"{d['state']}" + (f"({d['attempts']})" if d["attempts"] else "") for d in doc["deliveries"]]  # type: ignore[attr-defined]
        return ",".join(states) or "-"

    ctx.emit(
        {"events": docs},
        lambda: (
            table(
                ["ID", "KIND", "SUBJECT", "AT", "DELIVERIES"],
                [(d["id"], d["kind"], d["subject"], d["occurred_at"] or "", deliveries(d)) for d in docs],
            )
            if docs
            else "no events yet"
        ),
    )
    return EXIT_OK
