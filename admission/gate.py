"""Atomic two-phase admission: ``reserve`` before a host launch, ``confirm`` once it is journaled.

The decision is made twice when it may admit: first in a plain read (so a denial takes no lock
and writes nothing), then again serialized per agent, where the start is inserted. Only that
second evaluation can admit. On PostgreSQL both happen server-side in one statement
(``RESERVE_SQL``, migration 0017: plain SQL for a denial, the locked ``fg_admit`` only when the
facts may admit; one round trip, one commit when it admits), which returns the facts it decided
on: ``_rule._evaluate`` explains them, the same function that decides on SQLite, and a statement
whose insert disagrees with it is reported ``state_unavailable`` (tests/test_admission_parity.py
holds the two rules together). Managed turns (``journal`` / ``on_admit``) run it inside their unit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import NamedTuple

from sqlalchemy import BigInteger, and_, case, func, or_, select, type_coerce

from . import _limit_guard as limit_guard
from . import _limit_read as limit_read
from . import _locks as locks
from . import _schema as s
from ._facts import (
    CONFIRM_SQL,
    StartRow,
    goal_anchors,
    read_facts,
    read_facts_many,
    start_from_row,
    stored_max,
)
from ._limit_check import check_lane, checked, held_estimate, hold_estimate, judged
from ._repository import Repository
from ._reserving import _admit, _admit_read, _reserve_pg, _unchecked
from ._rule import (
    _ADMITTED,
    _ADMITTING,
    _NO_TRIGGER,
    _NO_TURN,
    _US,
    _decision,
    _eligibility,
    _request,
    _unavailable,
)
from ._types import MAX_US, raw_columns
from .alerts import alerts_due, record_alerts
from .budgets import LimitState
from .clock import from_us, read_clock, to_us
from .decide.checks import Request as _Request
from .decide.checks import Verdict as _Verdict
from .decide.checks import evaluate as _evaluate
from .decide.facts import RULE_COLUMNS, Facts, limited_rule
from .decide.floors import floor_us, next_eligible_us
from .decisions import Confirmation, Decision, Eligibility, Reason, StartRecord
from .errors import CorruptState, InvalidInput, StoreUnavailable
from .journal import JournalEntry, write_entry
from .policies import RuleRef, combine, may_cover, rule_ref
from .scope import check_id, check_limit
from .store import LOCK_SQL, lock_id
from .unit import UnitOfWork


class _Plain(NamedTuple):
    """What a decision's plain read found (``Admission._plain``): the denial (None: it may admit),
    whether a count or budget counts across agents (None: the lane has none), and the known
    lane's read of its limits (None: not read in one statement)."""

    denied: Decision | None
    across: bool | None
    seen: limit_read.KnownRead | None


class _UnitNeeded(Exception):
    """A known lane's reservation needs the unit-of-work path (see ``Admission._reserve_known``)."""


LaneStates = Sequence[LimitState]  # a lane's limit states as a caller read them (``budgets.limit_states``)


