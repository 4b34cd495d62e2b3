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
    ("an agent rule", '[["a", "", 60000000, 2, false]]', [("g/a", 60, 2)]),
    ("a goal rule and a lane rule", '[["", "", 0, 1, false], ["a", "x", 1000000, 3, false]]', [("g", 0, 1), ("g/a/x", 1, 3)]),
    ("PostgreSQL's spacing", '[["a", "x", 5000000, 1, false], \n ["", "", 1000000, 1, false]]', [("g/a/x", 5, 1), ("g", 1, 1)]),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in GOOD], ids=[c[0] for c in GOOD])
def test_rule_rows_decode(text: str | None, expected: list[tuple[str, int, int]]) -> None:
    refs = rule_rows(text, "g")
    assert [(str(r.scope), r.min_interval // timedelta(seconds=1), r.revision) for r in refs] == expected


BAD = [
    ("not JSON", "a/x/5/1"),
    ("an object", '{"agent": "a"}'),
    ("a number", "5"),
    ("bytes", b'[["a", "", 1, 1, false]]'),
    ("a row that is not an array", '["a", "", 1, 1, false]'),
    ("a short row (no across flag)", '[["a", "", 1, 1]]'),
    ("a long row", '[["a", "", 1, 1, false, 1]]'),
    ("a NULL across flag", '[["", "", 1, 1, null]]'),
    ("an across flag as text", '[["", "", 1, 1, "true"]]'),
    ("an across flag of 2", '[["", "", 1, 1, 2]]'),
    ("a real across flag", '[["", "", 1, 1, 1.0]]'),
    ("a NULL agent", '[[null, "", 1, 1, false]]'),
    ("a NULL automation", '[["a", null, 1, 1, false]]'),
    ("a numeric agent", '[[7, "", 1, 1, false]]'),
    ("a NULL floor", '[["a", "", null, 1, false]]'),
    ("a negative floor", '[["a", "", -5, 1, false]]'),
    ("a floor as text", '[["a", "", "5", 1, false]]'),
    ("a real floor", '[["a", "", 1.5, 1, false]]'),
    ("a boolean floor", '[["a", "", true, 1, false]]'),
    ("a floor beyond the cap", '[["a", "", 316224000000001, 1, false]]'),
    ("revision 0", '[["a", "", 1, 0, false]]'),
    ("a NULL revision", '[["a", "", 1, null, false]]'),
    ("a real revision", '[["a", "", 1, 1.0, false]]'),
    ("one bad rule among good ones", '[["", "", 1, 1, false], ["a", "", -1, 1, false]]'),
]


ACROSS = [
    ("PostgreSQL's true on a goal rule", '[["", "", 1, 1, true]]', True),
    ("SQLite's 1 on a goal rule", '[["", "", 1, 1, 1]]', True),
    ("SQLite's 0", '[["", "", 1, 1, 0]]', False),
    ("a hand edit's flag on an agent rule counts for nothing", '[["a", "", 1, 1, true]]', False),
]


@pytest.mark.parametrize(("text", "across"), [c[1:] for c in ACROSS], ids=[c[0] for c in ACROSS])
def test_the_across_flag_decodes_on_goal_rules_only(text: str, across: bool) -> None:
    assert [r.across_agents for r in rule_rows(text, "g")] == [across]


@pytest.mark.parametrize("text", [c[1] for c in BAD], ids=[c[0] for c in BAD])
def test_a_malformed_rules_fact_fails_closed(text: object) -> None:
    with pytest.raises(StoreUnavailable, match="malformed rule"):
        rule_rows(text, "g")


@pytest.mark.parametrize(
    "row",
    [("a", None, 1, 1, 0), ("a", "", b"\x01", 1, 0), ("a", "", 1, 1), ("", "", 1, 1, None), None],
    ids=["null automation", "blob floor", "short", "null across", "none"],
)
def test_a_malformed_bulk_rule_row_fails_closed(row: object) -> None:
    with pytest.raises(StoreUnavailable, match="malformed rule"):
        rule_row(row, "g")
