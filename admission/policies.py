"""Owner floors: minimum start-to-start intervals per goal, agent or automation.

Writes are exact-revision compare-and-set; lowering or disabling needs explicit reduction
authorization; every write leaves a provenance record. ``effective()`` combines the rules that
apply to an agent (and optionally one of its automations) into the binding floor.
"""

from __future__ import annotations

import builtins
import functools
import json
import re
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, NamedTuple

from sqlalchemy import Select, and_, bindparam, insert, or_, select, update
from sqlalchemy.engine import Connection

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, decode_row, raw_columns, stored
from .clock import read_clock
from .decide.floors import MAX_STORED_FLOOR as MAX_STORED_FLOOR
from .decide.floors import EffectiveFloor as EffectiveFloor
from .decide.floors import Folded as Folded
from .decide.floors import RuleRef as RuleRef
from .decide.floors import combine as combine
from .decide.floors import effective_floor as effective_floor
from .decide.floors import fold as fold
from .envelope import ComputeBlock, loosened, parse_compute
from .errors import CorruptState, InvalidInput, ReductionNotAuthorized, RevisionConflict, StoreUnavailable
from .events import EventKind, record
from .intervals import check_interval, format_interval
from .limits import Limits, LimitsChange, limits_from_columns, limits_json
from .limits import loosened as limits_loosened
from .scope import Scope, ScopeKind, check_id, check_limit

_OWNER_REF = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}")
_US = timedelta(microseconds=1)


class Provenance(StrEnum):
    """Who vouches for an ``owner_ref``: the caller said so (CLI), or a signed-in principal (console)."""

    ASSERTED = "asserted"
    AUTHENTICATED = "authenticated"


def _provenance(value: object) -> Provenance:
    # A hand-edited kind is not a claim of authentication: read it as merely asserted.
    return Provenance.AUTHENTICATED if value == Provenance.AUTHENTICATED.value else Provenance.ASSERTED


class Rule(Frozen):
    """The floor an owner set at one scope. ``min_interval`` 0 means no rule there."""

    scope: Scope
    min_interval: timedelta
    owner_ref: str
    revision: int
    updated_at: datetime
    compute: ComputeBlock | None = None
    compute_problem: str | None = None  # the stored block is malformed (hand-edited or corrupted)
    limits: Limits = Limits()  # starts per window, budgets, estimate, across agents (admission.limits)

    @property
    def active(self) -> bool:
        """Whether the rule sets a floor (a minimum interval above 0)."""
        return self.min_interval > timedelta(0)

    @property
    def binds(self) -> bool:
        """Whether the rule bounds anything: a floor, a count or budget, or a compute envelope."""
        return self.active or not self.limits.is_empty() or self.compute is not None

    def columns(self) -> dict[str, Any]:
        """The rule row's columns for this rule, all but ``compute_json`` (its compute block as stored text)."""
        return dict(
            min_interval_us=self.min_interval // _US,
            owner_ref=self.owner_ref,
            revision=self.revision,
            updated_at_us=self.updated_at,
            **self.limits.columns(),
        )


class RuleChange(Frozen):
    """Provenance of one policy write."""

    id: int
    scope: Scope
    before: timedelta | None
    after: timedelta
    revision: int
    owner_ref: str
    changed_at: datetime
    reduction_authorized: bool
    compute_before: dict | None = None  # type: ignore[type-arg]
    compute_after: dict | None = None  # type: ignore[type-arg]
    owner_kind: Provenance = Provenance.ASSERTED
    note: str | None = None  # the owner's note on the write
    limits_before: dict | None = None  # type: ignore[type-arg]
    limits_after: dict | None = None  # type: ignore[type-arg]


def check_owner_ref(value: object) -> str:
    if not isinstance(value, str) or not _OWNER_REF.fullmatch(value):
        raise InvalidInput("owner_ref", f"{value!r} is not a short identifier; use 1-64 letters, digits or ._:@- (no secrets)")
    return value


