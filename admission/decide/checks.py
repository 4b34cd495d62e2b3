"""The decision as one ordered table of checks.

Each ``Check`` is one row: the reason it gives, what it does to the store when it decides
(``Outcome``), its predicate over the facts and the request in Python (``holds``) and in SQL over
``fg_facts``' row (``sql``: ``f.<fact>`` columns, ``p_<param>`` arguments), the detail it explains
itself with, and its readback form (None: readback, which has no turn and no trigger, skips it).
The first row that holds decides. ``evaluate`` (reserve, on both backends) and ``judge``
(readback) loop over ``CHECKS``; ``render`` turns the same rows into PostgreSQL's CASE.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from enum import Enum
from functools import lru_cache
from typing import Any, Literal, NamedTuple

from ..clock import ceil_second, from_us, iso
from ..intervals import format_interval
from .facts import Facts, LimitCode, Phase
from .floors import MAX_US, EffectiveFloor, goal_binds, next_eligible_us


# The reasons and readback statuses live beside the rows that give them: a new kind of refusal is
# one member here and one row below (``admission.decisions`` re-exports both).
class Reason(str, Enum):
    """The closed set of reasons a reservation is admitted or denied (each ``Check`` row gives one)."""

    ELIGIBLE = "eligible"  # admitted: the floor has elapsed
    NO_RULE = "no_rule"  # admitted: no floor applies; no cadence state written
    MANUAL = "manual"  # admitted: an explicit manual reason bypassed the interval
    RESUMED = "resumed"  # admitted: the same turn's earlier reservation, anchor unmoved
    INTERVAL_WAIT = "interval_wait"
    COUNT_EXHAUSTED = "count_exhausted"  # denied: a max-starts-per-window limit is reached
    BUDGET_EXHAUSTED = "budget_exhausted"  # denied: a token or USD budget would be crossed
    DUPLICATE_TRIGGER = "duplicate_trigger"
    TURN_ALREADY_STARTED = "turn_already_started"
    STALE_TRIGGER = "stale_trigger"
    CLOCK_ROLLBACK = "clock_rollback"
    STATE_UNAVAILABLE = "state_unavailable"


# Where a lane stands in readback (``Eligibility.status``, each check's ``Readback.status``): the one
# list of them; limit_wait: a count or budget.
EligibilityStatus = Literal["eligible", "interval_wait", "limit_wait", "unavailable"]


class Explained(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    """A detail line not yet rendered: ``render(*args)`` (equal when template and arguments are)."""

    render: Callable[..., str]
    args: tuple[Any, ...]

    def text(self) -> str:
        return self.render(*self.args)


class Request(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    """What one decision is asked: the lane, the turn, its trigger and a manual reason."""

    goal: str
    agent: str
    automation: str | None
    turn_id: str
    trigger_time: datetime  # aware UTC
    trigger_us: int
    manual_reason: str | None

    @property
    def lane(self) -> str:
        return self.automation or ""


class Verdict(NamedTuple):  # a plain immutable value: one per decision, cheap to build
    """What a check decided: its reason, the floor, the next eligible time and the new anchor."""

    reason: Reason
    floor: EffectiveFloor | None
    next_us: int | None
    anchor_us: int | None = None
    detail: Explained | str = ""


class Outcome(str, Enum):
    """What a decision does to the store (the value PostgreSQL's ``fg_facts`` returns)."""

    INSERT = "insert"  # admitted with a new start (the anchor is now)
    ADMIT = "admit"  # admitted without a new start (resumed, or no rule)
    DENY = "deny"


class Anchor(Enum):
    """The anchor an admitting check reports."""

    NONE = 0
    TURN = 1  # the turn's own earlier reservation
    NOW = 2  # a new start, now


class Readback(NamedTuple):
    """A check's form in readback (eligibility): its status and detail."""

    status: EligibilityStatus
    detail: Callable[[Facts], str]


Holds = Callable[[Facts, Request, int, "int | None"], bool]  # facts, request, now (us), next eligible (us)
Detail = Callable[[Facts, Request, int], "Explained | str"]  # facts, request, now (us)


class Check(NamedTuple):
    """One row of the decision (see the module docstring)."""

    id: str
    reason: Reason
    outcome: Outcome
    holds: Holds
    sql: str
    detail: Detail
    anchor: Anchor = Anchor.NONE
    reports_next: bool = True  # whether its verdict carries the next eligible time
    readback: Readback | None = None
    # When this check stops holding on its own (microseconds), for the decision's next eligible
    # time: the latest of all checks' is reported. None: the check does not wait for time.
    next_us: Callable[[Facts, Request], int | None] | None = None
    # A denial that reports no next eligible time: what ends it, in words (``until``).
    until: str | None = None
    # The limit code under which its ``next_us`` can be a time (None: any): a count's or a
    # budget's row waits only when the client's check found that kind binding.
    waits_when: LimitCode | None = None


# -- the details (rendered only when a caller reads ``Decision.detail``) ------------------------
_RESUMING = "resuming this turn's unconfirmed reservation; the anchor is unchanged"
_NO_FLOOR = "no floor applies; admitted without cadence state"
_ROLLED_BACK = "the clock reads earlier than the last start; denied until it passes it"
_BYPASSED = "manual run bypassed the interval"


def _already_started(turn_id: str, phase: Phase, where: str) -> str:
    return f"turn {turn_id} already has a {phase.value} start{where}; it is never admitted again"


def _duplicate(trigger_us: int, turn: str) -> str:
    return f"this lane's trigger at {iso(from_us(trigger_us))} already started as turn {turn}"


def _stale(lane_trigger_us: int) -> str:
    return f"trigger is older than this lane's last admitted trigger ({iso(from_us(lane_trigger_us))})"


@lru_cache(maxsize=256)  # one text per floor: ten thousand lanes under one floor share it
def waiting(floor: timedelta) -> str:
    """The detail of a floor not yet elapsed."""
    return f"floor {format_interval(floor)} not yet elapsed since the last start"


@lru_cache(maxsize=256)
def goal_waiting(floor: timedelta, goal: str) -> str:
    """The detail of a goal floor across agents not yet elapsed (it names the goal)."""
    return f"floor {format_interval(floor)} across the agents of goal {goal} not yet elapsed since the goal's last start"


@lru_cache(maxsize=256)
def elapsed(floor: timedelta) -> str:
    """The detail of a floor that has elapsed."""
    return f"floor {format_interval(floor)} has elapsed"


def _lane_of(req: Request) -> str:
    return f"{req.goal}/{req.agent}/{req.lane}"


def _turn_elsewhere(f: Facts, req: Request, _now: int) -> Explained:
    where = "" if f.turn_lane == _lane_of(req) else f" in lane {f.turn_lane}"
    return Explained(_already_started, (req.turn_id, f.turn_phase, where))


def _floor_next(f: Facts, req: Request) -> int | None:
    lane_anchor = f.lane_anchor_us if req.automation else None
    return next_eligible_us(f.agent_floor_us, f.lane_floor_us, f.agent_anchor_us, lane_anchor, f.goal_floor_us, f.goal_anchor_us)


def _waiting(f: Facts) -> Explained:
    """The floor's wait, naming the goal when its floor across agents is the one that binds."""
    if f.goal_floor_us:  # (no goal floor across agents: it cannot bind)
        lane_anchor = f.lane_anchor_us if f.floor.automation_id else None
        if goal_binds(f.agent_floor_us, f.lane_floor_us, f.agent_anchor_us, lane_anchor, f.goal_floor_us, f.goal_anchor_us):
            return Explained(goal_waiting, (f.floor.goal_floor, f.floor.goal_id))
    return Explained(waiting, (f.floor.floor,))


_UNCHECKED = "this lane has counts or budgets that were not checked in this read; denied until they are (fail closed)"
_UNKNOWN = "unknown (state unavailable)"
_RAISED = "an owner changes a limit"  # a limit no window frees


def _binding(f: Facts) -> object | None:
    """The limit state that binds (``budgets.binding``: of the blocked ones, the one that frees
    last), None when none was read; duck-typed so the table stays free of the store's modules."""
    blocked = [x for x in f.limits if x.blocked]
    return max(blocked, key=lambda x: x.frees_at or _NEVER) if blocked else None


def _limit_next(code: LimitCode) -> Callable[[Facts, Request], int | None]:
    def next_us(f: Facts, req: Request) -> int | None:
        if not f.limited or f.limit_code != code:
            return None
        state = _binding(f)
        frees = getattr(state, "frees_at", None)
        if frees is None:
            return None
        us: int = (frees - _EPOCH) // _ONE_US
        return min(us, MAX_US)  # MAX_US: never by waiting (``reported_next_us`` reports no time)

    return next_us


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NEVER = datetime.max.replace(tzinfo=timezone.utc)
_ONE_US = timedelta(microseconds=1)


def _raise_command(state: object) -> str:
    """The command an owner runs to raise the binding limit (doubling it), at its scope."""
    limit = state.limit  # type: ignore[attr-defined]
    flag = {"starts": "--max-starts", "tokens": "--budget-tokens", "usd": "--budget-usd"}[limit.kind.value]
    amount = limit.amount * 2
    shown = f"{amount / 1_000_000:.6f}".rstrip("0").rstrip(".") if limit.kind.value == "usd" else str(amount)
    return (
        f"floorgate policy set {limit.scope} {flag} {shown} --per {limit.window} --revision {limit.revision}"
        ' --owner-ref "$(id -un)" --allow-reduction'  # never empty, unlike $USER in cron or a container
    )


def _limit_text(f: Facts) -> str:
    """The binding limit, where it stands and when it frees (readback's detail; reserve's adds the
    manual run's way out)."""
    state = _binding(f)
    if state is None:  # pragma: no cover - a code is only set with a blocked state
        return "a limit across runs is reached"
    limit = state.limit  # type: ignore[attr-defined]
    text = f"{limit.describe()}: used {limit.quantity(state.used)}, held {limit.quantity(state.held)}"  # type: ignore[attr-defined]
    short = getattr(state, "short_by", None)  # why a budget with some of it left blocks
    if short is not None:
        text += f", left {limit.quantity(state.left)}, the next start holds {limit.quantity(short)}"  # type: ignore[attr-defined]
    problem = getattr(state, "problem", None)
    if problem:
        text += f"; cannot be checked: {problem}"
    frees = state.frees_at  # type: ignore[attr-defined]
    if frees is not None and frees.year < 9000:
        text += f"; frees at {iso(ceil_second(frees))}"  # text: whole seconds, rounded up
    else:
        text += "; waiting does not free it"
    return text


def _limit_detail(f: Facts, req: Request, _now: int) -> str:
    text = _limit_text(f)
    state = _binding(f)
    if req.manual_reason is not None and state is not None and not getattr(state, "problem", None):  # raising would not help
        text += f"; manual runs count too: to raise it run '{_raise_command(state)}'"
    return text


def _exhausted(check_id: str, reason: Reason, code: LimitCode) -> Check:
    """The row denying a lane whose counts or budgets, checked by the client, bind with ``code``."""
    return Check(
        check_id,
        reason,
        Outcome.DENY,
        lambda f, req, now, nxt: f.limited > 0 and f.limit_code == code,
        f"f.limited > 0 AND f.lim = {code.value}",
        _limit_detail,
        readback=Readback("limit_wait", _limit_text),
        next_us=_limit_next(code),
        until=_RAISED,
        waits_when=code,
    )


# The floor, in SQL: now is earlier than an anchor plus its floor (the latest of them, as
# ``next_eligible_us``); a lane floor counts only for a request naming its automation, a goal floor
# across agents from the goal's latest start.
_FLOOR_WAITS = (
    "((f.agent_floor > 0 AND f.ag IS NOT NULL AND p_now < f.ag + f.agent_floor)"
    " OR (p_x <> '' AND f.lane_floor > 0 AND f.ln IS NOT NULL AND p_now < f.ln + f.lane_floor)"
    " OR (f.goal_floor > 0 AND f.gl IS NOT NULL AND p_now < f.gl + f.goal_floor))"
)

CHECKS: tuple[Check, ...] = (
    Check(
        "resumed",
        Reason.RESUMED,
        Outcome.ADMIT,
        lambda f, req, now, nxt: f.turn_phase is Phase.RESERVED and f.turn_lane == _lane_of(req),
        "f.turn IS NOT NULL AND f.t_phase = 'reserved' AND f.t_goal = p_g AND f.t_agent = p_a AND f.t_lane = p_x",
        lambda f, req, now: _RESUMING,
        anchor=Anchor.TURN,
        reports_next=False,
    ),
    Check(
        "turn_already_started",
        Reason.TURN_ALREADY_STARTED,
        Outcome.DENY,
        lambda f, req, now, nxt: f.turn_phase is not None,
        "f.turn IS NOT NULL",
        _turn_elsewhere,
        reports_next=False,
        until="never (this turn id already started)",
    ),
    Check(
        "no_rule",
        Reason.NO_RULE,
        Outcome.ADMIT,
        lambda f, req, now, nxt: not f.floor.rules and not f.limited,
        "f.active_rules = 0 AND f.limited = 0",
        lambda f, req, now: _NO_FLOOR,
        reports_next=False,
        readback=Readback("eligible", lambda f: "no floor applies"),
    ),
    Check(
        "clock_rollback",
        Reason.CLOCK_ROLLBACK,
        Outcome.DENY,
        lambda f, req, now, nxt: f.agent_anchor_us is not None and now < f.agent_anchor_us,
        "f.ag IS NOT NULL AND p_now < f.ag",
        lambda f, req, now: _ROLLED_BACK,
        until="the clock passes the last start",
        readback=Readback("interval_wait", lambda f: "the clock reads earlier than the last start; waiting until it passes it"),
    ),
    Check(
        "duplicate_trigger",
        Reason.DUPLICATE_TRIGGER,
        Outcome.DENY,
        lambda f, req, now, nxt: f.duplicate_turn is not None,
        "f.dup IS NOT NULL",
        lambda f, req, now: Explained(_duplicate, (req.trigger_us, f.duplicate_turn)),
        until="a new trigger",
    ),
    Check(
        "stale_trigger",
        Reason.STALE_TRIGGER,
        Outcome.DENY,
        lambda f, req, now, nxt: f.lane_trigger_us is not None and req.trigger_us < f.lane_trigger_us,
        "f.ln_tr IS NOT NULL AND p_tr < f.ln_tr",
        lambda f, req, now: Explained(_stale, (f.lane_trigger_us,)),
        until="a newer trigger",
    ),
    Check(
        "interval_wait",
        Reason.INTERVAL_WAIT,
        Outcome.DENY,
        lambda f, req, now, nxt: req.manual_reason is None and nxt is not None and now < nxt,
        "p_reason IS NULL AND " + _FLOOR_WAITS,
        lambda f, req, now: _waiting(f),
        readback=Readback("interval_wait", lambda f: _waiting(f).text()),
        next_us=_floor_next,
    ),
    # Counts and budgets, manual runs included (they bypass only the interval). The client checks
    # them (``admission._limit_check``) and decides again with the result as ``:lim``.
    Check(
        "limits_unchecked",
        Reason.STATE_UNAVAILABLE,
        Outcome.DENY,
        lambda f, req, now, nxt: f.limited > 0 and f.limit_code is None,
        "f.limited > 0 AND f.lim IS NULL",
        lambda f, req, now: _UNCHECKED,
        reports_next=False,
        readback=Readback("unavailable", lambda f: _UNCHECKED),
        until=_UNKNOWN,
    ),
    _exhausted("count_exhausted", Reason.COUNT_EXHAUSTED, LimitCode.COUNT),
    _exhausted("budget_exhausted", Reason.BUDGET_EXHAUSTED, LimitCode.BUDGET),
    Check(
        "manual_bypass",
        Reason.MANUAL,
        Outcome.INSERT,
        lambda f, req, now, nxt: req.manual_reason is not None and nxt is not None and now < nxt,
        "p_reason IS NOT NULL AND " + _FLOOR_WAITS,
        lambda f, req, now: _BYPASSED,
        anchor=Anchor.NOW,
    ),
    Check(
        "manual",
        Reason.MANUAL,
        Outcome.INSERT,
        lambda f, req, now, nxt: req.manual_reason is not None,
        "p_reason IS NOT NULL",
        lambda f, req, now: Explained(elapsed, (f.floor.floor,)),
        anchor=Anchor.NOW,
    ),
    Check(
        "eligible",
        Reason.ELIGIBLE,
        Outcome.INSERT,
        lambda f, req, now, nxt: True,
        "true",
        lambda f, req, now: Explained(elapsed, (f.floor.floor,)),
        anchor=Anchor.NOW,
        readback=Readback("eligible", lambda f: elapsed(f.floor.floor)),
    ),
)
READBACK = tuple(c for c in CHECKS if c.readback is not None)
# The reasons whose decision reports the lane's next eligible time as of that decision (so a host
# may plan its timer from the decision without reading the store again): every reason but those a
# denying check gives without its next time, and the state that cannot be read.
PLANNED_BY_DECISION = (
    frozenset(Reason) - {c.reason for c in CHECKS if c.outcome is Outcome.DENY and not c.reports_next} - {Reason.STATE_UNAVAILABLE}
)
_LIMIT_ROWS = {
    LimitCode.COUNT: CHECKS[[c.id for c in CHECKS].index("count_exhausted")],
    LimitCode.BUDGET: CHECKS[[c.id for c in CHECKS].index("budget_exhausted")],
}
# Per limit code (None: the limits not checked), the checks whose wait may count: a decision asks
# only those (a lane no limit binds asks the floor's alone).
_NEXT = {code: tuple(c.next_us for c in CHECKS if c.next_us is not None and c.waits_when in (None, code)) for code in (None, *LimitCode)}


def _untils() -> dict[Reason, str]:
    """Each reason's ``until``: the first row giving it that declares one. An unreadable state's is
    the unchecked limits' row's (the gate's own fail-closed denials give that reason too)."""
    out: dict[Reason, str] = {}
    for c in CHECKS:
        if c.until is not None:
            out.setdefault(c.reason, c.until)
    return out


_UNTIL = _untils()


def until(reason: Reason) -> str:
    """What ends a denial with ``reason`` that reports no next eligible time, in words ("may not run
    before ..."), as its check declares it."""
    return _UNTIL.get(reason, _UNKNOWN)


def next_us_of(f: Facts, req: Request) -> int | None:
    """When the floors next allow an automatic start (what the checks are judged with); None when
    no floor counts from a start."""
    if not f.floor.rules:
        return None
    return _floor_next(f, req)


def reported_next_us(f: Facts, req: Request, floor_next: int | None) -> int | None:
    """The next eligible time a decision reports: the latest of every check that waits for time
    (the floor's ``floor_next``, a count's or a budget's frees time); None when none waits."""
    if not f.limited:
        return floor_next
    out = floor_next
    for compute in _NEXT[f.limit_code]:
        at = compute(f, req)
        if at is not None and (out is None or at > out):
            out = at
    return out if out is None or out < MAX_US else None  # a limit no wait frees: no time


def first(checks: tuple[Check, ...], f: Facts, req: Request, now_us: int) -> tuple[Check, int | None]:
    """The first check of ``checks`` that holds, and the next eligible time it reports (the latest
    of all checks that wait for time)."""
    nxt = next_us_of(f, req)
    for check in checks:
        if check.holds(f, req, now_us, nxt):
            if check.id == "interval_wait" and f.limited and f.limit_code in _LIMIT_ROWS:
                # Both deny: the reason names the one that binds longest (the floor on a tie).
                row = _LIMIT_ROWS[LimitCode(f.limit_code)]
                later = row.next_us(f, req) if row.next_us is not None else None
                if row in checks and (later is None or nxt is None or later > nxt):
                    check = row
            return check, reported_next_us(f, req, nxt)
    raise AssertionError("the last check always holds")  # pragma: no cover - 'eligible' holds


def evaluate(f: Facts, req: Request, now_us: int) -> Verdict:
    """The decision of a reservation from the lane's facts (both backends decide with it)."""
    check, nxt = first(CHECKS, f, req, now_us)
    anchor = check.anchor
    anchor_us = now_us if anchor is Anchor.NOW else f.turn_anchor_us if anchor is Anchor.TURN else None
    return Verdict(check.reason, f.floor, nxt if check.reports_next else None, anchor_us, check.detail(f, req, now_us))


def judge(f: Facts, req: Request, now_us: int) -> tuple[Reason, Readback, int | None]:
    """The readback decision (eligibility): the reason and readback form of the first readback
    check that holds, and the next eligible time (None when that check does not report one)."""
    check, nxt = first(READBACK, f, req, now_us)
    readback = check.readback
    if readback is None:  # pragma: no cover - READBACK holds rows with a readback form only
        raise AssertionError(check.id)
    return check.reason, readback, nxt if check.reports_next else None
