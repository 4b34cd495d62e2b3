"""README's two lists of admission reasons are the decision table's, not a hand-kept copy.

README.md says a denial "returns one reason from a closed set (`...`)" and that "Admissions report
`...`". Both lists are read from the prose and compared with ``CHECKS``: the reasons of its deny
rows and of its admitting rows. A new check row (or a renamed reason) turns this red until README
names it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from floorgate.admission.decide.checks import CHECKS, Outcome

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
PROSE = re.sub(r"\s+", " ", README)


def _listed(after: str, until: str) -> list[str]:
    """The backticked names in README's prose between ``after`` and the next ``until``."""
    start = PROSE.index(after) + len(after)
    return re.findall(r"`([a-z_]+)`", PROSE[start : PROSE.index(until, start)])


def _reasons(*outcomes: Outcome) -> set[str]:
    return {check.reason.value for check in CHECKS if check.outcome in outcomes}


@pytest.mark.parametrize(
    ("listed", "outcomes"),
    [
        pytest.param(("returns one reason from a closed set", "with `next_eligible_at`"), (Outcome.DENY,), id="denials"),
        pytest.param(("Admissions report", "."), (Outcome.INSERT, Outcome.ADMIT), id="admissions"),
    ],
)
def test_readme_lists_the_decision_tables_reasons(listed: tuple[str, str], outcomes: tuple[Outcome, ...]) -> None:
    names = _listed(*listed)
    assert len(names) == len(set(names)), f"README repeats a reason: {names}"
    assert set(names) == _reasons(*outcomes)
