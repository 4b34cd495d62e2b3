"""The ``rules`` fact's decoder: rules travel as rows (a JSON array of ``RULE_COLUMNS`` arrays per
lane, or the bulk read's columns), and any value floorgate would not have written fails closed."""

from __future__ import annotations

from datetime import timedelta

import pytest

from floorgate.admission._facts import rule_row, rule_rows
from floorgate.admission.errors import StoreUnavailable

GOOD = [
    ("no rule (PostgreSQL's empty aggregate)", None, []),
    ("no rule (SQLite's empty array)", "[]", []),
    ("an agent rule", '[["a", "", 60000000, 2]]', [("g/a", 60, 2)]),
    ("a goal rule and a lane rule", '[["", "", 0, 1], ["a", "x", 1000000, 3]]', [("g", 0, 1), ("g/a/x", 1, 3)]),
    ("PostgreSQL's spacing", '[["a", "x", 5000000, 1], \n ["", "", 1000000, 1]]', [("g/a/x", 5, 1), ("g", 1, 1)]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_rule_rows_decode(text: str | None, expected: list[tuple[str, int, int]]) -> None:
    refs = rule_rows(text, "g")
    assert [(str(r.scope), r.min_interval // timedelta(seconds=1), r.revision) for r in refs] == expected


BAD = [
    ("not JSON", "a/x/5/1"),
    ("an object", '{"agent": "a"}'),
    ("a number", "5"),
    ("bytes", b'[["a", "", 1, 1]]'),
    ("a row that is not an array", '["a", "", 1, 1]'),
    ("a short row", '[["a", "", 1]]'),
    ("a long row", '[["a", "", 1, 1, 1]]'),
    ("a NULL agent", '[[null, "", 1, 1]]'),
    ("a NULL automation", '[["a", null, 1, 1]]'),
    ("a numeric agent", '[[7, "", 1, 1]]'),
    ("a NULL floor", '[["a", "", null, 1]]'),
    ("a negative floor", '[["a", "", -5, 1]]'),
    ("a floor as text", '[["a", "", "5", 1]]'),
    ("a real floor", '[["a", "", 1.5, 1]]'),
    ("a boolean floor", '[["a", "", true, 1]]'),
    ("a floor beyond the cap", '[["a", "", 316224000000001, 1]]'),
    ("revision 0", '[["a", "", 1, 0]]'),
    ("a NULL revision", '[["a", "", 1, null]]'),
    ("a real revision", '[["a", "", 1, 1.0]]'),
    ("one bad rule among good ones", '[["", "", 1, 1], ["a", "", -1, 1]]'),
]


@pytest.mark.parametrize("text", [c[1] for c in BAD], ids=[c[0] for c in BAD])
def test_a_malformed_rules_fact_fails_closed(text: object) -> None:
    with pytest.raises(StoreUnavailable, match="malformed rule"):
        rule_rows(text, "g")


@pytest.mark.parametrize(
    "row", [("a", None, 1, 1), ("a", "", b"\x01", 1), ("a", "", 1), None], ids=["null automation", "blob floor", "short", "none"]
)
def test_a_malformed_bulk_rule_row_fails_closed(row: object) -> None:
    with pytest.raises(StoreUnavailable, match="malformed rule"):
        rule_row(row, "g")
