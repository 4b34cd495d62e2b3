"""The turn journal: one record per host attempt, owned by one runner at a time.

Phases: ``journaled`` (the attempt is durable; nothing ran), ``confirmed`` (the start is
confirmed in the same commit; from here the host may have spawned, so the turn is never launched
again), ``launched`` (the host process exists and its pid is recorded; a host spawned held goes
from ``journaled`` straight here, start confirmed in the same commit), ``settled`` (the verdict
is written; settlement is final).

A claim (``owner_id``, ``lease_expires_us``) says who runs the turn. The journal row is written
with the claim in the reservation's own transaction (``Admission.reserve(journal=...)``), and
every later step is an UPDATE conditional on still owning it: a runner that lost its claim gets
``ClaimLost`` naming the current owner and writes nothing. Taking over an orphaned claim is one
compare-and-set statement, so two recoverers can never both win.
No host output is stored here: only ids, times, pids and the verdict.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, and_, bindparam, func, insert, literal, select, text, type_coerce, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._turns import REASON_MAX, ClaimLost, FailureCategory, JournalEntry, Settled, TurnOwned, TurnRecord, TurnStatus, Verdict, clip_words
from ._types import decode_row, from_row, raw_columns, to_row
from .clock import from_us, read_clock, to_us
from .errors import CorruptState, InvalidInput, NotFound, StoreUnavailable
from .scope import check_key
from .store import DriverTx
from .unit import UnitOfWork

# The turn journal's values live in _turns; these names are the journal's public surface too.
__all__ = [
    "REASON_MAX",
    "ClaimLost",
    "FailureCategory",
    "Journal",
    "JournalEntry",
    "OrphanStart",
    "Settled",
    "TurnOwned",
    "TurnRecord",
    "TurnStatus",
    "Verdict",
    "clip_words",
    "write_entry",
]

RENEW_CHUNK = 500  # turn ids per lease-renewal statement
_LINK = (  # built once: a turn's begin runs it per admission (see ``missions._UNSETTLED``)
    update(s.turns)
    .where(s.turns.c.turn_id == bindparam("p_turn"), s.turns.c.owner_id == bindparam("p_owner"), s.turns.c.phase == "journaled")
    .values(mission_id=bindparam("p_mission"), attempt=bindparam("p_attempt"))
)

_INSERT_SQL = (
    "INSERT INTO fg_turns (turn_id, automation_id, goal_id, agent_id, attempt, kind, manual_reason, runner_host, runner_pid, "
    "child_pid, started_at_us, deadline_us, phase, log_path, mission_id, owner_id, lease_expires_us) VALUES (:t, :x, :g, :a, "
    ":attempt, :kind, :reason, :rh, :rp, NULL, :now, :deadline, 'journaled', :log, :mission, :owner, :lease) "
    "ON CONFLICT (turn_id) DO NOTHING"
)
# The attempt number counted in the insert itself (the automation's attempts so far, plus one).
_INSERT_COUNTED_SQL = _INSERT_SQL.replace(":attempt,", "(SELECT COUNT(*) + 1 FROM fg_turns WHERE automation_id = :counted),", 1)
_CLAIM_SQL = "SELECT owner_id, lease_expires_us, phase FROM fg_turns WHERE turn_id = :t"


# A reservation no journal row claims, on the lane of an automation floorgate launches itself (a
# reservation on any other lane belongs to an external launcher: floorgate admit/confirm).
_ORPHAN_START = (
    "s.phase = 'reserved' AND s.anchor_us < :cut AND NOT EXISTS (SELECT 1 FROM fg_turns t WHERE t.turn_id = s.turn_id) "
    "AND EXISTS (SELECT 1 FROM fg_automations a WHERE a.automation_id = s.automation_id AND a.goal_id = s.goal_id "
    "AND a.agent_id = s.agent_id AND a.timer != 'external')"
)


def write_entry(tx: DriverTx, entry: JournalEntry, now_us: int) -> bool:
    """Insert ``entry`` inside the caller's transaction (the reservation's); True when this
    inserted the row (False: it was there already).

    An existing row is accepted only when it is still ``journaled`` and already claimed by
    ``entry.owner_id`` (a resume after a takeover); anything else raises ``TurnOwned``, which
    rolls the caller's transaction back. Without ``entry.attempt`` the attempt number is counted
    by the insert (one statement).
    """
    attempt = entry.attempt
    inserted = tx.execute(
        _INSERT_SQL if attempt is not None else _INSERT_COUNTED_SQL,
        {
            "t": entry.turn_id,
            "x": entry.automation_id,
            "counted": entry.automation_id,  # a second name: PostgreSQL types each parameter once
            "g": entry.goal_id,
            "a": entry.agent_id,
            "attempt": attempt,
            "kind": entry.kind,
            "reason": entry.manual_reason,
            "rh": entry.runner_host,
            "rp": entry.runner_pid,
            "now": now_us,
            "deadline": to_us(entry.deadline),
            "log": entry.log_path,
            "mission": entry.mission_id,
            "owner": entry.owner_id,
            "lease": to_us(entry.lease_expires),
        },
    )
    if inserted == 1:
        return True
    row = tx.row(_CLAIM_SQL, {"t": entry.turn_id})
    if row is None:  # pragma: no cover - the conflict was on this very key
        raise TurnOwned(entry.turn_id, None, None, "unknown")
    owner, lease_us, phase = row
    if owner == entry.owner_id and phase == "journaled":
        return False
    raise TurnOwned(entry.turn_id, owner, from_us(lease_us) if type(lease_us) is int else None, phase)


def _record(row) -> TurnRecord:  # type: ignore[no-untyped-def]
    """Decode a turn row; a malformed one raises ``StoreUnavailable`` (its automation fails closed)."""
    try:
        return _decode(row)
    except (ValueError, TypeError, OverflowError) as exc:
        first = str(exc).strip().splitlines()
        raise StoreUnavailable(f"turn {row.turn_id!r} is malformed in the store: {' '.join(first[:3])}") from None


def _decoded(row: Any) -> Any:
    """A row of a tolerant scan (``raw_columns``), its times decoded; ``CorruptState`` names the turn."""
    try:
        return decode_row(s.turns, row)
    except CorruptState as exc:
        raise CorruptState(f"turn {row.turn_id!r} is malformed in the store: {exc}") from None


def _decode(row) -> TurnRecord:  # type: ignore[no-untyped-def]
    verdict = None
    if row.status is not None:  # read back as ``_settled`` writes it
        verdict = from_row(Verdict, s.turns, row, retryable=bool(row.retryable), bound=row.stop_bound)
    return from_row(TurnRecord, s.turns, row, verdict=verdict)


def _settled(verdict: Verdict, now: datetime, *, exit_code: int | None) -> dict[str, Any]:
    """The columns of a journal row settled ``now`` with ``verdict`` (its child's ``exit_code``)."""
    return to_row(verdict, s.turns, exit_code=exit_code, stop_bound=verdict.bound, phase="settled", settled_at_us=now)


def _claim(owner: str, lease_expires: datetime, runner_host: str, runner_pid: int) -> dict[str, Any]:
    """The columns of a claim on a turn: who owns it until when, as which runner process."""
    return {"owner_id": owner, "lease_expires_us": lease_expires, "runner_host": runner_host, "runner_pid": runner_pid}


@dataclass(frozen=True)
class OrphanStart:
    """A reservation with no journal row (older versions, or a reservation made by hand)."""

    turn_id: str
    goal_id: str
    agent_id: str
    automation_id: str
    anchor_at: datetime
    kind: str
    manual_reason: str | None


class Journal(Repository):
    """Durable attempts, claims and settlements of managed turns."""

    def begin(
        self,
        *,
        turn_id: str,
        automation_id: str,
        goal_id: str,
        agent_id: str,
        attempt: int,
        kind: str,
        manual_reason: str | None,
        runner_host: str,
        runner_pid: int,
        deadline: datetime,
        log_path: str | None,
        mission_id: str | None = None,
        owner_id: str | None = None,
        lease_expires: datetime | None = None,
    ) -> TurnRecord:
        """Journal an attempt on its own, outside a reservation (idempotent: an existing record is
        returned as is). Without an owner the row is claimed by ``<runner_host>:direct`` until its
        deadline. Managed turns journal through ``Admission.reserve(journal=...)`` instead."""
        t = s.turns
        now = read_clock(self.clock)
        owner = owner_id if owner_id is not None else f"{runner_host}:direct"
        claim = _claim(owner, lease_expires if lease_expires is not None else deadline, runner_host, runner_pid)
        with self.store.write(lock_key=locks.turn(turn_id)) as conn:
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).first()
            if row is not None:
                return _record(row)
            conn.execute(
                insert(t).values(  # no child yet (NULL until launched)
                    turn_id=turn_id,
                    automation_id=automation_id,
                    goal_id=goal_id,
                    agent_id=agent_id,
                    attempt=attempt,
                    kind=kind,
                    manual_reason=manual_reason,
                    started_at_us=now,
                    deadline_us=deadline,
                    phase="journaled",
                    log_path=log_path,
                    mission_id=mission_id,
                    **claim,
                )
            )
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).one()
        return _record(row)

    # -- steps of the owner ----------------------------------------------------------------------
    def confirm(
        self,
        turn_id: str,
        owner: str,
        *,
        lease_expires: datetime,
        deadline: datetime,
    ) -> TurnRecord:
        """Pass the point of no return in one commit: the journal row becomes ``confirmed`` (with
        its lease and deadline) and the turn's reserved start is confirmed. The mission link and
        attempt were written at the turn's begin (``link``). For a turn that cannot spawn (its
        program is missing): a spawned one passes with its pid (``launch``)."""
        return self._pass(turn_id, owner, lease_expires, deadline, None)

    def launch(
        self,
        turn_id: str,
        owner: str,
        *,
        lease_expires: datetime,
        deadline: datetime,
        child_pid: int,
        child_boot_id: str | None = None,
        child_start_ticks: int | None = None,
    ) -> TurnRecord:
        """``confirm`` and ``launched`` in one commit, for a host spawned held before its program
        runs (it runs only once this has committed; if the runner dies first, it exits unrun): the
        journal row goes from ``journaled`` to ``launched`` with the pid, the start is confirmed.
        ``child_boot_id`` and ``child_start_ticks`` say which process that pid is (recovery
        signals it only while both still match); None when they could not be read."""
        identity: dict[str, object] = {"child_pid": child_pid, "child_boot_id": child_boot_id, "child_start_ticks": child_start_ticks}
        return self._pass(turn_id, owner, lease_expires, deadline, identity)

    def _pass(self, turn_id: str, owner: str, lease_expires: datetime, deadline: datetime, child: dict[str, object] | None) -> TurnRecord:
        t = s.turns
        now = read_clock(self.clock)
        values: dict[str, object] = {"phase": "confirmed", "lease_expires_us": lease_expires, "deadline_us": deadline}
        if child is not None:
            values.update(phase="launched", **child)
        with self.store.write(lock_key=locks.turn(turn_id)) as conn:
            done = conn.execute(update(t).where(t.c.turn_id == turn_id, t.c.owner_id == owner, t.c.phase == "journaled").values(**values))
            if done.rowcount != 1:
                self._refuse(conn, turn_id, owner, "confirm", "journaled")
            st = s.starts
            conn.execute(update(st).where(st.c.turn_id == turn_id, st.c.phase == "reserved").values(phase="confirmed", confirmed_at_us=now))
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).one()
        return _record(row)

    def link(self, turn_id: str, owner: str, *, mission_id: str, attempt: int, unit: UnitOfWork) -> None:
        """Record the mission a ``journaled`` attempt counts against, in the caller's transaction
        (the turn's begin: ``Admission.reserve(on_admit=...)``); ``ClaimLost`` when not the owner."""
        with self.store.write(lock_key=locks.turn(turn_id), unit=unit) as conn:
            done = conn.execute(_LINK, {"p_turn": turn_id, "p_owner": owner, "p_mission": mission_id, "p_attempt": attempt})
            if done.rowcount != 1:
                self._refuse(conn, turn_id, owner, "mission link", "journaled")

    def renew(self, turn_id: str, owner: str, lease_expires: datetime) -> None:
        """Extend the owner's lease; ``ClaimLost`` when another runner took the turn over."""
        t = s.turns
        with self.store.write(lock_key=locks.turn(turn_id)) as conn:
            done = conn.execute(
                update(t)
                .where(t.c.turn_id == turn_id, t.c.owner_id == owner, t.c.phase != "settled")
                .values(lease_expires_us=lease_expires)
            )
            if done.rowcount != 1:
                self._refuse(conn, turn_id, owner, "lease renewal", "unsettled")

    def renew_waiting(self, turn_ids: list[str], owner: str, lease_expires: datetime) -> int:
        """Extend the owner's lease on many journaled turns at once (a host's admitted turns that
        wait for a worker), in chunks of one statement each; returns how many the owner still
        holds (a turn taken over meanwhile is simply not renewed: its new owner runs it)."""
        t = s.turns
        held = 0
        for at in range(0, len(turn_ids), RENEW_CHUNK):
            chunk = turn_ids[at : at + RENEW_CHUNK]
            with self.store.write() as conn:
                done = conn.execute(
                    update(t)
                    .where(t.c.turn_id.in_(chunk), t.c.owner_id == owner, t.c.phase == "journaled")
                    .values(lease_expires_us=lease_expires)
                )
                held += done.rowcount
        return held

    def settle(self, turn_id: str, verdict: Verdict, *, owner: str, unit: UnitOfWork | None = None) -> TurnRecord:
        """Write the verdict once, as the owner; a second settlement returns the first (settlement
        is final). A start still reserved for this turn is confirmed in the same commit (never
        refunded), so a settled turn never leaves a reservation behind. ``unit``: in the caller's
        unit of work (with the mission's settlement); ``ClaimLost`` then rolls all of it back."""
        return self.settle_first(turn_id, verdict, owner=owner, unit=unit).record

    def settle_first(self, turn_id: str, verdict: Verdict, *, owner: str, unit: UnitOfWork | None = None) -> Settled:
        """``settle``, saying whether this call wrote the verdict: the UPDATE matches only a row
        still unsettled (one statement), so of two racing settlements exactly one has ``won``, and
        only that one may charge what the settlement costs (wall time, a latch)."""
        t = s.turns
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.turn(turn_id), unit=unit) as conn:
            done = conn.execute(
                update(t)
                .where(t.c.turn_id == turn_id, t.c.owner_id == owner, t.c.phase != "settled")
                .values(**_settled(verdict, now, exit_code=verdict.exit_code))
            )
            row = conn.execute(select(t).where(t.c.turn_id == turn_id)).first()
            if row is None:
                raise NotFound(f"turn {turn_id!r} was never journaled")
            if done.rowcount != 1 and row.phase != "settled":
                raise ClaimLost(turn_id, owner, row.owner_id, "settlement")
            st = s.starts
            conn.execute(update(st).where(st.c.turn_id == turn_id, st.c.phase == "reserved").values(phase="confirmed", confirmed_at_us=now))
        return Settled(_record(row), won=done.rowcount == 1)

    def take_over(self, record: TurnRecord, owner: str, lease_expires: datetime, *, runner_host: str, runner_pid: int) -> TurnRecord | None:
        """Claim an orphaned turn: one compare-and-set on the claim as ``record`` saw it. Returns
        the record now owned by ``owner``, or None when another runner changed the claim first."""
        t = s.turns
        with self.store.write(lock_key=locks.turn(record.turn_id)) as conn:
            done = conn.execute(
                update(t)
                .where(
                    t.c.turn_id == record.turn_id,
                    t.c.phase == record.phase,
                    t.c.owner_id.is_not_distinct_from(record.owner_id),
                    t.c.lease_expires_us.is_not_distinct_from(record.lease_expires),
                )
                .values(**_claim(owner, lease_expires, runner_host, runner_pid))
            )
            if done.rowcount != 1:
                return None
            row = conn.execute(select(t).where(t.c.turn_id == record.turn_id)).one()
        return _record(row)

    def _refuse(self, conn, turn_id: str, owner: str, step: str, expected: str) -> None:  # type: ignore[no-untyped-def]
        row = conn.execute(select(s.turns.c.owner_id, s.turns.c.phase).where(s.turns.c.turn_id == turn_id)).first()
        if row is None:
            raise NotFound(f"turn {turn_id!r} was never journaled")
        if row.owner_id != owner:
            raise ClaimLost(turn_id, owner, row.owner_id, step)
        raise InvalidInput("turn_id", f"turn {turn_id!r} is {row.phase}, not {expected}: {step} refused")

    # -- recovery --------------------------------------------------------------------------------
    def anything_pending(self, orphaned_before: datetime) -> bool:
        """One indexed query: is any turn unsettled, or any managed lane's reservation older than
        ``orphaned_before`` without a journal row? (Recovery is free when nothing is.)"""
        return bool(
            self._read_orphans(
                "SELECT 1 FROM fg_turns WHERE phase IN ('journaled', 'confirmed', 'launched') UNION ALL "
                "SELECT 1 FROM fg_starts s WHERE " + _ORPHAN_START + " LIMIT 1",
                orphaned_before,
            )
        )

    def orphan_starts(self, orphaned_before: datetime) -> list[OrphanStart]:
        """Reservations older than ``orphaned_before`` that no journal row claims."""
        rows = self._read_orphans(
            "SELECT s.turn_id, s.goal_id, s.agent_id, s.automation_id, s.anchor_us, s.kind, s.manual_reason FROM fg_starts s "
            "WHERE " + _ORPHAN_START + " ORDER BY s.anchor_us",
            orphaned_before,
        )
        out = []
        for turn_id, goal, agent, automation, anchor_us, kind, reason in rows:
            if type(anchor_us) is int:  # a malformed hand edit is admission's to report, not ours to settle
                out.append(OrphanStart(turn_id, goal, agent, automation, from_us(anchor_us), str(kind), reason))
        return out

    def _read_orphans(self, sql: str, orphaned_before: datetime) -> list[Any]:
        """The rows of ``sql``, whose reservations count as orphaned from before ``:cut``."""
        with self.store.read() as conn:
            return list(conn.execute(text(sql), {"cut": to_us(orphaned_before)}).all())

    def settle_orphan_start(
        self, start: OrphanStart, verdict: Verdict, *, owner: str, runner_host: str, runner_pid: int
    ) -> TurnRecord | None:
        """Record an orphaned reservation as a settled turn and confirm its start, in one commit
        (the window stays spent: never refunded). None if a journal row appeared meanwhile."""
        t, st = s.turns, s.starts
        now = read_clock(self.clock)
        lane = asdict(start)  # the turn's ids, kind and reason, as its reservation holds them
        anchor = lane.pop("anchor_at")
        with self.store.write(lock_key=locks.turn(start.turn_id)) as conn:
            if conn.execute(select(literal(1)).where(t.c.turn_id == start.turn_id)).first() is not None:
                return None
            flipped = conn.execute(
                update(st).where(st.c.turn_id == start.turn_id, st.c.phase == "reserved").values(phase="confirmed", confirmed_at_us=now)
            )
            if flipped.rowcount != 1:
                return None
            attempt = conn.execute(select(func.count()).where(t.c.automation_id == start.automation_id)).scalar_one() + 1
            conn.execute(
                insert(t).values(  # never ran: no child, log or mission (NULL)
                    **lane,
                    attempt=attempt,
                    started_at_us=anchor,
                    deadline_us=anchor,
                    **_claim(owner, now, runner_host, runner_pid),
                    **_settled(verdict, now, exit_code=None),
                )
            )
            row = conn.execute(select(t).where(t.c.turn_id == start.turn_id)).one()
        return _record(row)

    # -- reads -----------------------------------------------------------------------------------
    def get(self, turn_id: str, *, unit: UnitOfWork | None = None) -> TurnRecord | None:
        check_key(turn_id, "turn_id")
        t = s.turns
        try:
            with self.store.read(unit=unit) as conn:
                row = conn.execute(select(t).where(t.c.turn_id == turn_id)).first()
        except CorruptState as exc:
            raise CorruptState(f"turn {turn_id!r} is malformed in the store: {exc}") from None
        return _record(row) if row is not None else None

    def unsettled(self, automation_id: str | None = None) -> list[TurnRecord]:
        """Turns not settled yet; a row that cannot be decoded (an unknown phase included) raises
        ``StoreUnavailable``: its automation cannot be judged free to run."""
        records, bad = self.unsettled_scan(automation_id)
        if bad:
            raise StoreUnavailable(next(iter(bad.values())))
        return records

    def unsettled_scan(self, automation_id: str | None = None) -> tuple[list[TurnRecord], dict[str, str]]:
        """Unsettled turns that decode, and ``{turn_id: why}`` for those that do not (one bad row
        must not stop recovery of the others)."""
        t = s.turns
        query = select(*raw_columns(t)).where(t.c.phase != "settled").order_by(t.c.started_at_us)
        if automation_id is not None:
            query = query.where(t.c.automation_id == automation_id)
        with self.store.read() as conn:
            rows = list(conn.execute(query))
        records: list[TurnRecord] = []
        bad: dict[str, str] = {}
        for row in rows:
            try:
                records.append(_record(_decoded(row)))
            except StoreUnavailable as exc:
                bad[str(row.turn_id)] = str(exc)
        return records, bad

    def latest_scan(self) -> tuple[dict[str, TurnRecord], dict[str, str]]:
        """Every automation's latest turn in one read, and ``{automation_id: why}`` for those whose
        latest row cannot be decoded (a readback of thousands of automations reads this once)."""
        t = s.turns
        started = type_coerce(t.c.started_at_us, BigInteger)
        latest = select(t.c.automation_id.label("aid"), func.max(started).label("at")).group_by(t.c.automation_id).subquery()
        query = (
            select(*raw_columns(t))
            .select_from(t.join(latest, and_(t.c.automation_id == latest.c.aid, started == latest.c.at)))
            .order_by(t.c.turn_id)
        )
        with self.store.read() as conn:
            rows = list(conn.execute(query))
        found: dict[str, TurnRecord] = {}
        bad: dict[str, str] = {}
        for row in rows:
            try:
                found[str(row.automation_id)] = _record(_decoded(row))
            except StoreUnavailable as exc:
                bad[str(row.automation_id)] = str(exc)
        return found, bad

    def recent(self, automation_id: str, limit: int = 10) -> list[TurnRecord]:
        t = s.turns
        query = select(t).where(t.c.automation_id == automation_id).order_by(t.c.started_at_us.desc()).limit(limit)
        with self.store.read() as conn:
            return [_record(row) for row in conn.execute(query)]

    def attempts(self, automation_id: str) -> int:
        """How many attempts the automation has journaled (the next attempt number minus one)."""
        t = s.turns
        with self.store.read() as conn:
            return int(conn.execute(select(func.count()).where(t.c.automation_id == automation_id)).scalar_one())
