"""A pure model of floors and admission, checked against the real store on both backends under
random interleavings of configure (raise, reduce, at goal, agent or automation scope), reserve,
resume, confirm, crash (a writer that takes the lock, writes a start and dies without committing)
and clock moves forwards and backwards.

After every step the store's decision, its readback (status and next eligible time of every lane)
and its start rows equal the model's; no two starts of one agent are ever inside the floor that
was in force when the later one was admitted. Derandomized, on a fixed budget, so CI is stable.
Each example works under its own goal id, so the examples share one store without seeing each other.
"""

from __future__ import annotations

import itertools
import sqlite3
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from basics import T0, psycopg_dsn
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from floorgate.admission import Admission, FixedClock, Policies, Reason, Scope, Store
from floorgate.admission import _locks as locks
from floorgate.admission.clock import from_us, to_us
from floorgate.admission.store import lock_id

AGENTS = ("a1", "a2")
LANES = (("a1", "x1"), ("a1", "x2"), ("a2", "x1"))
SCOPES = ((None, None), ("a1", None), ("a2", None), ("a1", "x1"), ("a1", "x2"), ("a2", "x1"))
MINUTE = 60_000_000
FLOORS = st.sampled_from([0, 5, 30, 60, 120]).map(lambda m: m * MINUTE)


@dataclass
class Start:
    turn_id: str
    agent: str
    lane: str
    trigger_us: int
    anchor_us: int
    phase: str = "reserved"


@dataclass
class Model:
    """What admission should decide, in plain Python: no store, no SQL."""

    rules: dict[tuple[str | None, str | None], tuple[int, int]] = field(default_factory=dict)  # scope -> (us, revision)
    starts: dict[str, Start] = field(default_factory=dict)

    def floors(self, agent: str, lane: str) -> tuple[int, int]:
        """(agent floor, lane floor): the widest rule wins; an automation rule counts from the lane."""
        agent_floor = max([us for (a, x), (us, _) in self.rules.items() if x is None and a in (None, agent)], default=0)
        lane_floor = self.rules.get((agent, lane), (0, 0))[0]
        return agent_floor, lane_floor

    def next_eligible(self, agent: str, lane: str) -> int | None:
        agent_floor, lane_floor = self.floors(agent, lane)
        agent_anchor = max((s.anchor_us for s in self.starts.values() if s.agent == agent), default=None)
        lane_anchor = max((s.anchor_us for s in self.starts.values() if (s.agent, s.lane) == (agent, lane)), default=None)
        candidates = []
        if agent_anchor is not None and agent_floor:
            candidates.append(agent_anchor + agent_floor)
        if lane_anchor is not None and lane_floor:
            candidates.append(lane_anchor + lane_floor)
        return max(candidates) if candidates else None

    def decide(self, turn_id: str, agent: str, lane: str, trigger_us: int, now_us: int) -> Reason:
        start = self.starts.get(turn_id)
        if start is not None:
            same = (start.agent, start.lane) == (agent, lane)
            return Reason.RESUMED if start.phase == "reserved" and same else Reason.TURN_ALREADY_STARTED
        if self.floors(agent, lane) == (0, 0):
            return Reason.NO_RULE
        agent_anchor = max((s.anchor_us for s in self.starts.values() if s.agent == agent), default=None)
        ours = [s for s in self.starts.values() if (s.agent, s.lane) == (agent, lane)]
        next_us = self.next_eligible(agent, lane)
        if agent_anchor is not None and now_us < agent_anchor:
            return Reason.CLOCK_ROLLBACK
        if any(s.trigger_us == trigger_us for s in ours):
            return Reason.DUPLICATE_TRIGGER
        if ours and trigger_us < max(s.trigger_us for s in ours):
            return Reason.STALE_TRIGGER
        if next_us is not None and now_us < next_us:
            return Reason.INTERVAL_WAIT
        return Reason.ELIGIBLE


