"""What a host's timer tick must know before it asks admission, read in one statement.

A tick needs its automation's revision (the host decodes the row once per revision), its wake
state, whether a turn of it is still unsettled, whether its envelope's mission state could refuse
or hold it, and a fingerprint of the rules of its lane (so the host can judge the envelope's
precheck once per rule change). All of it is one autocommitted SELECT of scalar subqueries on the
hot path's connection: one round trip, one consistent snapshot, no transaction. The statement is
built from ``TICK_FACTS``, one declaration per fact.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

from sqlalchemy import and_, func, or_, select
from sqlalchemy.sql.elements import ColumnElement

from ._schema import automations, missions, rules, turns, wake_state
from ._types import decode_us
from .automations import WakeState, _wake_from_row
from .decide._sql import DIALECTS, EMPTY, ONE, ZERO, A, G, X, compiled, text_value
from .decide.facts import Fact, scalar
from .errors import CorruptState, StoreUnavailable
from .scope import check_id
from .store import Store


# The tick's facts, each declared once as the decision's are (``decide.facts.Fact``: its column
# and Core expression over ``:x`` automation, ``:g`` goal, ``:a`` agent). The rules' fingerprint
# reads the rules of the lane from ``_RULES`` (one scan: point lookups of its index); it is written
# here rather than derived from the decision's ``rules`` fact, which reads more than a fingerprint needs.
def _wake(column: str) -> Fact:
    return Fact(column, column, scalar(select(wake_state.c[column]).where(wake_state.c.automation_id == X)), "bigint")


def _exists(*where: ColumnElement[bool]) -> ColumnElement[bool]:
    return select(ONE).where(*where).correlate(None).exists()


_r = rules.c
_RULES = (
    select(
        func.count().label("n"),
        func.coalesce(func.sum(_r.revision), ZERO).label("revisions"),
        func.coalesce(func.max(_r.updated_at_us), ZERO).label("changed"),
    )
    .where(
        _r.goal_id == G,
        or_(and_(_r.agent_id == EMPTY, _r.automation_id == EMPTY), and_(_r.agent_id == A, _r.automation_id.in_([EMPTY, X]))),
    )
    .subquery("r")
)
_m = missions.c
_OWNER_TOUCHED = scalar(select(automations.c.updated_at_us).where(automations.c.automation_id == X))

TICK_FACTS = (
    Fact("revision", "revision", scalar(select(automations.c.revision).where(automations.c.automation_id == X)), "bigint"),
    *map(_wake, ("backoff_step", "backoff_wake_us", "failures", "failed_at_us", "failing_until_us")),
    Fact("unsettled", "unsettled", _exists(turns.c.automation_id == X, turns.c.phase != text_value("settled")), "boolean"),
    # Any mission that is open or waiting for its owner, or that got stuck after the owner last
    # touched the automation, makes the host read the missions itself (the executor's precheck and
    # stuck-mission hold); otherwise the envelope's precheck depends on the lane's rules alone.
    Fact(
        "missions_pending",
        "missions_pending",
        _exists(
            _m.automation_id == X,
            or_(
                _m.status.in_([text_value("open"), text_value("awaiting_owner")]),
                and_(_m.status == text_value("stuck"), _m.settled_at_us >= _OWNER_TOUCHED),
            ),
        ),
        "boolean",
    ),
    Fact("rule_count", "rule_count", _RULES.c.n, "bigint"),
    Fact("rule_revisions", "rule_revisions", _RULES.c.revisions, "bigint"),
    Fact("rules_changed", "rules_changed", _RULES.c.changed, "bigint"),
)
"""The facts a tick reads, in the order of its one statement's columns."""
# Compiled once per dialect: the string the hot connection runs at every tick.
_SQL = {d: compiled(select(*(f.expr for f in TICK_FACTS)).select_from(_RULES), d) for d in DIALECTS}


@dataclass(frozen=True)
class TickFacts:
    """One automation's tick inputs as of one read.

    ``revision`` None: the automation is gone. ``missions_pending``: a mission is open, waiting for
    its owner, or stuck since the owner's last change (the caller must judge the envelope from the
    missions themselves). ``rules``: a fingerprint of the lane's rules (count, revisions, last change).
    """

    automation_id: str
    revision: int | None
    wake: WakeState
    unsettled: bool
    missions_pending: bool
    rules: tuple[int, int, int]


def read_tick_facts(store: Store, automation_id: str, goal: str, agent: str) -> TickFacts:
    """The facts of ``automation_id``'s tick for the lane ``goal/agent`` (one statement).

    A malformed wake state raises ``StoreUnavailable`` naming the automation (fail closed)."""
    automation = check_id(automation_id, "automation")
    params = {"x": automation, "g": check_id(goal, "goal"), "a": check_id(agent, "agent")}
    row = store.autocommit.row(_SQL[store.dialect], params)
    if row is None:  # pragma: no cover - a SELECT of scalars always returns one row
        raise StoreUnavailable(f"the tick facts of automation {automation_id!r} could not be read")
    revision, step, wake_us, failures, failed_us, until_us, unsettled, missions, count, revisions, changed = row
    wake = WakeState(automation_id=automation_id)
    if step is not None:
        try:
            wake_at = decode_us(wake_us) if wake_us is not None else None
            failed_at = decode_us(failed_us) if failed_us is not None else None
            until = decode_us(until_us) if until_us is not None else None
        except CorruptState as exc:
            raise StoreUnavailable(f"wake state of automation {automation_id!r} is malformed in the store: {exc}") from None
        wake = _wake_from_row(
            SimpleNamespace(
                automation_id=automation_id,
                backoff_step=step,
                backoff_wake_us=wake_at,
                failures=failures,
                failed_at_us=failed_at,
                failing_until_us=until,
            )
        )
    if revision is not None and type(revision) is not int:
        raise StoreUnavailable(f"automation {automation_id!r} has a malformed revision in the store: {revision!r}")
    return TickFacts(
        automation_id=automation_id,
        revision=revision,
        wake=wake,
        unsettled=bool(unsettled),
        missions_pending=bool(missions),
        rules=_fingerprint(count, revisions, changed),
    )


# A fingerprint no lane's rules ever have: the caller judges the rules again at each tick.
UNREADABLE_RULES = (-1, -1, -1)


def _fingerprint(count: object, revisions: object, changed: object) -> tuple[int, int, int]:
    """The rules' fingerprint; a value a hand edit left unreadable (a time of the wrong type) gives
    ``UNREADABLE_RULES``, and the rules' own decoder then fails this lane closed (only this one)."""
    try:
        return int(count), int(revisions), int(changed)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return UNREADABLE_RULES
