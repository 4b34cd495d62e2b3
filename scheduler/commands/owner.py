"""``floorgate owner add|list|revoke``: the principals who sign in to the owner console."""

from __future__ import annotations

import argparse

from admission import Principal, Role
from admission.clock import iso

from ..cli import EXIT_OK, Context, add_common
from ..present import table


def register(sub: argparse._SubParsersAction) -> None:
    top = sub.add_parser("owner", help="console principals: named tokens with a role (owner writes, viewer reads)")
    osub = top.add_subparsers(dest="owner_command", metavar="ACTION", parser_class=type(top))
    osub.required = True
    p = osub.add_parser("add", help="add a principal and print its token once (only its hash is stored)")
    p.add_argument("name", help="short non-sensitive id, recorded as owner_ref of its writes (e.g. ops-lead)")
    p.add_argument("--role", choices=[r.value for r in Role], default=Role.OWNER.value)
    add_common(p)
    p.set_defaults(handler=_add)
    p = osub.add_parser("list", help="every principal and its role")
    add_common(p)
    p.set_defaults(handler=_list, reads_only=True)
    p = osub.add_parser("revoke", help="revoke a principal's token")
    p.add_argument("name")
    add_common(p)
    p.set_defaults(handler=_revoke)


def principal_doc(p: Principal) -> dict[str, object]:
    return {"name": p.name, "role": p.role.value, "created_at": iso(p.created_at), "revoked_at": iso(p.revoked_at)}


def _add(ctx: Context) -> int:
    principal, token = ctx.app.principals.add(ctx.args.name, ctx.args.role)
    ctx.emit(
        {**principal_doc(principal), "token": token},
        f"added {principal.name} ({principal.role.value}); its token, shown only now:\n{token}",
    )
    return EXIT_OK


def _list(ctx: Context) -> int:
    items = ctx.app.principals.list()
    ctx.emit(
        {"principals": [principal_doc(p) for p in items]},
        lambda: (
            table(["NAME", "ROLE", "CREATED", "REVOKED"], [(p.name, p.role.value, iso(p.created_at), iso(p.revoked_at)) for p in items])
            if items
            else "no principals (add one: floorgate owner add NAME)"
        ),
    )
    return EXIT_OK


def _revoke(ctx: Context) -> int:
    p = ctx.app.principals.revoke(ctx.args.name)
    ctx.emit(principal_doc(p), f"revoked {p.name}")
    return EXIT_OK
