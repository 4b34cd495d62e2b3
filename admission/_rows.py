"""Rows written from records: the inverse of ``_types.from_row``, so a repository that stores a
record whose fields are its table's columns writes them from the record, not name by name."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlalchemy import Table

from ._types import _field_columns


def to_row(record: BaseModel, table: Table, **given: Any) -> dict[str, Any]:
    """The values of ``table``'s columns that store ``record``: each field in the column of its
    name, or of its name and ``_us`` (a time), as ``from_row`` reads them back; a field with
    neither column is left out, and ``given`` columns are set as given (a field stored otherwise)."""
    values = {column: getattr(record, field) for field, column in _field_columns(type(record), table) if column not in given}
    values.update(given)
    return values