def _scope_of(row) -> Scope:  # type: ignore[no-untyped-def]
    return Scope(goal_id=row.goal_id, agent_id=row.agent_id or None, automation_id=row.automation_id or None)


def _checked_us(value: object, what: str) -> int:
    # SQLite keeps whatever a hand edit wrote; anything but a non-negative integer is corrupt state.
    if type(value) is not int or value < 0:
        raise StoreUnavailable(f"malformed {what} in the store: {value!r}")
    return value


def rule_ref(
    goal_id: str, agent_key: str, automation_key: str, min_interval_us: object, revision: object, across_agents: object = False
) -> RuleRef:
    """The one decoder of a stored rule (admission's facts, the host's bulk planner and policy
    readback all use it): a NULL, non-integer, negative or over-cap floor, a revision below 1, or an
    ``across_agents`` flag that is not a boolean (or SQLite's 0/1) raises ``CorruptState`` (a
    ``StoreUnavailable``), so a damaged rule denies and is never read as "no rule"."""
    scope = Scope.model_construct(goal_id=goal_id, agent_id=agent_key or None, automation_id=automation_key or None)
    if type(min_interval_us) is not int or not 0 <= min_interval_us <= MAX_STORED_FLOOR // timedelta(microseconds=1):
        raise CorruptState(f"malformed rule at {scope}: min_interval {min_interval_us!r}")
    if type(revision) is not int or revision < 1:
        raise CorruptState(f"malformed rule at {scope}: revision {revision!r}")
    if across_agents not in (True, False) or type(across_agents) not in (bool, int):
        raise CorruptState(f"malformed rule at {scope}: across_agents {across_agents!r}")
    across = bool(across_agents) and scope.kind is ScopeKind.GOAL
    return RuleRef.model_construct(
        scope=scope, min_interval=timedelta(microseconds=min_interval_us), revision=revision, across_agents=across
    )


def rule_from_row(row) -> Rule:  # type: ignore[no-untyped-def]
    """Decode a rules row; malformed values raise ``StoreUnavailable`` (fail closed)."""
    ref = rule_ref(row.goal_id, row.agent_id, row.automation_id, row.min_interval_us, row.revision, row.across_agents)
    compute, problem = read_compute(row.compute_json)
    limits = limits_from_columns(row, str(ref.scope))
    with stored(f"the rule at {ref.scope}"):
        return Rule(
            scope=_scope_of(row),
            min_interval=ref.min_interval,
            owner_ref=str(row.owner_ref),
            revision=row.revision,
            updated_at=row.updated_at_us,
            compute=compute,
            compute_problem=problem,
            limits=limits,
        )


class DamagedRule(NamedTuple):
    """A stored rule row that cannot be decoded: its key as stored (a part may be NULL or not
    text) and why. It holds only the lanes it may cover (``may_cover``)."""

    goal_id: object
    agent_id: object
    automation_id: object
    problem: CorruptState

    def may_cover(self, goal: str, agent: str, automation: str | None) -> bool:
        """Whether this row could be one of the rules of lane ``goal/agent/automation``."""
        return may_cover((self.goal_id, self.agent_id, self.automation_id), goal, agent, automation)


def may_cover(key: tuple[object, object, object], goal: str, agent: str, automation: str | None) -> bool:
    """Whether a stored key (a part of it damaged: not text, NULL) could be ``goal/agent/automation``'s
    (``automation`` None: any of the agent's); a damaged part could be anything, and "" is a wildcard."""

    def could(part: object, value: str | None) -> bool:
        return not isinstance(part, str) or value is None or part in ("", value)

    g, a, x = key
    return could(g, goal) and (not isinstance(g, str) or could(a, agent)) and could(x, automation)


def read_compute(text: str | None) -> tuple[ComputeBlock | None, str | None]:
    """A stored compute block, or the problem that makes it unreadable (never a guess)."""
    if text is None:
        return None, None
    try:
        return parse_compute(text, "compute"), None
    except InvalidInput as exc:
        return None, str(exc)


