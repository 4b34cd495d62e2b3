"""``floorgate settings show|set``: the deployment's host policy (catch-up window, backoff)."""

from __future__ import annotations

import argparse

from pydantic import ValidationError

from floorgate.admission import HostPolicy, InvalidInput, StoredHostPolicy
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval, parse_interval

from ...app.owner_gate import Access
from ..context import EXIT_OK, Context, add_common

_FIELDS = (("catch_up", "--catch-up"), ("backoff_initial", "--backoff-initial"), ("backoff_cap", "--backoff-cap"))


def register(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("settings", help="the host policy every 'floorgate run' and every readback uses")
    ssub = top.add_subparsers(dest="settings_command", metavar="ACTION", parser_class=type(top))
    ssub.required = True
    p = ssub.add_parser("show", help="the host policy and its revision")
    add_common(p)
    p.set_defaults(handler=_show, reads_only=True, access=Access.READ)
    p = ssub.add_parser("set", help="change the host policy (exact-revision compare-and-set); running hosts pick it up")
    p.add_argument("--catch-up", help="a missed fire at most this old fires once after downtime (0 disables; default 1h)")
    p.add_argument("--backoff-initial", help="first wake after a failure or poke (default 3m)")
    p.add_argument("--backoff-cap", help="longest backoff wake (default 60m)")
    p.add_argument("--revision", required=True, type=int, help="the revision you read with 'settings show' (0: defaults)")
    p.add_argument("--owner-ref", help="short non-sensitive id of who asked (e.g. alice); with an owner token, its principal")
    add_common(p)
    p.set_defaults(handler=_set, access=Access.OWNER)


def policy_doc(stored: StoredHostPolicy) -> dict:  # type: ignore[type-arg]
    p = stored.policy
    return {
        "catch_up_seconds": p.catch_up.total_seconds(),
        "backoff_initial_seconds": p.backoff_initial.total_seconds(),
        "backoff_cap_seconds": p.backoff_cap.total_seconds(),
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
        f"  backoff cap:     {format_interval(p.backoff_cap)}"
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
        raise InvalidInput("--catch-up", "give --catch-up, --backoff-initial and/or --backoff-cap")
    try:
        policy = HostPolicy(**values)
    except ValidationError as exc:
        message = str(exc.errors()[0]["msg"]).removeprefix("Value error, ")
        flag = next((f for n, f in _FIELDS if message.startswith(n)), "--backoff-initial")
        raise InvalidInput(flag, message.split(" ", 1)[1] if " " in message else message) from None
    stored = ctx.app.host_policy.set(policy, expected_revision=a.revision, owner_ref=ctx.owner()[0])
    ctx.emit(policy_doc(stored), policy_text(stored))
    return EXIT_OK
