"""Column types that decode and check stored values once, for every repository.

``UtcMicros``: an aware UTC datetime kept as integer microseconds since the epoch (exact on
every backend). Writing takes aware datetimes only; reading a value that is not an integer in
range (SQLite keeps whatever a hand edit wrote) raises ``CorruptState``, so no repository
hand-writes that check, and damaged time never becomes a time.

A strict read (``select(table)``) decodes every row as it is fetched, so one bad value fails the
whole read. A tolerant scan, which must report the damaged row and keep the others, selects the
columns undecoded (``raw_columns``) and decodes row by row (``decode_row``) with the same decoder.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from types import SimpleNamespace
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict
from sqlalchemy import BigInteger, Table, type_coerce
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeDecorator

from .clock import aware_utc, from_us, to_us
from .errors import CorruptState

# Beyond year 9000 a stored time is corrupt, not a time to add floors to.
MAX_US = 221_845_392_000_000_000


def decode_us(value: object) -> datetime:
    """A stored microsecond time as an aware UTC datetime; anything else raises ``CorruptState``."""
    if type(value) is not int or not 0 <= value < MAX_US:
        raise CorruptState(f"a stored time is malformed: {value!r}")
    return from_us(value)


@contextmanager
def stored(what: str) -> Iterator[None]:
    """Decode stored rows into models: a value floorgate never writes (a NULL, a wrong type, an
    unknown enum value, bad JSON) raises ``CorruptState`` naming ``what``, in one line; so a hand
    edit fails closed at the store boundary instead of escaping as a validation error."""
    try:
        yield
    except CorruptState:
        raise
    except (ValueError, TypeError, OverflowError, AttributeError, KeyError) as exc:  # pydantic's ValidationError is a ValueError
        errors = getattr(exc, "errors", None)
        if callable(errors):
            first = errors()[0]
            detail = f"{'.'.join(map(str, first.get('loc', ()))) or 'value'}: {first.get('msg')} ({first.get('input')!r})"
        else:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise CorruptState(f"{what} is malformed in the store: {detail}") from None


class UtcMicros(TypeDecorator[datetime]):
    """Aware UTC datetime <-> BIGINT microseconds since the epoch."""

    impl = BigInteger
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> int | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"a stored time must be an aware datetime, not {type(value).__name__}")
        return to_us(aware_utc(value, "time"))

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        return None if value is None else decode_us(value)


def raw_columns(table: Table) -> list[ColumnElement[Any]]:
    """Every column of ``table``, its ``UtcMicros`` ones left undecoded (for ``decode_row``)."""
    return [type_coerce(c, BigInteger).label(c.name) if isinstance(c.type, UtcMicros) else c for c in table.c]


def decode_row(table: Table, row: Any) -> SimpleNamespace:
    """One row read with ``raw_columns``, its times decoded as a strict read would; a malformed
    value raises ``CorruptState`` naming the column."""
    out = row._asdict()
    for name in _time_columns(table):
        if out.get(name) is not None:
            try:
                out[name] = decode_us(out[name])
            except CorruptState as exc:
                raise CorruptState(f"{name}: {exc}") from None
    return SimpleNamespace(**out)


@cache
def _time_columns(table: Table) -> tuple[str, ...]:
    return tuple(c.name for c in table.c if isinstance(c.type, UtcMicros))


_FIELD_SETS: dict[frozenset[str], set[str]] = {}
_M = TypeVar("_M", bound=BaseModel)


def shared_fields(model: _M) -> _M:
    """``model`` with its set of explicitly set field names shared with every other model that set
    the same names: a set of ten names is ~700 bytes, one per model, and a readback of fifty thousand
    automations builds three models each. Only for frozen models: pydantic adds to that set only
    when a field is assigned (which a frozen model refuses) and copies it in ``model_copy``."""
    names = model.__pydantic_fields_set__
    shared = _FIELD_SETS.setdefault(frozenset(names), names)
    if shared is not names:
        object.__setattr__(model, "__pydantic_fields_set__", shared)
    return model


class Frozen(BaseModel):
    """A record that never changes once built (a frozen pydantic model)."""

    model_config = ConfigDict(frozen=True)


def from_row(model: type[_M], table: Table, row: Any, **given: Any) -> _M:
    """``model`` decoded from a stored ``row`` of ``table`` (a result row or ``decode_row``'s
    namespace): each field not ``given`` is read from the column of its name, or of its name and
    ``_us`` (a time). A field with neither column must be ``given``: nothing is left to a default,
    so a column renamed or dropped fails here (``TypeError``) instead of decoding a default."""
    values = getattr(row, "_mapping", None)
    if values is None:
        values = vars(row)
    columns, unmapped = _field_columns(model, table)
    if unmapped and not unmapped <= given.keys():
        missing = ", ".join(sorted(unmapped - given.keys()))
        raise TypeError(f"{model.__name__} has no column in {table.name} for {missing}: pass it to from_row")
    return model(**{field: values[column] for field, column in columns if field not in given}, **given)


def to_row(record: BaseModel, table: Table, **given: Any) -> dict[str, Any]:
    """The values of ``table``'s columns that store ``record`` (the inverse of ``from_row``): each
    field in the column of its name, or of its name and ``_us`` (a time); a field with neither
    column is left out, and ``given`` columns are set as given (a field stored otherwise)."""
    columns, _unmapped = _field_columns(type(record), table)
    values = {column: getattr(record, field) for field, column in columns if column not in given}
    values.update(given)
    return values


@cache
def _field_columns(model: type[BaseModel], table: Table) -> tuple[tuple[tuple[str, str], ...], frozenset[str]]:
    """Each field of ``model`` with the column of ``table`` it is read from, and the fields that
    have none."""
    have = set(table.c.keys())
    out = []
    unmapped = set()
    for field in model.model_fields:
        column = next((c for c in (field, field + "_us") if c in have), None)
        if column is None:
            unmapped.add(field)
        else:
            out.append((field, column))
    return tuple(out), frozenset(unmapped)