@functools.cache
def _rules_statement(with_automation: bool) -> Select[Any]:
    # Built once per shape and bound per call: a limited lane reads its rules on every decision.
    r = s.rules
    wanted = [
        and_(r.c.agent_id == "", r.c.automation_id == ""),
        and_(r.c.agent_id == bindparam("agent"), r.c.automation_id == ""),
    ]
    if with_automation:
        wanted.append(and_(r.c.agent_id == bindparam("agent"), r.c.automation_id == bindparam("automation")))
    return select(r).where(r.c.goal_id == bindparam("goal"), or_(*wanted))


def applicable_rules(conn: Connection, goal: str, agent: str, automation: str | None) -> list[Rule]:
    """The stored rules at the goal, the agent and (if named) the automation; disabled ones included."""
    rows = conn.execute(_rules_statement(bool(automation)), {"goal": goal, "agent": agent, "automation": automation}).all()
    return [rule_from_row(row) for row in rows]


def _json_or_none(text: str | None):  # type: ignore[no-untyped-def]
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"unreadable": True}


NOTE_MAX = 500


def check_note(note: object) -> str | None:
    """An owner's note on a write: None or blank for none, else one printable line of at most ``NOTE_MAX``."""
    if note is None:
        return None
    if not isinstance(note, str):
        raise InvalidInput("note", "must be text")
    note = note.strip()
    if len(note) > NOTE_MAX or any(not c.isprintable() for c in note):
        raise InvalidInput("note", f"one line of printable text, at most {NOTE_MAX} characters")
    return note or None


