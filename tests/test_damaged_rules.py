"""A damaged rule row holds only the lanes it may cover, on the host's tick path too.

The tick path judges every automation's envelope precheck from one read of every rule
(``TickReader._prime`` -> ``EnvelopeGate.lane_rules``). One rule the decoder rejects (a negative,
NULL, non-integer or over-cap floor; a revision below 1; a malformed time) belongs to its own scope
and the scopes under it: a healthy lane of another goal is still admitted through the real tick,
while the damaged rule's own lanes are denied ``admission_state_unavailable`` (nothing written)
and admitted again once the row is repaired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from basics import T0, raw_sql
from test_hostile_state import relax

from floorgate.admission import Admission, FixedClock, Store, SystemClock, open_store
from floorgate.scheduler.app.envelope_gate import EnvelopeGate
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.runtime.host import RuntimeConfig

from helpers import add_automation, floor, marker_script, start_host, stop, wait_for

EVERY_15M = "DTSTART:20261201T090000Z RRULE:FREQ=MINUTELY;INTERVAL=15"
B_RULE = "goal_id = 'gb' AND agent_id = 'b' AND automation_id = ''"


@dataclass(frozen=True)
class Damage:
    id: str
    column: str
    value: str  # SQL
    relaxed: bool = False  # the column's NOT NULL dropped first (a hand rebuild)
    sqlite_only: bool = False  # PostgreSQL refuses the value by its column type


DAMAGES = [
    Damage("negative floor", "min_interval_us", "-5"),
    Damage("NULL floor", "min_interval_us", "NULL", relaxed=True),
    Damage("floor beyond the cap", "min_interval_us", "316224000000001"),
    Damage("floor beyond BIGINT range as text", "min_interval_us", "'9999999999999999999999'", sqlite_only=True),
    Damage("floor of the wrong type", "min_interval_us", "'lots'", sqlite_only=True),
    Damage("floor as a real", "min_interval_us", "1.5", sqlite_only=True),
    Damage("floor as a BLOB", "min_interval_us", "x'00ff'", sqlite_only=True),
    Damage("revision as a BLOB", "revision", "x'01'", sqlite_only=True),
    Damage("revision 0", "revision", "0"),
    Damage("NULL revision", "revision", "NULL", relaxed=True),
    Damage("updated_at of the wrong type", "updated_at_us", "'yesterday'", sqlite_only=True),
]


def _damaged_store(store: Store, damage: Damage) -> Store:
    """Goal ga (healthy, no floor), goal gb with an agent rule; then the damage to gb's rule."""
    clock = FixedClock(T0)
    add_automation(store, clock, automation_id="xa", goal="ga", agent="a", schedule=EVERY_15M)
    add_automation(store, clock, automation_id="xb", goal="gb", agent="b", schedule=EVERY_15M)
    floor(store, clock, "gb/b", timedelta(minutes=1))
    if damage.relaxed:
        store = relax(store, "fg_rules", damage.column)
    raw_sql(store, f"UPDATE fg_rules SET {damage.column} = {damage.value} WHERE {B_RULE}")
    return store


@pytest.mark.parametrize("damage", DAMAGES, ids=[d.id for d in DAMAGES])
def test_a_damaged_rule_of_another_goal_does_not_stop_a_healthy_tick(store: Store, damage: Damage, tmp_path: Path) -> None:
    if damage.sqlite_only and store.dialect == "postgresql":
        pytest.skip("PostgreSQL's column type refuses the value")
    store = _damaged_store(store, damage)
    clock = FixedClock(T0)
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    host.sync()
    healthy = host.tick("xa")
    assert healthy.decision == "admitted", healthy
    damaged = host.tick("xb")
    assert (damaged.decision, damaged.reason) == ("denied", "admission_state_unavailable"), damaged
    starts = Admission(store, clock).starts(goal="gb")
    assert starts == []  # the damaged lane wrote no start
    # The bulk judgement keeps the healthy lane judged; the damaged one is judged each tick.
    lanes = EnvelopeGate(store, clock=clock).lane_rules([("ga", "a", "xa"), ("gb", "b", "xb"), ("gb", "c", "xc")])
    assert isinstance(lanes[("ga", "a", "xa")], list) and isinstance(lanes[("gb", "c", "xc")], list)
    assert not isinstance(lanes[("gb", "b", "xb")], list)
    # Repaired in place (no revision bump): the lane is admitted again, nothing was kept.
    if damage.column == "updated_at_us":
        raw_sql(store, f"UPDATE fg_rules SET updated_at_us = 0 WHERE {B_RULE}")
    else:
        raw_sql(store, f"UPDATE fg_rules SET min_interval_us = 60000000, revision = 1 WHERE {B_RULE}")
    clock.advance(timedelta(minutes=15))
    again = host.tick("xb")
    assert again.decision == "admitted", again


