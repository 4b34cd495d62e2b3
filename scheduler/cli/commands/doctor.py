"""``floorgate doctor``: every check of a deployment, one line each (exit 0 ok or warnings, 1 a check failed)."""

from __future__ import annotations

import argparse

from floorgate.admission import StoreUnavailable

from ...app.doctor import Doctor, Status, store_unreachable, worst
from ..context import EXIT_OK, EXIT_UNAVAILABLE, Context, reads


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check the deployment: store, schema, hosts, cron daemon, hooks, lock timeout, clock, turn logs, webhooks",
    )
    p.add_argument("--state-dir", help="where per-turn logs go (default $FLOORGATE_STATE_DIR or ./floorgate-state)")
    reads(p, _doctor)


def _doctor(ctx: Context) -> int:
    try:
        checks = Doctor(ctx.app).run()
    except StoreUnavailable as exc:  # no store there, or it cannot be opened: that is the finding
        checks = [store_unreachable(exc)]
    status = worst(checks)
    summary = {Status.OK: "all checks ok", Status.WARN: "ok, with warnings", Status.FAIL: "some checks failed"}[status]
    ctx.emit(
        {"status": status.value, "checks": [c.doc() for c in checks]},
        lambda: "\n".join([*(c.text() for c in checks), summary]),
    )
    return EXIT_UNAVAILABLE if status is Status.FAIL else EXIT_OK
