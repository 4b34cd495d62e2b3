"""``floorgate init``: create (or migrate) the store, and the one way to start over on an empty file."""

from __future__ import annotations

import argparse

from floorgate.admission import open_store

from ...app.owner_gate import Access
from ..context import EXIT_OK, Context, writes


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="create the store at --db (an existing empty file is initialized: nothing there survives); an existing store is kept",
    )
    writes(p, _init, Access.OPERATE)


def _init(ctx: Context) -> int:
    store = open_store(getattr(ctx.args, "db", None), initialize=True)
    try:
        ctx.emit({"store": store.safe_url, "initialized": True}, f"store ready at {store.safe_url}")
    finally:
        store.close()
    return EXIT_OK