@dataclass(frozen=True)
class Cover:
    id: str
    where: str  # which rule of goal gb is damaged
    held: frozenset[str]  # the automations whose lanes it may cover


COVERS = [
    Cover("goal rule holds every lane of its goal", "agent_id = '' AND automation_id = ''", frozenset({"xb", "yb", "zc"})),
    Cover("agent rule holds its agent's lanes", "agent_id = 'b' AND automation_id = ''", frozenset({"xb", "yb"})),
    Cover("automation rule holds its lane alone", "agent_id = 'b' AND automation_id = 'xb'", frozenset({"xb"})),
]


@pytest.mark.parametrize("cover", COVERS, ids=[c.id for c in COVERS])
def test_a_damaged_rule_holds_its_scope_and_the_scopes_under_it(store: Store, cover: Cover, tmp_path: Path) -> None:
    clock = FixedClock(T0)
    for automation_id, goal, agent in (("xa", "ga", "a"), ("xb", "gb", "b"), ("yb", "gb", "b"), ("zc", "gb", "c")):
        add_automation(store, clock, automation_id=automation_id, goal=goal, agent=agent, schedule=EVERY_15M)
    for path in ("gb", "gb/b", "gb/b/xb"):
        floor(store, clock, path, timedelta(minutes=1))
    raw_sql(store, f"UPDATE fg_rules SET min_interval_us = -5 WHERE goal_id = 'gb' AND {cover.where}")
    host = Floorgate(store, clock=clock).host_runtime(RuntimeConfig(state_dir=tmp_path / "state"))
    host.sync()
    decided = {automation_id: host.tick(automation_id) for automation_id in ("xa", "xb", "yb", "zc")}
    held = {a for a, t in decided.items() if (t.decision, t.reason) == ("denied", "admission_state_unavailable")}
    admitted = {a for a, t in decided.items() if t.decision == "admitted"}
    assert held == cover.held, decided
    assert admitted == {"xa", "xb", "yb", "zc"} - cover.held, decided


def test_a_host_process_keeps_starting_a_healthy_lane_beside_a_damaged_rule(db_url: str, tmp_path: Path) -> None:
    """A real ``floorgate run``: goal gb's rule is damaged; goal ga's automation, ticking every
    second, keeps starting (as many starts as asked for), and gb's is held and never starts."""
    clock = SystemClock()
    marker = tmp_path / "ga.launches"
    with open_store(db_url) as store:
        add_automation(store, clock, automation_id="xa", goal="ga", agent="a", schedule="every 1s", script=marker_script(marker))  # type: ignore[arg-type]
        add_automation(store, clock, automation_id="xb", goal="gb", agent="b", schedule="every 1s")  # type: ignore[arg-type]
        floor(store, clock, "ga/a", timedelta(seconds=1))  # type: ignore[arg-type]  (so ga's starts are recorded)
        floor(store, clock, "gb/b", timedelta(seconds=1))  # type: ignore[arg-type]
        raw_sql(store, f"UPDATE fg_rules SET min_interval_us = -5 WHERE {B_RULE}")
    host = start_host(db_url, tmp_path / "state")

    def count(sql: str) -> int:
        with open_store(db_url) as store:
            return int(raw_sql(store, sql)[0][0])

    try:
        wait_for(
            lambda: count("SELECT COUNT(*) FROM fg_starts WHERE goal_id = 'ga'") >= 3 or host.poll() is not None,
            timeout=60,
            what="three starts of ga",
        )
    finally:
        code, log = stop(host)
    assert code == 0, log[-2000:]
    assert count("SELECT COUNT(*) FROM fg_starts WHERE goal_id = 'ga'") >= 3, log[-3000:]
    assert "xb: held: lane gb/b/xb: malformed rule at gb/b" in log, log[-3000:]  # the planner holds the damaged lane
    assert count("SELECT COUNT(*) FROM fg_starts WHERE goal_id = 'gb'") == 0
    assert count("SELECT COUNT(*) FROM fg_ticks WHERE automation_id = 'xa' AND decision = 'error'") == 0, log[-2000:]
