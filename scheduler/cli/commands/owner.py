"""``floorgate owner add|list|revoke``: the principals who sign in to the owner console."""

from __future__ import annotations

import argparse

from floorgate.admission import Principal, Role
from floorgate.admission.clock import iso

from ...app.owner_gate import ENV_TOKEN, Access, default_token_file
from ..context import EXIT_OK, Context, actions, reads, writes


def register(sub: argparse._SubParsersAction) -> None:
    osub = actions(sub, "owner", "console principals: named tokens with a role (owner writes, viewer reads)")
    p = osub.add_parser("add", help="add a principal and print its token once (only its hash is stored)")
    p.add_argument("name", help="short non-sensitive id, recorded as owner_ref of its writes (e.g. ops-lead)")
    p.add_argument("--role", choices=[r.value for r in Role], default=Role.OWNER.value)
    writes(p, _add, Access.OWNER)
    p = osub.add_parser("list", help="every principal and its role")
    reads(p, _list)
    p = osub.add_parser("revoke", help="revoke a principal's token")
    p.add_argument("name")
    writes(p, _revoke, Access.OWNER)


def principal_doc(p: Principal) -> dict[str, object]:
    return {"name": p.name, "role": p.role.value, "created_at": iso(p.created_at), "revoked_at": iso(p.revoked_at)}


def _add(ctx: Context) -> int:
    first = not ctx.app.owner_gate.has_owners()
    principal, token = ctx.app.principals.add(ctx.args.name, ctx.args.role)
    doc: dict[str, object] = {**principal_doc(principal), "token": token}
    text = f"added {principal.name} ({principal.role.value}); its token, shown only now:\n{token}"
    if first and principal.can_write:
        hint = (
            "this store has an owner now: every owner write from the CLI (policy set, approve, automation add, ...) "
            f"needs an owner token: export {ENV_TOKEN}=<token>, or save it in {default_token_file()} (chmod 600) "
            "or a file passed with --token-file; a managed turn never gets it"
        )
        doc["cli_writes"] = hint
        text += f"\n{hint}"
    ctx.emit(doc, text)
    return EXIT_OK


def _list(ctx: Context) -> int:
    items = ctx.app.principals.list()
    ctx.emit_table(
        "principals",
        items,
        principal_doc,
        ["NAME", "ROLE", "CREATED", "REVOKED"],
        lambda p: (p.name, p.role.value, iso(p.created_at), iso(p.revoked_at)),
        "no principals (add one: floorgate owner add NAME)",
    )
    return EXIT_OK


def _revoke(ctx: Context) -> int:
    p = ctx.app.principals.revoke(ctx.args.name)
    ctx.emit(principal_doc(p), f"revoked {p.name}")
    return EXIT_OK