class Policies(Repository):
    """Read and write owner floors."""

    def configure(
        self,
        scope: Scope,
        *,
        min_interval: timedelta | None = None,
        expected_revision: int,
        owner_ref: str,
        allow_reduction: bool = False,
        compute: ComputeBlock | None = None,
        provenance: Provenance = Provenance.ASSERTED,
        note: str | None = None,
        limits: LimitsChange | None = None,
    ) -> Rule:
        """Set the floor and/or the compute block at ``scope`` if its stored revision is
        ``expected_revision`` (0: none yet). What is not given is kept.

        Raises ``RevisionConflict`` (nothing written) on a revision mismatch and
        ``ReductionNotAuthorized`` when lowering or disabling the floor, or loosening a compute
        bound, without ``allow_reduction``. ``min_interval`` 0 disables only this scope's floor;
        an empty ``ComputeBlock()`` removes its compute block; start records are kept.
        ``provenance`` says who vouches for ``owner_ref`` (recorded with the write), ``note`` why
        (optional, recorded with it). ``limits`` changes the scope's limits across runs (a count
        or budget per window, the estimate, across agents; 0 removes one): any loosening of them
        (``admission.limits.loosened``) also needs ``allow_reduction``.
        """
        if not isinstance(scope, Scope):
            raise InvalidInput("scope", "pass a Scope (Scope.goal/agent/automation)")
        if limits is not None and (not isinstance(limits, LimitsChange) or limits.is_empty()):
            raise InvalidInput("limits", "pass a LimitsChange that changes something (see admission.limits)")
        if min_interval is None and compute is None and limits is None:
            raise InvalidInput(
                "min_interval",
                "give a floor (--min-interval), a compute block (--compute) and/or a limit (--max-starts, --budget-tokens, ...)",
            )
        if min_interval is not None:
            check_interval(min_interval)
        if compute is not None and not isinstance(compute, ComputeBlock):
            raise InvalidInput("compute", "pass a ComputeBlock (see admission.envelope.parse_compute)")
        if type(expected_revision) is not int or expected_revision < 0:
            raise InvalidInput("expected_revision", "pass the revision you read (0 when no rule exists)")
        check_owner_ref(owner_ref)
        if type(allow_reduction) is not bool:
            raise InvalidInput("allow_reduction", "must be True or False")
        provenance = Provenance(provenance)
        note = check_note(note)
        now = read_clock(self.clock)
        goal, agent, automation = scope.key()
        r = s.rules
        key = and_(r.c.goal_id == goal, r.c.agent_id == agent, r.c.automation_id == automation)
        with self.store.write(lock_key=locks.policy(goal, agent, automation)) as conn:
            limit_columns = [r.c[name] for name in Limits().columns()]
            row = conn.execute(select(r.c.min_interval_us, r.c.revision, r.c.compute_json, *limit_columns).where(key)).first()
            current_rev = row.revision if row is not None else 0
            before_us = _checked_us(row.min_interval_us, f"min_interval for {scope}") if row is not None else None
            if current_rev != expected_revision:
                raise RevisionConflict(str(scope), expected_revision, current_rev)
            current_us = before_us if before_us is not None else 0
            after_us = min_interval // timedelta(microseconds=1) if min_interval is not None else current_us
            if after_us < current_us and not allow_reduction:
                raise ReductionNotAuthorized(
                    str(scope), format_interval(timedelta(microseconds=current_us)), format_interval(timedelta(microseconds=after_us))
                )
            compute_before_text = row.compute_json if row is not None else None
            compute_after_text = compute_before_text
            if compute is not None:
                old_block, problem = read_compute(compute_before_text)
                # An unreadable stored block cannot be compared: replacing it needs authorization.
                looser = loosened(old_block, compute) if problem is None else ["replacing an unreadable block"]
                if looser and not allow_reduction:
                    raise ReductionNotAuthorized(
                        str(scope), "", "", what=f"loosening the compute envelope on {scope} ({', '.join(looser)})"
                    )
                compute_after_text = None if compute.is_empty() else json.dumps(compute.doc(), sort_keys=True)
            # A damaged stored limit reads as CorruptState: it must be repaired, never silently replaced.
            limits_before = limits_from_columns(row, str(scope)) if row is not None else Limits()
            limits_after = limits.apply(limits_before, scope) if limits is not None else limits_before
            looser_limits = limits_loosened(limits_before, limits_after)
            if looser_limits and not allow_reduction:
                raise ReductionNotAuthorized(str(scope), "", "", what=f"loosening the limits on {scope} ({', '.join(looser_limits)})")
            new_rev = current_rev + 1
            compute_now, problem_now = read_compute(compute_after_text)
            rule = Rule(
                scope=scope,
                min_interval=timedelta(microseconds=after_us),
                owner_ref=owner_ref,
                revision=new_rev,
                updated_at=now,
                compute=compute_now,
                compute_problem=problem_now,
                limits=limits_after,
            )
            # The row written is the rule returned; a compute block not given is kept as read (unreadable or not).
            values = {**rule.columns(), "compute_json": compute_after_text}
            lane = dict(goal_id=goal, agent_id=agent, automation_id=automation)
            if row is None:
                conn.execute(insert(r).values(**lane, **values))
            else:
                done = conn.execute(update(r).where(key, r.c.revision == current_rev).values(**values))
                if done.rowcount != 1:
                    raise RevisionConflict(str(scope), expected_revision, current_rev)
            # What the history row and the event both say of this write.
            change = {
                "before_us": before_us,
                "after_us": after_us,
                "revision": new_rev,
                "owner_ref": owner_ref,
                "owner_kind": provenance.value,
                "reduction_authorized": allow_reduction,
                "note": note,
            }
            conn.execute(
                insert(s.rule_history).values(
                    **lane,
                    **change,
                    changed_at_us=now,
                    compute_before=compute_before_text,
                    compute_after=compute_after_text,
                    limits_before=limits_json(limits_before),
                    limits_after=limits_json(limits_after),
                )
            )
            compute_changed = compute_after_text != compute_before_text
            data = {"scope": str(scope), **change, "compute_changed": compute_changed, "limits_changed": limits_after != limits_before}
            record(conn, EventKind.FLOOR_CHANGED, str(scope), data, now)
        return rule

    def get(self, scope: Scope) -> Rule | None:
        """The rule stored at exactly ``scope`` (possibly disabled), or None if never written."""
        goal, agent, automation = scope.key()
        r = s.rules
        row = self._read_first(select(r).where(r.c.goal_id == goal, r.c.agent_id == agent, r.c.automation_id == automation))
        return rule_from_row(row) if row is not None else None

    def applicable(self, goal: str, agent: str, automation: str | None = None) -> builtins.list[Rule]:
        """The stored rules over one lane: at its goal, its agent and (if named) its automation;
        disabled ones included (one read)."""
        check_id(goal, "goal")
        check_id(agent, "agent")
        if automation is not None:
            check_id(automation, "automation")
        with self.store.read() as conn:
            return applicable_rules(conn, goal, agent, automation)

    def effective(self, goal: str, agent: str, automation: str | None = None) -> EffectiveFloor:
        """The binding floor for ``agent`` (and ``automation``, when given)."""
        rules = self.applicable(goal, agent, automation)
        refs = [
            RuleRef(
                scope=r.scope,
                min_interval=r.min_interval,
                revision=r.revision,
                across_agents=r.limits.across_agents and r.scope.kind is ScopeKind.GOAL,
            )
            for r in rules
        ]
        return combine(goal, agent, automation, refs)

    def list(self, goal: str | None = None) -> list[Rule]:
        """Every stored rule (of one goal, if given), disabled ones included."""
        r = s.rules
        query = select(r).order_by(r.c.goal_id, r.c.agent_id, r.c.automation_id)
        if goal is not None:
            query = query.where(r.c.goal_id == check_id(goal, "goal"))
        with self.store.read() as conn:
            return [rule_from_row(row) for row in conn.execute(query)]

    def scan(self) -> tuple[builtins.list[Rule], builtins.list[DamagedRule]]:
        """Every stored rule that decodes, and every row that does not (one read): a damaged row
        fails closed only the lanes it may cover, never every lane of the store."""
        r = s.rules
        good: builtins.list[Rule] = []
        bad: builtins.list[DamagedRule] = []
        with self.store.read() as conn:  # times undecoded: one malformed time must not fail the read
            rows = conn.execute(select(*raw_columns(r)).order_by(r.c.goal_id, r.c.agent_id, r.c.automation_id)).all()
        for row in rows:
            try:
                with stored(f"the rule at {row.goal_id!r}/{row.agent_id!r}/{row.automation_id!r}"):
                    good.append(rule_from_row(decode_row(r, row)))
            except CorruptState as exc:
                bad.append(DamagedRule(row.goal_id, row.agent_id, row.automation_id, exc))
        return good, bad

    def history(self, scope: Scope | None = None, limit: int = 100) -> builtins.list[RuleChange]:
        """Provenance records, newest first; under ``scope`` (and its narrower scopes) if given."""
        h = s.rule_history
        check_limit(limit)
        query = select(h).order_by(h.c.id.desc()).limit(limit)
        if scope is not None:
            goal, agent, automation = scope.key()
            query = query.where(h.c.goal_id == goal)
            if agent:
                query = query.where(h.c.agent_id == agent)
            if automation:
                query = query.where(h.c.automation_id == automation)
        with self.store.read() as conn:
            rows = conn.execute(query).all()
        with stored(f"the rule history of {scope if scope is not None else 'every scope'}"):
            return [
                RuleChange(
                    id=row.id,
                    scope=_scope_of(row),
                    before=timedelta(microseconds=row.before_us) if row.before_us is not None else None,
                    after=timedelta(microseconds=row.after_us),
                    revision=row.revision,
                    owner_ref=row.owner_ref,
                    changed_at=row.changed_at_us,
                    reduction_authorized=bool(row.reduction_authorized),
                    compute_before=_json_or_none(row.compute_before),
                    compute_after=_json_or_none(row.compute_after),
                    owner_kind=_provenance(row.owner_kind),
                    note=row.note,
                    limits_before=_json_or_none(row.limits_before),
                    limits_after=_json_or_none(row.limits_after),
                )
                for row in rows
            ]
