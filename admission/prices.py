"""Owner-set prices per million tokens, by model: what a USD budget counts usage at when its cost
was not reported (``usage.usage_of``)."""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from . import _schema as s
from ._repository import Repository
from ._types import Frozen, from_row
from .clock import read_clock
from .errors import CorruptState, InvalidInput, ReductionNotAuthorized, RevisionConflict
from .policies import check_owner_ref
from .windows import format_usd, micros_to_usd, usd_to_micros

_MAX_PRICE_MICROS = 10_000 * 1_000_000  # $10,000 per million tokens: beyond it, a typo


class Price(Frozen):
    """An owner-set price per million tokens for a model (for usage whose cost is not reported)."""

    model: str
    usd_per_mtok_micros: int | None  # None: removed
    revision: int
    owner_ref: str
    updated_at: datetime


_PRICES = select(s.model_prices.c.model, s.model_prices.c.usd_per_mtok_micros)  # built once


def read_prices(conn: Connection) -> dict[str, int]:
    """Every set price, micro-dollars per million tokens by model; a damaged one raises ``CorruptState``."""
    return prices_of(conn.execute(_PRICES))


def prices_of(rows: Iterable[Any]) -> dict[str, int]:
    """``read_prices`` from the price rows (``model``, ``usd_per_mtok_micros``), however read."""
    out: dict[str, int] = {}
    for row in rows:
        if row.usd_per_mtok_micros is None:
            continue
        if type(row.usd_per_mtok_micros) is not int or not 0 <= row.usd_per_mtok_micros <= _MAX_PRICE_MICROS:
            raise CorruptState(f"malformed price of model {row.model!r}: {row.usd_per_mtok_micros!r}")
        out[row.model] = row.usd_per_mtok_micros
    return out


def check_model(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or not value.isprintable() or value != value.strip():
        raise InvalidInput("model", "a model name of 1..128 printable characters")
    return value


class Prices(Repository):
    """Owner-set prices per million tokens, by model: exact-revision compare-and-set; lowering or
    removing a price (which lets a USD budget admit more) needs ``allow_reduction``."""

    def set(self, model: str, usd_per_mtok: Any, *, expected_revision: int, owner_ref: str, allow_reduction: bool = False) -> Price:
        """Set (a ``Decimal`` amount) or remove (None) the price of ``model``."""
        check_model(model)
        check_owner_ref(owner_ref)
        if type(expected_revision) is not int or expected_revision < 0:
            raise InvalidInput("expected_revision", "pass the revision you read (0 when no price is set)")
        micros = usd_to_micros(usd_per_mtok) if usd_per_mtok is not None else None
        if micros is not None and micros > _MAX_PRICE_MICROS:
            raise InvalidInput("--usd-per-mtok", "above the cap of 10000 USD per million tokens; check for a typo")
        p = s.model_prices
        now = read_clock(self.clock)
        with self.store.write() as conn:
            row = conn.execute(select(p).where(p.c.model == model)).first()
            current = row.revision if row is not None else 0
            if current != expected_revision:
                raise RevisionConflict(f"price of {model}", expected_revision, current)
            before = row.usd_per_mtok_micros if row is not None else None
            if micros is None and before is None:  # nothing to remove: a revision would record a change that is none
                raise InvalidInput("--usd-per-mtok", f"{model} has no price to remove (0 removes a price; give one above 0 to set it)")
            if before is not None and (micros is None or micros < before) and not allow_reduction:
                after = format_usd(micros_to_usd(micros)) if micros is not None else "none"
                raise ReductionNotAuthorized(
                    f"price of {model}", "", "", what=f"lowering the price of {model} ({format_usd(micros_to_usd(before))} -> {after})"
                )
            values = dict(usd_per_mtok_micros=micros, revision=current + 1, owner_ref=owner_ref, updated_at_us=now)
            if row is None:
                conn.execute(insert(p).values(model=model, **values))
            else:
                done = conn.execute(update(p).where(p.c.model == model, p.c.revision == current).values(**values))
                if done.rowcount != 1:
                    raise RevisionConflict(f"price of {model}", expected_revision, current)
        return Price(model=model, usd_per_mtok_micros=micros, revision=current + 1, owner_ref=owner_ref, updated_at=now)

    def list(self) -> builtins.list[Price]:
        p = s.model_prices
        with self.store.read() as conn:
            rows = conn.execute(select(p).order_by(p.c.model)).all()
            read_prices(conn)  # a damaged price fails the readback, never shows as a price
        return [from_row(Price, s.model_prices, r) for r in rows]


def cost_micros(tokens: int, price_micros_per_mtok: int) -> int:
    """Tokens at a price per million tokens, rounded up to a whole micro-dollar (conservative)."""
    return math.ceil(tokens * price_micros_per_mtok / 1_000_000)


def estimate_price(model: str | None, prices: dict[str, int]) -> int | None:
    """The price an estimate of ``model`` is held at: the model's, and for an estimate without a
    model (a hook's lane or a bare ``admit``, whose model is known only once its usage is reported)
    the highest price the owner set, a bound no model priced here exceeds (None: no price applies).
    Reported usage is never priced this way: without its model's price it stays unpriced."""
    if model is None:
        return max(prices.values()) if prices else None
    return prices.get(model)
