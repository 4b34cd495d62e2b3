"""``floorgate settings show|set``: the deployment's host policy (catch-up window, backoff,
retention); ``floorgate prune``: retention by hand."""

from __future__ import annotations

import argparse
import dataclasses

from pydantic import ValidationError

from floorgate.admission import HostPolicy, InvalidInput, StoredHostPolicy
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval, parse_duration, parse_interval
from floorgate.admission.retention import DEFAULT_BATCH, MAX_BATCH, Kept

from ...app.owner_gate import Access
from ...app.retention import Footprint, PruneReport
from ..context import EXIT_OK, Context, actions, reads, revision, writes

_FIELDS = (
    ("catch_up", "--catch-up"),
    ("backoff_initial", "--backoff-initial"),
    ("backoff_cap", "--backoff-cap"),
    ("retention", "--retention"),
)


def register(sub: argparse._SubParsersAction) -> None:
    ssub = actions(sub, "settings", "the host policy every 'floorgate run' and every readback uses")
    p = ssub.add_parser("show", help="the host policy and its revision")
    reads(p, _show)
    p = ssub.add_parser("set", help="change the host policy (exact-revision compare-and-set); running hosts pick it up")
    p.add_argument("--catch-up", help="a missed fire at most this old fires once after downtime (0 disables; default 1h)")
    p.add_argument("--backoff-initial", help="first wake after a failure or poke (default 3m)")
    p.add_argument("--backoff-cap", help="longest backoff wake (default 60m)")
    p.add_argument(
        "--retention", help="running hosts prune what is older than this in small batches, e.g. 90d (0: keep everything, the default)"
    )
    p.add_argument("--revision", required=True, type=revision, help="the revision you read with 'settings show' (0: defaults)")
    p.add_argument("--owner-ref", help="short non-sensitive id of who asked (e.g. alice); with an owner token, its principal")
    writes(p, _set, Access.OWNER)

    p = sub.add_parser(
        "prune",
        help="delete ticks, settled turns, delivered events and turn logs older than a limit (the latest start of every scope stays)",
    )
    p.add_argument("--older-than", required=True, help="e.g. 90d (at least 1d)")
    p.add_argument("--dry-run", action="store_true", help="count what would go; write nothing")
    p.add_argument("--state-dir", help="where the turn logs are (default $FLOORGATE_STATE_DIR or ./floorgate-state)")
    p.add_argument("--batch", type=int, default=DEFAULT_BATCH, help=f"records per transaction (default {DEFAULT_BATCH})")
    writes(p, _prune, Access.OWNER)


def policy_doc(stored: StoredHostPolicy) -> dict:  # type: ignore[type-arg]
    p = stored.policy
    return {
        "catch_up_seconds": p.catch_up.total_seconds(),
        "backoff_initial_seconds": p.backoff_initial.total_seconds(),
        "backoff_cap_seconds": p.backoff_cap.total_seconds(),
        "retention_seconds": p.retention.total_seconds(),
        "revision": stored.revision,
        "owner_ref": stored.owner_ref,
        "updated_at": iso(stored.updated_at),
    }


def policy_text(stored: StoredHostPolicy) -> str:
    p = stored.policy
    by = f" by {stored.owner_ref} at {iso(stored.updated_at)}" if stored.owner_ref else " (defaults)"
    return (
        f"host policy, revision {stored.revision}{by}\n"
        f"  catch-up:        {format_interval(p.catch_up) if p.catch_up else '0 (no catch-up)'}\n"
        f"  backoff initial: {format_interval(p.backoff_initial)}\n"
        f"  backoff cap:     {format_interval(p.backoff_cap)}\n"
        f"  retention:       {format_interval(p.retention) if p.retention else '0 (keeps everything)'}"
    )


def _show(ctx: Context) -> int:
    stored = ctx.app.host_policy.get()
    ctx.emit(policy_doc(stored), policy_text(stored))
    return EXIT_OK


def _set(ctx: Context) -> int:
    a = ctx.args
    current = ctx.app.host_policy.get().policy
    values = current.model_dump()
    given = False
    for name, flag in _FIELDS:
        text = getattr(a, name)
        if text is not None:
            values[name] = parse_interval(text, flag)
            given = True
    if not given:
        raise InvalidInput("--catch-up", "give --catch-up, --backoff-initial, --backoff-cap and/or --retention")
    try:
        policy = HostPolicy(**values)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        flag = next((f for n, f in _FIELDS if message.startswith(n)), "--backoff-initial")
        raise InvalidInput(flag, message.split(" ", 1)[1] if " " in message else message) from None
    stored = ctx.app.host_policy.set(policy, expected_revision=a.revision, owner_ref=ctx.owner()[0])
    ctx.emit(policy_doc(stored), policy_text(stored))
    return EXIT_OK


def _prune(ctx: Context) -> int:
    a = ctx.args
    older_than = parse_duration(a.older_than, "--older-than")
    if not 1 <= a.batch <= MAX_BATCH:
        raise InvalidInput("--batch", f"give 1..{MAX_BATCH} records per transaction")
    report = ctx.app.pruning.prune(older_than, dry_run=a.dry_run, batch=a.batch)
    ctx.emit(prune_doc(report), prune_text(report))
    return EXIT_OK


def _footprint_doc(f: Footprint) -> dict:  # type: ignore[type-arg]
    return {**dataclasses.asdict(f.rows), "log_files": f.log_files, "log_bytes": f.log_bytes}


def prune_doc(report: PruneReport) -> dict:  # type: ignore[type-arg]
    return {
        "cutoff": iso(report.cutoff),
        "dry_run": report.dry_run,
        "before": _footprint_doc(report.before),
        "after": _footprint_doc(report.after),
        "deleted": {kind.value: n for kind, n in report.deleted.items()},
        "logs_deleted": report.logs_deleted,
        "log_bytes_deleted": report.log_bytes_deleted,
        "batches": report.batches,
    }


def prune_text(report: PruneReport) -> str:
    before, after = _footprint_doc(report.before), _footprint_doc(report.after)
    verb = "would delete" if report.dry_run else "deleted"
    gone = ", ".join(f"{report.deleted[k]} {k.value}" for k in Kept)
    logs = f"{report.logs_deleted} turn logs ({report.log_bytes_deleted} bytes)"
    head = f"older than {iso(report.cutoff)}: {verb} {gone}, {logs}" + ("" if report.dry_run else f" in {report.batches} batches")
    rows = [f"  {name:<11}{before[name]:>12}{after[name]:>12}" for name in before]
    title = "  size       " + ("now".rjust(11) if report.dry_run else "     before       after")
    if report.dry_run:
        rows = [f"  {name:<11}{before[name]:>12}" for name in before]
    return "\n".join([head, title, *rows, "  (every start record stays: floors count from the latest start of every scope)"])
