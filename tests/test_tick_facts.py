"""The tick's one read (``admission.tick_facts``), built from its declared facts.

Its rules fingerprint covers exactly the rules the admission decision reads for the lane: a rule
the decision reads changes it, a rule of another goal, agent or automation does not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

import pytest
from basics import T0

from floorgate.admission import FixedClock, Store
from floorgate.admission.tick_facts import read_tick_facts

from helpers import add_automation, floor


@dataclass(frozen=True)
class RuleCase:
    id: str
    path: str  # the rule written after the first read
    counts: bool  # whether the lane g/a/x reads it


CASES = [
    RuleCase("goal rule", "g", True),
    RuleCase("agent rule", "g/a", True),
    RuleCase("automation rule", "g/a/x", True),
    RuleCase("another goal", "h", False),
    RuleCase("another agent", "g/b", False),
    RuleCase("another automation of the agent", "g/a/y", False),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_rules_fingerprint_follows_the_rules_the_decision_reads(store: Store, case: RuleCase) -> None:
    clock = FixedClock(T0)
    automation = add_automation(store, clock, "x", goal="g", agent="a")
    add_automation(store, clock, "y", goal="g", agent="a")
    before = read_tick_facts(store, "x", "g", "a")
    assert before.revision == automation.revision and before.rules == (0, 0, 0)
    clock.advance(timedelta(seconds=1))
    floor(store, clock, case.path, timedelta(minutes=5))
    after = read_tick_facts(store, "x", "g", "a")
    assert (after.rules != before.rules) is case.counts, (before.rules, after.rules)
    if case.counts:
        assert after.rules[:2] == (1, 1)