class Admission(Repository):
    """The admission authority over one store."""

    # -- reserve ---------------------------------------------------------------------------
    def reserve(
        self,
        *,
        goal: str,
        agent: str,
        automation: str | None,
        turn_id: str,
        trigger_time: datetime,
        manual_reason: str | None = None,
        journal: JournalEntry | None = None,
        on_admit: Callable[[UnitOfWork], None] | None = None,
        unit: UnitOfWork | None = None,
        read_may_admit: bool = False,
    ) -> Decision:
        """Decide whether ``turn_id`` may start now; when admitted, the start is durably reserved.

        Denials write nothing. A reservation left unconfirmed (a crash before ``confirm``) is
        returned again, anchor unmoved, when the same ``turn_id`` reserves again. Invalid
        arguments raise ``InvalidInput``; an unreadable store denies with ``state_unavailable``.

        ``journal``: the managed turn's journal row, written in the same transaction as the start
        whenever the turn is admitted (so a reservation never exists without its journal row).
        ``TurnOwned`` (nothing written) when another runner already journaled this turn.

        ``on_admit``: the caller's part of the admitting unit of work, called with that unit once
        the start (and journal row) are written, only when the turn is admitted; what it writes
        (with repositories' ``unit=``) commits in the same commit as the reservation. An error it
        raises rolls the reservation back too (``StoreUnavailable`` denies as ``state_unavailable``;
        anything else propagates). ``unit``: admit in the caller's unit of work (a host's group of
        reservations, one commit), the lock taken there; the caller then rolls back what a refused
        admission left (run each in a savepoint). Without ``unit``, a managed reservation opens its
        own unit (one commit).

        ``read_may_admit``: the caller's ``denial`` of these arguments, just before, found that it
        may admit. Then on PostgreSQL a managed reservation in its own unit sends its locked
        statement at once instead of repeating that plain read: the statement reads and decides
        again under the agent's lock, so a start committed since is still seen. Only for a lane
        not known to have counts or budgets; one found limited meanwhile is decided the usual way.
        """
        req = _request(goal, agent, automation, turn_id, trigger_time, manual_reason)
        if journal is not None and journal.turn_id != req.turn_id:
            raise InvalidInput("journal", f"the journal entry is for turn {journal.turn_id!r}, not {req.turn_id!r}")
        managed = journal is not None or on_admit is not None
        pg = self.store.dialect == "postgresql"
        if read_may_admit and managed and unit is None and pg and limit_read.known(goal, agent, automation) is None:
            decision = self._reserve_managed(req, journal, on_admit)
            if decision is not None:
                return decision
        try:
            if pg and not managed and limit_read.known(goal, agent, automation) is None:
                # One round trip: it reads, locks only when it may admit (the goal too where its
                # floor counts across agents), decides, inserts.
                agent_lock, goal_lock = locks.agent(req.goal, req.agent), locks.goal(req.goal)
                verdict, now, facts = _reserve_pg(
                    self.store.autocommit, req, self.clock, agent_lock, lock_admitted=False, goal_lock=goal_lock
                )
                if not _unchecked(verdict, facts):
                    return _decision(req, now, verdict)
                denied, across, seen = self._limited_plain(req, _ADMITTING, facts, now)
            else:
                # A denial is decided from one plain read (``_plain``), taking no lock and writing nothing
                # (the clock read after it, so a start committed just before is never "in the future").
                # With a journal entry every admission writes (the journal row); without, only new starts.
                denied, across, seen = self._plain(req, _ADMITTING if journal is None else _ADMITTED)
            if denied is not None:
                return denied
            if across is not None:  # the lane has counts or budgets: checked again under the lock
                verdict, now = self._reserve_limited(req, journal, on_admit, unit, across=across, seen=seen)
                return _decision(req, now, verdict)
            lock_key = locks.agent(req.goal, req.agent)
            # Only an evaluation serialized per agent may admit.
            if not managed:
                with self.store.driver(write=True, lock_key=lock_key, unit=unit) as tx:
                    verdict, now = _admit(tx, req, self.clock, None)
            elif pg:
                with self._joined(unit) as joined:
                    verdict, now, _ = self._admit_pg(joined, req, journal, on_admit)
            else:
                with self._joined(unit) as joined, self.store.driver(write=True, lock_key=lock_key, unit=joined) as tx:
                    verdict, now = _admit(tx, req, self.clock, journal)
                    if on_admit is not None and verdict.reason in _ADMITTED:
                        on_admit(joined)
        except StoreUnavailable as exc:
            now = read_clock(self.clock)
            verdict = _Verdict(Reason.STATE_UNAVAILABLE, None, None, detail=f"{exc}; denied (fail closed)")
        return _decision(req, now, verdict)

    def _reserve_managed(
        self, req: _Request, journal: JournalEntry | None, on_admit: Callable[[UnitOfWork], None] | None
    ) -> Decision | None:
        """``reserve(read_may_admit=True)``: the locked statement without the plain read before it;
        None when the lane turned out to have counts or budgets unchecked (nothing was written:
        the caller decides it the usual way)."""
        try:
            with self.store.unit() as own:
                verdict, now, facts = self._admit_pg(own, req, journal, on_admit)
        except StoreUnavailable as exc:
            now = read_clock(self.clock)
            verdict = _Verdict(Reason.STATE_UNAVAILABLE, None, None, detail=f"{exc}; denied (fail closed)")
            return _decision(req, now, verdict)
        return None if _unchecked(verdict, facts) else _decision(req, now, verdict)

    def _admit_pg(
        self, joined: UnitOfWork, req: _Request, journal: JournalEntry | None, on_admit: Callable[[UnitOfWork], None] | None
    ) -> tuple[_Verdict, datetime, Facts]:
        """A managed reservation on PostgreSQL in ``joined``: fg_admit takes the agent's lock inside
        the unit (no separate lock statement), and the goal's before it where the goal's floor counts
        across agents (when the unit may still take it in order); the journal row and ``on_admit``
        follow an admission."""
        lock_key, goal_key = locks.agent(req.goal, req.agent), locks.goal(req.goal)
        with self.store.driver(write=True, lock_key=None, unit=joined) as tx:
            joined.check_order(lock_key)  # before fg_admit may take it
            goal_lock = goal_key if joined.in_order(goal_key) else None
            verdict, now, facts = _reserve_pg(tx, req, self.clock, lock_key, lock_admitted=True, goal_lock=goal_lock)
            if verdict.reason in _ADMITTED:
                if facts.goal_floor_us > 0 and goal_lock is not None:
                    joined.record_lock(goal_lock)  # fg_admit took it first
                joined.record_lock(lock_key)  # fg_admit ran, and took it
                if journal is not None and write_entry(tx, journal, to_us(now)):
                    joined.created(locks.turn(req.turn_id))  # linked to its mission in this unit, without a lock
            if on_admit is not None and verdict.reason in _ADMITTED:
                on_admit(joined)
        return verdict, now, facts

    def _reserve_limited(
        self,
        req: _Request,
        journal: JournalEntry | None,
        on_admit: Callable[[UnitOfWork], None] | None,
        unit: UnitOfWork | None,
        *,
        across: bool,
        seen: limit_read.KnownRead | None = None,
    ) -> tuple[_Verdict, datetime]:
        """The serialized decision of a lane with counts or budgets: under the agent's lock (the
        goal's when a limit counts across agents), its limits are checked, the decision taken with
        the result, and an admitted turn's estimate held, all in one transaction. ``seen``: the
        plain read the caller decided from, when it read the lane's limits in full."""
        lock_key = locks.agent(req.goal, req.agent)
        outer = locks.goal(req.goal) if across else lock_key
        pg = self.store.dialect == "postgresql"
        lane = limit_read.known(req.goal, req.agent, req.automation)
        if unit is None and journal is None and on_admit is None and lane is not None:
            try:
                return self._reserve_known(req, lane, lock_key, outer, seen)
            except _UnitNeeded:  # rolled back, nothing written: decided again in a unit below
                pass
        with self._joined(unit) as joined, self.store.driver(write=True, lock_key=outer, unit=joined) as tx:
            conn = joined.connection
            if across and pg and lock_key not in joined.held:  # the goal's lock first, then the agent's (the order every such lane takes)
                joined.record_lock(lock_key)  # refused out of order before it is taken
                tx.row(LOCK_SQL, {"k": lock_id(lock_key)})
            # PostgreSQL, a known lane's plain read at hand: the reservation guarded by it (holding
            # the estimate in the same statement) instead of reading the limits again here.
            guarded = None
            if pg and lane is not None and seen is not None:
                guarded = limit_guard.reserve_on(tx, req, self.clock, lane, lock_key, outer if across else None, seen)
            if guarded is not None:
                verdict, now, check = guarded
            else:
                check = limit_read.serialized_check(tx, conn, req, self.clock)
                if pg:
                    verdict, now, _ = _reserve_pg(
                        tx, req, self.clock, lock_key,
                        lock_admitted=True, goal_lock=outer if across else None, lim=check.code, states=check.states,
                    )  # fmt: skip
                else:
                    verdict, now = _admit(tx, req, self.clock, journal, lim=check.code, states=check.states)
            if pg and journal is not None and verdict.reason in _ADMITTED and write_entry(tx, journal, to_us(now)):
                joined.created(locks.turn(req.turn_id))
            if verdict.reason in _ADMITTING:
                if guarded is None:  # else held by the reserving statement
                    hold_estimate(tx, check, req.turn_id, req.goal, req.agent, req.automation, now)
                record_alerts(conn, check.states, now, req.turn_id)
            if on_admit is not None and verdict.reason in _ADMITTED:
                on_admit(joined)
        return verdict, now

    def _reserve_known(
        self, req: _Request, lane: limit_read.LaneLimits, lock_key: str, outer: str, seen: limit_read.KnownRead | None
    ) -> tuple[_Verdict, datetime]:
        """``_reserve_limited`` of a lane known limited, in a bare driver transaction (as a floor's
        reservation is: its locks taken with BEGIN, no unit of work): its limits read in one
        statement under the locks, the decision, the start and the estimate held. ``_UnitNeeded``
        (raised before anything is written) when the lane's definitions changed or the start would
        write an alert: the caller decides it in a unit of work, the slow path.

        On PostgreSQL, with the caller's plain read ``seen``: first the reserving statement guarded
        by the limits that read found (``_limit_guard``), sent with the locks as one pipeline; it
        decides unless the limits changed since (then nothing was written and the read below runs)."""
        pg = self.store.dialect == "postgresql"
        if pg and seen is not None:
            done = limit_guard.reserve(self.store, req, self.clock, lane, (lock_key, outer), seen)
            if done is not None:
                return done
        with self.store.driver(write=True, lock_key=outer) as tx:
            if outer != lock_key and pg:  # the goal's lock first (with BEGIN), then the agent's
                tx.row(LOCK_SQL, {"k": lock_id(lock_key)})
            # SQLite: the facts in the same statement (PostgreSQL's function reads its own).
            found = limit_read.read_known(tx, lane, req, self.clock, with_facts=not pg, now=read_clock(self.clock) if pg else None)
            check = found.check
            if check is None or alerts_due(check.states):
                raise _UnitNeeded
            if found.facts is not None:
                verdict, now = _admit_read(tx, req, checked(found.facts, check), found.now, None)
                if verdict.reason in _ADMITTING:
                    hold_estimate(tx, check, req.turn_id, req.goal, req.agent, req.automation, now)
            else:  # the estimate held by the reservation's own statement
                hold = held_estimate(check)
                goal_lock = outer if outer != lock_key else None  # held already: fg_admit takes it again, in order
                verdict, now, _ = _reserve_pg(
                    tx, req, self.clock, lock_key, lock_admitted=True, goal_lock=goal_lock, lim=check.code, states=check.states, hold=hold
                )
        return verdict, now

    @contextmanager
    def _joined(self, unit: UnitOfWork | None) -> Iterator[UnitOfWork]:
        """The caller's unit of work, else one of this reservation's own."""
        if unit is not None:
            yield unit
            return
        with self.store.unit() as own:
            yield own

    def denial(self, *, goal: str, agent: str, automation: str | None, turn_id: str, trigger_time: datetime) -> Decision | None:
        """The denial a journaled ``reserve`` of these arguments would return, decided from one plain
        read taken now (no lock, nothing written); None when it may admit: then only ``reserve``
        decides, serialized. A host decides its denials this way without waiting behind admissions."""
        req = _request(goal, agent, automation, turn_id, trigger_time, None)
        try:
            return self._plain(req, _ADMITTED)[0]
        except StoreUnavailable as exc:
            verdict = _Verdict(Reason.STATE_UNAVAILABLE, None, None, None, f"{exc}; denied (fail closed)")
            return _decision(req, read_clock(self.clock), verdict)

    def _plain(self, req: _Request, writes: tuple[Reason, ...]) -> _Plain:
        """The denial decided from a plain read (None: it may admit), and for a lane with counts or
        budgets whether one counts across agents (None: the lane has none), with a known lane's
        read of its limits (what its serialized step may be guarded by). A lane not known has its
        limits checked after the read (more statements, this lane only) and is decided again."""
        facts, seen, now = limit_read.plain(self.store.autocommit, req, self.clock)
        check = seen.check if seen is not None else None
        if check is not None:  # a lane known limited: its limits were read in the same statement
            verdict = _evaluate(checked(facts, check), req, to_us(now))
            return _Plain(None if verdict.reason in writes else _decision(req, now, verdict), check.across_agents, seen)
        verdict = _evaluate(facts, req, to_us(now))
        if _unchecked(verdict, facts):
            return self._limited_plain(req, writes, facts, now)
        return _Plain(None if verdict.reason in writes else _decision(req, now, verdict), None, None)

    def _limited_plain(self, req: _Request, writes: tuple[Reason, ...], facts: Facts, now: datetime) -> _Plain:
        """``_plain`` of a lane with counts or budgets, from its read ``facts``: its limits checked
        in one read transaction, then decided again."""
        with self.store.read() as conn:
            check = check_lane(conn, req.goal, req.agent, req.automation, now)
            limit_read.learn(conn, req.goal, req.agent, req.automation)  # its next decision: one statement
        verdict = _evaluate(checked(facts, check), req, to_us(now))
        return _Plain(None if verdict.reason in writes else _decision(req, now, verdict), check.across_agents, None)

    # -- confirm ---------------------------------------------------------------------------
    def confirm(self, turn_id: str) -> Confirmation:
        """Turn the reservation of ``turn_id`` into a confirmed start (idempotent).

        Call it once the host attempt is durable in the caller's journal. A turn admitted with no
        rule has no reservation; confirming it is a harmless no-op (``no_reservation``).
        """
        check_id(turn_id, "turn_id")
        now_us = to_us(read_clock(self.clock))
        # One autocommit statement: the phase flip is durable when it returns.
        flipped = self.store.autocommit.row(CONFIRM_SQL, {"t": turn_id, "now": now_us})
        if flipped is not None:
            return Confirmation(turn_id=turn_id, status="confirmed", start=start_from_row(StartRow(*flipped)))
        start = self.start(turn_id)
        if start is None:
            return Confirmation(turn_id=turn_id, status="no_reservation", start=None)
        return Confirmation(turn_id=turn_id, status="already_confirmed", start=start)

    # -- readback --------------------------------------------------------------------------
    def eligibility(self, goal: str, agent: str, automation: str | None = None, *, limits: LaneStates | None = None) -> Eligibility:
        """Whether the floor has elapsed for ``agent`` (and ``automation``), and exactly when it will;
        a lane with counts or budgets is judged with them, by the same rows as ``reserve``.

        ``limits``: the lane's limit states as the caller just read them (what a readback shows beside
        the verdict), judged instead of read again; None: read here when the lane has any. A read
        failure or malformed state is reported as ``unavailable``, never ``eligible``.
        """
        check_id(goal, "goal")
        check_id(agent, "agent")
        if automation is not None:
            check_id(automation, "automation")
        now = read_clock(self.clock)
        try:
            # The same facts reserve reads, so readback and admission can never disagree.
            facts = read_facts(self.store.autocommit, goal, agent, automation, _NO_TURN, _NO_TRIGGER)
            if facts.limited > 0 and limits is not None:
                facts = judged(facts, limits)
            elif facts.limited > 0:  # its counts and budgets checked as reserve checks them
                with self.store.read() as conn:
                    facts = checked(facts, check_lane(conn, goal, agent, automation, now))
            last_start = self._last_start(goal, agent) if facts.agent_anchor_us is not None else None
        except StoreUnavailable as exc:
            return _unavailable(goal, agent, automation, now, exc)
        return _eligibility(goal, agent, automation, now, facts, last_start)

    def eligibility_many(
        self, lanes: list[tuple[str, str, str | None]], *, limits: Mapping[tuple[str, str, str | None], LaneStates] | None = None
    ) -> dict[tuple[str, str, str | None], Eligibility]:
        """``eligibility`` of many lanes (a readback of every automation): the facts of every lane
        in a fixed number of statements (``read_facts_many``), the last start of each agent in one
        query; the same decision as above (``limits``: the lanes' limit states the caller read, as
        there; a limited lane missing from it is checked here, all in one read transaction)."""
        now = read_clock(self.clock)
        out: dict[tuple[str, str, str | None], Eligibility] = {}
        facts_of: dict[tuple[str, str, str | None], Facts] = {}
        try:
            with self.store.driver(write=False) as tx:
                read = read_facts_many(tx, lanes, _NO_TURN, _NO_TRIGGER)
            for (goal, agent, automation), facts in read.items():
                if isinstance(facts, StoreUnavailable):  # this lane's rows are damaged; the others stand
                    out[(goal, agent, automation)] = _unavailable(goal, agent, automation, now, facts)
                else:
                    facts_of[(goal, agent, automation)] = facts
            given = limits if limits is not None else {}
            facts_of.update({lane: judged(f, given[lane]) for lane, f in facts_of.items() if f.limited > 0 and lane in given})
            limited = [lane for lane, f in facts_of.items() if f.limited > 0 and lane not in given]
            if limited:  # their counts and budgets, as reserve checks them (one read transaction)
                with self.store.read() as conn:
                    for lane in limited:
                        try:
                            facts_of[lane] = checked(facts_of[lane], check_lane(conn, *lane, now))
                        except StoreUnavailable as exc:
                            out[lane] = _unavailable(*lane, now, exc)
                            del facts_of[lane]
            agents = sorted({(g, a) for (g, a, _), f in facts_of.items() if f.agent_anchor_us is not None})
            last_starts, bad_agents = self._last_starts(agents)
        except StoreUnavailable as exc:
            return {lane: _unavailable(*lane, now, exc) for lane in lanes}
        for (goal, agent, automation), facts in facts_of.items():
            if (goal, agent) in bad_agents:
                out[(goal, agent, automation)] = _unavailable(goal, agent, automation, now, bad_agents[(goal, agent)])
            else:
                out[(goal, agent, automation)] = _eligibility(goal, agent, automation, now, facts, last_starts.get((goal, agent)))
        return out

    def _last_starts(
        self, agents: list[tuple[str, str]]
    ) -> tuple[dict[tuple[str, str], StartRecord], dict[tuple[str, str], StoreUnavailable]]:
        """Each agent's latest start (by anchor), and the agents whose latest row cannot be decoded."""
        if not agents:
            return {}, {}
        t = s.starts
        anchor = type_coerce(t.c.anchor_us, BigInteger)
        latest = select(t.c.goal_id.label("g"), t.c.agent_id.label("a"), func.max(anchor).label("m")).group_by(t.c.goal_id, t.c.agent_id)
        sub = latest.subquery()
        query = (
            select(*raw_columns(t))
            .select_from(t.join(sub, and_(t.c.goal_id == sub.c.g, t.c.agent_id == sub.c.a, anchor == sub.c.m)))
            .order_by(t.c.turn_id.desc())
        )
        wanted = set(agents)
        found: dict[tuple[str, str], StartRecord] = {}
        bad: dict[tuple[str, str], StoreUnavailable] = {}
        with self.store.read() as conn:
            rows = list(conn.execute(query))
        for row in rows:
            key = (row.goal_id, row.agent_id)
            if key not in wanted:
                continue
            try:
                found.setdefault(key, start_from_row(row))  # equal anchors (one microsecond): any one of them
            except StoreUnavailable as exc:
                bad[key] = exc
        return found, bad

    def next_eligible_many(self, lanes: list[tuple[str, str, str | None]]) -> dict[tuple[str, str, str | None], datetime | None]:
        """``next_eligible_at`` for many lanes in three queries (a host arming thousands of timers).

        The floor arithmetic of ``eligibility`` (no floor: None); a lane a count or budget binds is
        judged by ``eligibility_many``, so a host arms it for when a spent limit frees. A malformed
        anchor or rule raises ``CorruptState`` naming its lane (``next_eligible_tolerant`` holds it).
        """
        r, t = s.rules, s.starts
        with self.store.read() as conn:
            limits = case((limited_rule(r), 1), else_=0).label("lim")
            rules = list(conn.execute(select(r.c.goal_id, *(r.c[c] for c in RULE_COLUMNS), limits)))
            # Undecoded: a damaged anchor maps its lanes to None below instead of failing the read.
            anchor = func.max(type_coerce(t.c.anchor_us, BigInteger))
            agent_anchor = {
                (g, a): v for g, a, v in conn.execute(select(t.c.goal_id, t.c.agent_id, anchor).group_by(t.c.goal_id, t.c.agent_id))
            }
            lane_anchor = {
                (g, a, x): v
                for g, a, x, v in conn.execute(
                    select(t.c.goal_id, t.c.agent_id, t.c.automation_id, anchor).group_by(t.c.goal_id, t.c.agent_id, t.c.automation_id)
                )
            }
            damaged = list(conn.execute(_DAMAGED_STARTS)) if self.store.relaxed else []
        # The same decoder as admission's facts; a damaged rule raises for the lanes it may apply to.
        by_key: dict[tuple[str, str, str], RuleRef] = {}
        limited = {(row.goal_id, row.agent_id, row.automation_id) for row in rules if row.lim}
        bad_rules: list[tuple[object, object, object, StoreUnavailable]] = []
        for row in rules:
            try:
                if not all(isinstance(v, str) for v in (row.goal_id, row.agent_id, row.automation_id)):
                    raise StoreUnavailable(f"a rule's scope is malformed: {row.goal_id!r}/{row.agent_id!r}/{row.automation_id!r}")
                by_key[(row.goal_id, row.agent_id, row.automation_id)] = rule_ref(
                    row.goal_id, row.agent_id, row.automation_id, row.min_interval_us, row.revision, row.across_agents
                )
            except StoreUnavailable as exc:
                bad_rules.append((row.goal_id, row.agent_id, row.automation_id, exc))
        goal_anchor = goal_anchors(agent_anchor)  # for a goal floor across agents
        out: dict[tuple[str, str, str | None], datetime | None] = {}
        bound: list[tuple[str, str, str | None]] = []  # lanes a count or budget binds
        for goal, agent, automation in lanes:
            lane = f"{goal}/{agent}/{automation or ''}"
            for g, a, x, problem in bad_rules:  # a rule whose key is damaged could be any of the goal's
                if _may_cover((g, a, x), goal, agent, automation or ""):
                    raise CorruptState(f"lane {lane}: {problem}")
            for g, a, x, no_anchor in damaged:  # a start missing its key or anchor (a rebuild without constraints)
                if _start_may_cover(g, a, x, no_anchor, goal, agent, automation):
                    raise CorruptState(f"lane {lane}: a start of it is missing its goal, agent, automation or anchor")
            refs = [by_key[k] for k in ((goal, "", ""), (goal, agent, "")) if k in by_key]
            if automation and (goal, agent, automation) in by_key:
                refs.append(by_key[(goal, agent, automation)])
            floor = combine(goal, agent, automation, refs)
            agent_us = agent_anchor.get((goal, agent))
            if self.store.relaxed:  # a start without an agent could be any agent's last (as ``read_facts``)
                agent_us = stored_max(agent_us, agent_anchor.get((goal, None)))
            lane_us = lane_anchor.get((goal, agent, automation or ""))
            goal_us = goal_anchor.get(goal) if floor.goal_floor else None
            if not _time_ok(agent_us) or not _time_ok(lane_us) or not _time_ok(goal_us):
                raise CorruptState(f"lane {lane} has a malformed anchor: {agent_us!r}, {lane_us!r}, {goal_us!r}")
            next_us = next_eligible_us(*floor_us(floor)[1:], agent_us, lane_us if automation else None, floor.goal_floor // _US, goal_us)
            out[(goal, agent, automation)] = from_us(next_us) if next_us is not None else None
            if limited and any(k in limited for k in ((goal, "", ""), (goal, agent, ""), (goal, agent, automation or ""))):
                bound.append((goal, agent, automation))
        judged = self.eligibility_many(bound) if bound else {}  # unavailable: the floor's time (each tick decides, fail closed)
        out.update({k: e.next_eligible_at for k, e in judged.items() if e.status != "unavailable"})
        return out

    def _last_start(self, goal: str, agent: str) -> StartRecord | None:
        t = s.starts
        with self.store.read() as conn:
            query = select(*raw_columns(t)).where(t.c.goal_id == goal, t.c.agent_id == agent)
            row = conn.execute(query.order_by(t.c.anchor_us.desc()).limit(1)).first()
        return start_from_row(row) if row is not None else None

    def starts(
        self, goal: str | None = None, agent: str | None = None, automation: str | None = None, limit: int = 50
    ) -> list[StartRecord]:
        """Start records, newest first, optionally narrowed to a goal, agent or automation."""
        t = s.starts
        check_limit(limit)
        query = select(*raw_columns(t)).order_by(t.c.anchor_us.desc(), t.c.turn_id).limit(limit)
        for column, value, field in (
            (t.c.goal_id, goal, "goal"),
            (t.c.agent_id, agent, "agent"),
            (t.c.automation_id, automation, "automation"),
        ):
            if value is not None:
                query = query.where(column == check_id(value, field))
        with self.store.read() as conn:
            return [start_from_row(row) for row in conn.execute(query)]

    def lanes(self) -> list[tuple[str, str, str | None]]:
        """Every (goal, agent, automation) that has a rule or a start; agent-wide lanes have automation None."""
        seen: set[tuple[str, str, str | None]] = set()
        with self.store.read() as conn:
            for table in (s.rules, s.starts):
                query = select(table.c.goal_id, table.c.agent_id, table.c.automation_id).distinct()
                for goal, agent, automation in conn.execute(query):
                    # A key that is not text (a hand edit) names no lane: readback of its rows fails elsewhere.
                    if isinstance(goal, str) and isinstance(agent, str) and agent and isinstance(automation, (str, type(None))):
                        seen.add((goal, agent, automation or None))
        return sorted(seen, key=lambda k: (k[0], k[1], k[2] or ""))

    def start(self, turn_id: str) -> StartRecord | None:
        """The start record of ``turn_id``, if admission wrote one."""
        t = s.starts
        with self.store.read() as conn:
            row = conn.execute(select(*raw_columns(t)).where(t.c.turn_id == check_id(turn_id, "turn_id"))).first()
        return start_from_row(row) if row is not None else None


# Only on a store whose NOT NULL constraints were dropped (``Store.relaxed``): such a row cannot
# exist otherwise, and this is a scan.
_DAMAGED_STARTS = select(
    s.starts.c.goal_id, s.starts.c.agent_id, s.starts.c.automation_id, s.starts.c.anchor_us.is_(None).label("no_anchor")
).where(
    or_(
        s.starts.c.goal_id.is_(None),
        s.starts.c.agent_id.is_(None),
        s.starts.c.automation_id.is_(None),
        s.starts.c.anchor_us.is_(None),
    )
)


_may_cover = may_cover


def _start_may_cover(g: object, a: object, x: object, no_anchor: object, goal: str, agent: str, automation: str | None) -> bool:
    """Whether a damaged start holds lane ``goal/agent/automation`` (``_facts._GUARD_COLUMNS``): one
    without an agent holds its automation's lanes of every agent, or the whole goal when its
    automation or anchor is missing too; any other could be any of its agent's starts."""
    if isinstance(g, str) and a is None and isinstance(x, str) and not no_anchor:
        return g == goal and x == (automation or "")
    return _may_cover((g, a, x), goal, agent, None)


def _time_ok(value: object) -> bool:
    """Whether an undecoded stored time (or its absence) would pass the column's decoder."""
    return value is None or (type(value) is int and 0 <= value < MAX_US)
