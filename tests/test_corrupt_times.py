"""Every stored time column refuses a malformed value: a strict read raises ``CorruptState``, and
the tolerant scans a host plans from report only the damaged automation and read the others."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from basics import T0, raw_sql

from floorgate.admission import Admission, Automations, FixedClock, Journal, Policies, Scope, Store, WakeState
from floorgate.admission.errors import CorruptState
from floorgate.admission.ticks import Tick, TickLog
from floorgate.scheduler.runtime._plan import next_eligible_tolerant

from helpers import add_automation, floor

IDS = ("good", "bad")


def _seed(store: Store) -> FixedClock:
    """Two automations with a rule, a start, a wake state, a tick and an unsettled turn each."""
    clock = FixedClock(T0)
    journal = Journal(store, clock)
    for x in IDS:
        add_automation(store, clock, x, agent=x)
        floor(store, clock, f"g/{x}/{x}", timedelta(hours=1))
        Automations(store, clock).save_wake_state(WakeState(automation_id=x, backoff_step=1, backoff_wake_at=T0))
        TickLog(store).append([Tick(automation_id=x, nominal_at=T0, actual_at=T0, decision="admitted", reason="eligible", host="h")])
        decision = Admission(store, clock).reserve(goal="g", agent=x, automation=x, turn_id=f"s-{x}", trigger_time=T0)
        assert decision.admitted
        Admission(store, clock).confirm(f"s-{x}")
        journal.begin(
            turn_id=f"t-{x}",
            automation_id=x,
            goal_id="g",
            agent_id=x,
            attempt=1,
            kind="automatic",
            manual_reason=None,
            runner_host="h:1",
            runner_pid=1,
            deadline=T0 + timedelta(hours=1),
            log_path=None,
        )
    return clock


def _automation_scan(store: Store) -> tuple[set[str], set[str]]:
    found, bad = Automations(store).scan()
    return set(found), set(bad)


def _wake_scan(store: Store) -> tuple[set[str], set[str]]:
    found, bad = Automations(store).wake_scan()
    return set(found), set(bad)


def _tick_scan(store: Store) -> tuple[set[str], set[str]]:
    found, bad = TickLog(store).last_nominal_scan()
    return set(found), set(bad)


def _turn_scan(store: Store) -> tuple[set[str], set[str]]:
    records, bad = Journal(store).unsettled_scan()
    return {r.automation_id for r in records}, {k.removeprefix("t-") for k in bad}


def _planner(store: Store) -> tuple[set[str], set[str]]:
    """The host's bulk planner: a lane it cannot plan is held, the others are planned."""
    found, bad = next_eligible_tolerant(Admission(store), [("g", x, x) for x in IDS])
    return {k[2] for k in found}, {k[2] for k in bad}


# (table, column, the row of "bad", a strict read of it, the tolerant scan, whether that scan reads the column)
Case = tuple[str, str, str, Callable[[Store], Any], Callable[[Store], tuple[set[str], set[str]]], bool]
CASES: list[Case] = [
    ("fg_automations", "created_at_us", "automation_id = 'bad'", lambda st: Automations(st).get("bad"), _automation_scan, True),
    ("fg_automations", "updated_at_us", "automation_id = 'bad'", lambda st: Automations(st).get("bad"), _automation_scan, True),
    ("fg_wake_state", "backoff_wake_us", "automation_id = 'bad'", lambda st: Automations(st).wake_state("bad"), _wake_scan, True),
    ("fg_wake_state", "updated_at_us", "automation_id = 'bad'", lambda st: Automations(st).wake_state("bad"), _wake_scan, True),
    ("fg_ticks", "nominal_us", "automation_id = 'bad'", lambda st: TickLog(st).recent("bad"), _tick_scan, True),
    ("fg_ticks", "actual_us", "automation_id = 'bad'", lambda st: TickLog(st).recent("bad"), _tick_scan, False),
    ("fg_turns", "started_at_us", "turn_id = 't-bad'", lambda st: Journal(st).get("t-bad"), _turn_scan, True),
    ("fg_turns", "deadline_us", "turn_id = 't-bad'", lambda st: Journal(st).get("t-bad"), _turn_scan, True),
    ("fg_turns", "settled_at_us", "turn_id = 't-bad'", lambda st: Journal(st).get("t-bad"), _turn_scan, True),
    ("fg_turns", "lease_expires_us", "turn_id = 't-bad'", lambda st: Journal(st).get("t-bad"), _turn_scan, True),
    ("fg_starts", "trigger_us", "turn_id = 's-bad'", lambda st: Admission(st).start("s-bad"), _planner, False),
    ("fg_starts", "anchor_us", "turn_id = 's-bad'", lambda st: Admission(st).start("s-bad"), _planner, True),
    ("fg_starts", "confirmed_at_us", "turn_id = 's-bad'", lambda st: Admission(st).start("s-bad"), _planner, False),
    ("fg_rules", "updated_at_us", "automation_id = 'bad'", lambda st: Policies(st).get(Scope.parse("g/bad/bad")), _planner, False),
    (
        "fg_rule_history",
        "changed_at_us",
        "automation_id = 'bad'",
        lambda st: Policies(st).history(Scope.parse("g/bad/bad")),
        _planner,
        False,
    ),
]


@pytest.mark.parametrize(("table", "column", "where", "strict", "scan", "scan_reads"), CASES, ids=[f"{c[0]}.{c[1]}" for c in CASES])
def test_a_malformed_time_is_corrupt_state_and_holds_only_its_automation(
    store: Store,
    table: str,
    column: str,
    where: str,
    strict: Callable[[Store], Any],
    scan: Callable[[Store], tuple[set[str], set[str]]],
    scan_reads: bool,
) -> None:
    _seed(store)
    strict(store)  # intact, it reads
    assert scan(store) == ({"good", "bad"}, set())
    # SQLite keeps any text a hand edit writes; a PostgreSQL BIGINT can only be out of range.
    garbage = "'not a time'" if store.dialect == "sqlite" else "-1"
    raw_sql(store, f"UPDATE {table} SET {column} = {garbage} WHERE {where}")
    with pytest.raises(CorruptState, match="malformed"):
        strict(store)
    found, bad = scan(store)
    assert found == ({"good"} if scan_reads else {"good", "bad"})
    assert bad == ({"bad"} if scan_reads else set())
