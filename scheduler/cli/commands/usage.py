"""``floorgate usage``: the per-turn usage ledger budgets count, newest first, with a total per state."""

from __future__ import annotations

import argparse
from datetime import datetime, timedelta

from floorgate.admission.clock import parse_instant
from floorgate.admission.errors import InvalidInput
from floorgate.admission.intervals import parse_duration
from floorgate.admission.scope import MAX_LIMIT, check_limit

from ...views.present_usage import ledger_doc, ledger_text
from ..context import EXIT_OK, Context, reads
from .policy import scope_from

DEFAULT_LIMIT = 50


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("usage", help="the per-turn usage ledger budgets count, newest first, with a total per state")
    p.add_argument("scope", nargs="?", help="GOAL, GOAL/AGENT or GOAL/AGENT/AUTOMATION (default: every lane)")
    p.add_argument("--goal", help=argparse.SUPPRESS)
    p.add_argument("--agent", help=argparse.SUPPRESS)
    p.add_argument("--automation", help=argparse.SUPPRESS)
    p.add_argument("--since", help="a duration back from now (1d, 12h, 90m) or an ISO 8601 instant (2026-12-01T00:00Z)")
    p.add_argument("--limit", default=str(DEFAULT_LIMIT), help=f"at most this many entries, 1..{MAX_LIMIT} (default {DEFAULT_LIMIT})")
    reads(p, _usage)


def parse_since(text: str) -> timedelta | datetime:
    """``--since``: an instant when it reads as a date (``2026-12-01...``), else a duration back from now."""
    if text[:4].isdigit() and text[4:5] == "-":
        return parse_instant(text, "--since")
    try:
        return parse_duration(text, "--since")
    except InvalidInput:
        raise InvalidInput(
            "--since", f"{text!r} is neither a duration (1d, 12h, 90m) nor an ISO 8601 instant (2026-12-01T00:00Z)"
        ) from None


def parse_limit(text: str) -> int:
    """``--limit``: a whole count of entries within the cap."""
    if not (text.isascii() and text.isdigit()):
        raise InvalidInput("--limit", f"{text!r} is not a count of entries; give 1..{MAX_LIMIT}")
    return check_limit(int(text), "--limit")


def _usage(ctx: Context) -> int:
    args = ctx.args
    scope = scope_from(args, required=False)
    since = parse_since(args.since) if args.since is not None else None
    limit = parse_limit(args.limit)
    page = ctx.app.usage_ledger.list(scope, since=since, limit=limit)
    ctx.emit(ledger_doc(page), lambda: ledger_text(page))
    return EXIT_OK