class AdmissionMachine(RuleBasedStateMachine):
    store: Store  # set by the test before the machine runs

    def __init__(self) -> None:
        super().__init__()
        self.goal = f"m{uuid.uuid4().hex[:10]}"
        self.clock = FixedClock(T0)
        self.admission = Admission(self.store, self.clock)
        self.policies = Policies(self.store, self.clock)
        self.model = Model()
        self.turns = 0
        self.admitted_under: dict[str, int] = {}  # turn id -> the agent floor in force when admitted

    @initialize(scope=st.sampled_from(SCOPES), us=FLOORS.filter(bool))
    def start_with_a_floor(self, scope: tuple[str | None, str | None], us: int) -> None:
        assert self.admission.starts(goal=self.goal) == []
        self.configure(scope, us)

    # -- steps -----------------------------------------------------------------------------------
    @rule(scope=st.sampled_from(SCOPES), us=FLOORS)
    def configure(self, scope: tuple[str | None, str | None], us: int) -> None:
        current, revision = self.model.rules.get(scope, (0, 0))
        agent, lane = scope
        path = "/".join(p for p in (self.goal, agent, lane) if p is not None)
        self.policies.configure(
            Scope.parse(path),
            min_interval=timedelta(microseconds=us),
            expected_revision=revision,
            owner_ref="owner",
            allow_reduction=us < current,
        )
        self.model.rules[scope] = (us, revision + 1)

    @rule(lane=st.sampled_from(LANES), trigger_offset=st.sampled_from([-90, -1, 0, 0, 0, 1]))
    def reserve(self, lane: tuple[str, str], trigger_offset: int) -> None:
        self.turns += 1
        self._reserve(f"{self.goal}-t{self.turns}", lane, to_us(self.clock.now()) + trigger_offset * MINUTE)

    @precondition(lambda self: any(s.phase == "reserved" for s in self.model.starts.values()))
    @rule(data=st.data(), move=st.booleans())
    def reserve_again(self, data: st.DataObject, move: bool) -> None:
        """A host retrying a reservation it never confirmed (or the same turn id in another lane)."""
        start = data.draw(
            st.sampled_from(sorted((s for s in self.model.starts.values() if s.phase == "reserved"), key=lambda s: s.turn_id))
        )
        lane = data.draw(st.sampled_from(LANES)) if move else (start.agent, start.lane)
        self._reserve(start.turn_id, lane, start.trigger_us)

    @precondition(lambda self: bool(self.model.starts))
    @rule(data=st.data())
    def confirm(self, data: st.DataObject) -> None:
        start = data.draw(st.sampled_from(sorted(self.model.starts.values(), key=lambda s: s.turn_id)))
        self.admission.confirm(start.turn_id)
        start.phase = "confirmed"

    @rule(agent=st.sampled_from(AGENTS))
    def crash(self, agent: str) -> None:
        """A writer takes the agent's lock, writes a start, and dies before its commit."""
        now = to_us(self.clock.now())
        # A trigger no real reservation uses (the lane's unique trigger index would refuse it).
        values = (f"crash-{uuid.uuid4().hex[:8]}", self.goal, agent, "x1", now - 365 * 24 * 60 * MINUTE, now)
        insert = "INSERT INTO fg_starts (turn_id, goal_id, agent_id, automation_id, trigger_us, anchor_us, phase, kind) VALUES "
        if self.store.dialect == "sqlite":
            conn = sqlite3.connect(self.store.engine.url.database, isolation_level=None)
            try:
                conn.execute("BEGIN IMMEDIATE")
                conn.execute(insert + "(?, ?, ?, ?, ?, ?, 'reserved', 'automatic')", values)
            finally:
                conn.close()  # no commit: the transaction dies with its connection
        else:
            import psycopg

            pg = psycopg.connect(psycopg_dsn(self.store.url))
            try:
                pg.execute("SELECT pg_advisory_xact_lock(%s)", (lock_id(locks.agent(self.goal, agent)),))
                pg.execute(insert + "(%s, %s, %s, %s, %s, %s, 'reserved', 'automatic')", values)
            finally:
                pg.close()

    @rule(minutes=st.sampled_from([-61, -5, 1, 4, 30, 59, 60, 121]))
    def move_clock(self, minutes: int) -> None:
        self.clock.advance(timedelta(minutes=minutes))

    def _reserve(self, turn_id: str, lane: tuple[str, str], trigger_us: int) -> None:
        agent, automation = lane
        now = to_us(self.clock.now())
        expected = self.model.decide(turn_id, agent, automation, trigger_us, now)
        decision = self.admission.reserve(
            goal=self.goal, agent=agent, automation=automation, turn_id=turn_id, trigger_time=from_us(trigger_us)
        )
        assert decision.reason == expected, (decision, self.model)
        if expected == Reason.ELIGIBLE:
            assert decision.admitted
            self.model.starts[turn_id] = Start(turn_id, agent, automation, trigger_us, now)
            self.admitted_under[turn_id] = self.model.floors(agent, automation)[0]
        elif expected == Reason.RESUMED:
            assert decision.admitted and to_us(decision.anchor_at) == self.model.starts[turn_id].anchor_us  # type: ignore[arg-type]
        else:
            assert decision.admitted is (expected == Reason.NO_RULE)

    # -- what must hold after every step ----------------------------------------------------------
    @invariant()
    def the_store_holds_the_model_s_starts(self) -> None:
        stored = {
            s.turn_id: (s.agent_id, s.automation_id, to_us(s.trigger_time), to_us(s.anchor_at), s.phase.value)
            for s in self.admission.starts(goal=self.goal, limit=500)
        }
        assert stored == {t: (s.agent, s.lane, s.trigger_us, s.anchor_us, s.phase) for t, s in self.model.starts.items()}

    @invariant()
    def readback_agrees_with_the_model(self) -> None:
        for agent, lane in LANES:
            readback = self.admission.eligibility(self.goal, agent, lane)
            expected = self.model.next_eligible(agent, lane)
            assert (to_us(readback.next_eligible_at) if readback.next_eligible_at else None) == expected, (agent, lane, readback)
        planned = self.admission.next_eligible_many([(self.goal, a, x) for a, x in LANES])
        assert {k[1:]: (to_us(v) if v else None) for k, v in planned.items()} == {(a, x): self.model.next_eligible(a, x) for a, x in LANES}

    @invariant()
    def never_two_admissions_inside_a_floor(self) -> None:
        for agent in AGENTS:
            ours = sorted((s for s in self.model.starts.values() if s.agent == agent), key=lambda s: s.anchor_us)
            for earlier, later in itertools.pairwise(ours):
                assert later.anchor_us - earlier.anchor_us >= self.admitted_under[later.turn_id], (earlier, later)


@pytest.mark.parametrize(
    "budget", [settings(max_examples=40, stateful_step_count=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))]
)
def test_the_store_decides_as_the_model_does(store: Store, budget: settings) -> None:
    AdmissionMachine.store = store
    AdmissionMachine.TestCase.settings = budget
    AdmissionMachine.TestCase().runTest()
