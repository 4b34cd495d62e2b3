"""One rendering of admission facts for every surface (CLI JSON, tables, hooks, status).

Surfaces never decide eligibility themselves: they show the owner-produced state and the exact
next eligible time from these documents. JSON carries UTC ISO times; status tables show each time
in its schedule's zone with how far it is from the readback's own clock reading ('in 14 min',
'3 h ago'), like ``systemctl list-timers``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from floorgate.admission import Confirmation, Debounce, Decision, EffectiveFloor, Eligibility, Envelope, Rule, RuleChange, StartRecord
from floorgate.admission.clock import iso
from floorgate.admission.intervals import format_interval

from ._instants import ceil_second
from .present_limits import limits_brief, limits_doc

if TYPE_CHECKING:
    from floorgate.admission import Automation, Mission, Tick, TimerBinding, TurnRecord, Verdict
    from floorgate.admission.liveness import HostBeat

    from ..app.budget_readback import LaneLimits
    from ..app.guarantee import GuaranteeReadback
    from ..app.readback import AutomationReadback

_Shown = TypeVar("_Shown")
_Doc = TypeVar("_Doc")


def terminal_safe(text: str, *, lines: bool = True) -> str:
    """``text`` as a terminal may show it: each character that is not printable (a NUL, ESC or CSI
    starting an escape sequence, any other C0 or C1 control) as its Python escape (``\\x1b``). A
    stored value (a pause note written before notes were checked, a hand edit) never reaches the
    terminal raw. ``lines``: keep line breaks and tabs (a whole rendering); False escapes them too
    (one stored value inside a line)."""
    if text.isprintable():
        return text
    keep = "\n\t" if lines else ""
    return "".join(c if c.isprintable() or c in keep else repr(c)[1:-1] for c in text)


def optional(render: Callable[[_Shown], _Doc]) -> Callable[[_Shown | None], _Doc | None]:
    """``render`` for a value that may be absent: None is shown as None (``start_doc(None)``)."""

    @functools.wraps(render)
    def shown(value: _Shown | None) -> _Doc | None:
        return None if value is None else render(value)

    return shown


class _InLane(Protocol):
    @property
    def goal_id(self) -> str: ...
    @property
    def agent_id(self) -> str: ...
    @property
    def automation_id(self) -> str | None: ...


def lane_keys(x: _InLane) -> dict[str, str | None]:
    """The lane ``x`` belongs to, named as every document names it: goal, agent, automation."""
    return {"goal": x.goal_id, "agent": x.agent_id, "automation": x.automation_id}


def seconds_of(value: timedelta | None) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds()
    return int(seconds) if seconds == int(seconds) else seconds


@optional
def floor_doc(floor: EffectiveFloor) -> dict[str, Any]:
    # A goal floor across agents is shown where one applies (other lanes' documents are unchanged).
    across = {"goal_floor": format_interval(floor.goal_floor), "goal_floor_seconds": seconds_of(floor.goal_floor)}
    return {
        "floor": format_interval(floor.floor),
        "floor_seconds": seconds_of(floor.floor),
        "agent_floor": format_interval(floor.agent_floor),
        "lane_floor": format_interval(floor.lane_floor),
        **(across if floor.goal_floor else {}),
        "rules": [
            {
                "scope": str(r.scope),
                "scope_kind": r.scope.kind.value,
                "min_interval": format_interval(r.min_interval),
                "revision": r.revision,
                **({"across_agents": True} if r.across_agents else {}),
            }
            for r in floor.rules
        ],
    }


def floor_text(floor: EffectiveFloor | None) -> str:
    """A lane's floor in one phrase: ``15m``, or ``1h (15m across the agents of goal g)``."""
    if floor is None:
        return "-"
    if not floor.goal_floor:
        return format_interval(floor.floor)
    across = f"{format_interval(floor.goal_floor)} across the agents of goal {floor.goal_id}"
    return across if floor.goal_floor == floor.floor else f"{format_interval(floor.floor)} ({across})"


@optional
def start_doc(start: StartRecord) -> dict[str, Any]:
    return {
        "turn_id": start.turn_id,
        **lane_keys(start),
        "trigger_time": iso(start.trigger_time),
        "anchor_at": iso(start.anchor_at),
        "phase": start.phase.value,
        "phase_recorded": start.phase_recorded,
        "kind": start.kind.value,
        "manual_reason": start.manual_reason,
        "confirmed_at": iso(start.confirmed_at),
    }


def decision_doc(d: Decision) -> dict[str, Any]:
    return {
        "admitted": d.admitted,
        "reason": d.reason.value,
        "turn_id": d.turn_id,
        **lane_keys(d),
        "kind": d.kind.value,
        "trigger_time": iso(d.trigger_time),
        "decided_at": iso(d.decided_at),
        "anchor_at": iso(d.anchor_at),
        "next_eligible_at": iso(d.next_eligible_at),
        "effective_floor": floor_doc(d.floor),
        "detail": d.detail,
    }


def confirmation_doc(c: Confirmation) -> dict[str, Any]:
    return {"turn_id": c.turn_id, "status": c.status, "start": start_doc(c.start)}


def eligibility_doc(e: Eligibility) -> dict[str, Any]:
    return {
        **lane_keys(e),
        "status": e.status,
        "reason": e.reason.value,
        "next_eligible_at": iso(e.next_eligible_at),
        "effective_floor": floor_doc(e.floor),
        "last_start": start_doc(e.last_start),
        "evaluated_at": iso(e.evaluated_at),
        "detail": e.detail,
    }


def lane_doc(e: Eligibility, limits: LaneLimits | None) -> dict[str, Any]:
    """A listed lane (``status``'s second table) as JSON: its eligibility and its limits."""
    return {**eligibility_doc(e), "limits": limits_doc(limits)}


def eligibility_state_doc(e: Eligibility | None) -> dict[str, Any] | None:
    """A scope's eligibility state and exact next eligible time: the one readback every settings
    surface shows (``policy show``, ``GET /api/policy``, the settings page; ``/metrics`` exports
    the same two as gauges)."""
    if e is None:
        return None
    return {"status": e.status, "next_eligible_at": iso(e.next_eligible_at), "detail": e.detail}


def rule_doc(r: Rule) -> dict[str, Any]:
    return {
        "scope": str(r.scope),
        "scope_kind": r.scope.kind.value,
        "min_interval": format_interval(r.min_interval),
        "min_interval_seconds": seconds_of(r.min_interval),
        "active": r.binds,  # a floor, a count or budget, or an envelope: a limits-only rule is in force
        "floor_active": r.active,
        "owner_ref": r.owner_ref,
        "revision": r.revision,
        "updated_at": iso(r.updated_at),
        "compute": r.compute.doc() if r.compute is not None else None,
        "compute_problem": r.compute_problem,
        "limits": r.limits.doc(),
    }


def change_doc(c: RuleChange) -> dict[str, Any]:
    return {
        "id": c.id,
        "scope": str(c.scope),
        "before": format_interval(c.before) if c.before is not None else None,
        "after": format_interval(c.after),
        "revision": c.revision,
        "owner_ref": c.owner_ref,
        "owner_kind": c.owner_kind.value,
        "changed_at": iso(c.changed_at),
        "reduction_authorized": c.reduction_authorized,
        "compute_before": c.compute_before,
        "compute_after": c.compute_after,
        "note": c.note,
        "limits_before": c.limits_before,
        "limits_after": c.limits_after,
        "limits_before_text": limits_brief(c.limits_before),
        "limits_after_text": limits_brief(c.limits_after),
    }


def command_text(spec: Any) -> str:
    """The command a host runs, or who launches it."""
    if spec.host is None:
        return f"(launched by the external app; {spec.timer} timer)"
    return " ".join(spec.host.argv)


def table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A plain aligned text table; None shows as '-'."""
    return "\n".join(table_lines(headers, [_cells(None, row) for row in rows]))


class _Streamed(list):  # type: ignore[type-arg]
    """A JSON array written as its items are produced (see ``streamed``)."""

    def __init__(self, items: Iterable[Any]) -> None:
        super().__init__()
        self._items = iter(items)
        self._first: Any = _UNREAD  # read when the encoder asks whether the array is empty

    def __bool__(self) -> bool:
        if self._first is _UNREAD:
            self._first = next(self._items, _END)
        return self._first is not _END

    def __iter__(self) -> Iterator[Any]:
        if self:
            first, self._first = self._first, _END
            yield first
            yield from self._items


_UNREAD, _END = object(), object()


def streamed(items: Iterable[Any]) -> list[Any]:
    """``items`` as a JSON array the CLI's encoder (indented: the pure-Python one, which walks a
    list with ``not`` and ``for``) writes one item at a time, holding none after it is encoded.
    It can be walked once."""
    return _Streamed(items)


def _cells(texts: dict[str, str] | None, row: Iterable[object]) -> list[str]:
    """A row's cells as text (None as '-'); with ``texts``, equal cells are one string."""
    cells = [("-" if v is None else str(v)) for v in row]
    return cells if texts is None else [texts.setdefault(c, c) for c in cells]


def table_lines(headers: Sequence[str], cells: list[list[str]]) -> Iterator[str]:
    """``table`` of rows already rendered as cells (``_cells``), one line at a time."""
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    yield "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=False)).rstrip()
    for row in cells:
        yield "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)).rstrip()


def automation_doc(a: Automation) -> dict[str, Any]:
    spec = a.spec
    return {
        "automation": a.automation_id,
        "goal": spec.goal_id,
        "agent": spec.agent_id,
        "schedule": spec.schedule,
        "host": spec.host.model_dump(mode="json") if spec.host is not None else None,
        "timer": spec.timer,
        "model": spec.model,
        "overlap": spec.overlap,
        "hold_after": spec.holds_after,
        "catch_up": spec.catch_up.value if spec.catch_up is not None else None,
        "catch_up_window": format_interval(spec.catch_up_window) if spec.catch_up_window is not None else None,
        "external_id": spec.external_id,
        "labels": dict(spec.labels),
        "when_denied": spec.when_denied,
        "debounce": _debounce_doc(spec.debounce),
        "state": a.state,
        "state_note": a.state_note,
        "revision": a.revision,
        "created_at": iso(a.created_at),
        "updated_at": iso(a.updated_at),
    }


@optional
def _debounce_doc(d: Debounce) -> dict[str, float | None]:
    return {"quiet_seconds": d.quiet.total_seconds(), "max_wait_seconds": d.max_wait.total_seconds() if d.max_wait is not None else None}


@optional
def verdict_doc(v: Verdict) -> dict[str, Any]:
    """How a turn ended: the verdict's fields as JSON values, in their declared order."""
    return v.model_dump(mode="json")


def turn_doc(t: TurnRecord) -> dict[str, Any]:
    return {
        "turn_id": t.turn_id,
        "automation": t.automation_id,
        "attempt": t.attempt,
        "kind": t.kind,
        "manual_reason": t.manual_reason,
        "phase": t.phase,
        "runner": t.runner_host,
        "child_pid": t.child_pid,
        "started_at": iso(t.started_at),
        "deadline": iso(t.deadline),
        "settled_at": iso(t.settled_at),
        "verdict": verdict_doc(t.verdict),
        "log_path": t.log_path,
        "owner_id": t.owner_id,
        "lease_expires_at": iso(t.lease_expires),
    }


def tick_doc(t: Tick) -> dict[str, Any]:
    return {
        "nominal_at": iso(t.nominal_at),
        "actual_at": iso(t.actual_at),
        "decision": t.decision,
        "reason": t.reason,
        "turn_id": t.turn_id,
        "host": t.host,
    }


def readback_doc(rb: AutomationReadback) -> dict[str, Any]:
    """One automation's readback as JSON (``status``, ``automation show``, the console)."""
    a, e = rb.automation, rb.eligibility
    timer = a.spec.timer if a is not None else None
    return {
        "automation": rb.automation_id,
        "goal": a.spec.goal_id if a is not None else None,
        "agent": a.spec.agent_id if a is not None else None,
        "state": rb.state.value,
        "hold": "unreadable" if rb.unreadable else rb.hold.value if rb.hold is not None else None,
        "detail": rb.detail,
        "failures": rb.failures,
        "failing_until": iso(rb.failing_until),
        "next_fire_at": iso(rb.next_fire_at),
        "no_timer_host": rb.no_timer_host,
        "drift": rb.drift,
        "next_eligible_at": iso(e.next_eligible_at) if e is not None else None,
        "eligibility": eligibility_doc(e) if e is not None else None,
        "last_turn": turn_doc(rb.last_turn) if rb.last_turn is not None else None,
        "last_turn_since": settled_since(rb.last_turn, rb.mission) if rb.last_turn is not None else None,
        "timer": {
            **(binding_fields(rb.binding) if rb.binding is not None else {"timer": timer}),
            **guarantee_doc(rb.guarantee, rb.guarantee_why, rb.hook_answered_at),
        },
        "mission": mission_doc(rb.mission, rb.envelope) if rb.mission is not None else None,
        "limits": limits_doc(rb.limits),
    }


def ack_status(b: TimerBinding) -> str:
    """The binding's ACK as every surface shows it: ``acked``, ``none``, or ``superseded`` when a
    readback after the ACK found the host holding something other than what was acknowledged."""
    if b.ack_state != "acked":
        return "none"
    if b.observed_state != "present" or b.observed != b.acked_observed:
        return "superseded"
    return "acked"


def agreement_text(rb: AutomationReadback) -> str:
    """Whether the host armed what floorgate desired, in a few words."""
    b = rb.binding
    if b is None:
        return "not applied"
    if rb.drift is not None:
        return "NO (the host differs, read now)"
    if rb.no_timer_host:
        return "NO (its timer host is not running)"
    if b.desired is None:
        return "held"
    if ack_status(b) == "superseded":
        return f"NO (the ACK of {iso(b.acked_at)} is superseded: the host read back something else at {iso(b.observed_at)})"
    if b.ack_state == "acked" and b.observed_state == "present":
        return f"yes (acked {iso(b.acked_at)})"
    if b.observed_state in (None, "unavailable"):
        return f"unknown ({b.observed_state or 'never read'})"
    if b.observed_state == "absent":
        return "NO (absent on host)"
    return "not acked since the last change"


def turn_outcome(t: TurnRecord | None, mission: Mission | None = None) -> str | None:
    if t is None:
        return None
    if t.verdict is None:
        return t.phase
    note = settled_since(t, mission)
    return f"{t.verdict.status} {t.verdict.stop_reason}" + (f" ({note})" if note else "")


def settled_since(t: TurnRecord, mission: Mission | None) -> str | None:
    """What the owner decided since ``t`` stopped its mission on an ask (None: nothing), so a
    readback of that turn does not send the owner to an ask already decided."""
    v = t.verdict
    if v is None or v.status != "stuck" or mission is None or t.mission_id != mission.mission_id or "owner ask auth-" not in v.stop_reason:
        return None
    if mission.status == "open":
        return "since approved: the mission is open again"
    if mission.status == "stuck" and (mission.stop_reason or "").startswith("owner denied"):
        return f"since denied: {mission.stop_reason}"
    return None


def _envelope_line(rb: AutomationReadback) -> str | None:
    m, env = rb.mission, rb.envelope
    if m is None or env is None or not env.bounded:
        return None
    return (
        f"  {rb.automation_id}: mission {m.mission_id} {m.status}: turns {m.turns}"
        + (f"/{env.max_turns + m.extra_turns}" if env.max_turns else "")
        + f", tool calls {m.tool_calls}"
        + (f"/{env.max_tool_calls + m.extra_tool_calls}" if env.max_tool_calls else "")
        + ", tokens "
        + (str(m.tokens) if m.usage_known else "not reported")
        + (f"/{env.max_tokens + m.extra_tokens}" if env.max_tokens else "")
        + f", wall {m.wall_seconds:g}s"
        + (f"/{env.max_wall_seconds + m.extra_wall_seconds}s" if env.max_wall_seconds else "")
        + (f" (latch: {m.latch})" if m.latch else "")
    )


def host_doc(h: HostBeat, now: datetime) -> dict[str, Any]:
    """A timer host's heartbeat, and whether it is alive at ``now``."""
    return {
        "host_id": h.host_id,
        "hostname": h.hostname,
        "pid": h.pid,
        "version": h.version,
        "alive": h.alive(now),
        "started_at": iso(h.started_at),
        "beat_at": iso(h.beat_at),
        "stopped_at": iso(h.stopped_at),
        "envelope_mode": h.envelope_mode,
    }


def hosts_text(hosts: Sequence[HostBeat], now: datetime) -> str:
    """One line on the timer hosts: which are alive, or that none is (nothing on floorgate's timer fires)."""
    alive = [h for h in hosts if h.alive(now)]
    # A host whose beats stopped without a clean stop was lost (killed, its machine gone): named.
    lost = "".join(f"; host {h.host_id} lost {ago(h.beat_at, now)}" for h in hosts if h.stopped_at is None and not h.alive(now))
    if alive:
        return (
            "hosts: "
            + ", ".join(
                f"{h.host_id} alive (v{h.version}, envelopes {h.envelope_mode or 'not recorded'}, beat {ago(h.beat_at, now)})"
                for h in alive
            )
            + lost
        )
    last = max(hosts, key=lambda h: h.beat_at, default=None)
    seen = f" (last: {last.host_id}, {'stopped' if last.stopped_at else 'silent'} since {when(last.beat_at, now)})" if last else ""
    return f"hosts: none running{seen}: apscheduler timers fire only while 'floorgate run' runs{lost}"


def ago(at: datetime, now: datetime) -> str:
    """``at`` relative to ``now``, in words: '3 s ago', 'in 14 min'."""
    seconds = (now - at).total_seconds()
    span = abs(seconds)
    if span < 90:
        words = f"{span:.0f} s"
    elif span < 90 * 60:
        words = f"{span / 60:.0f} min"
    elif span < 36 * 3600:
        words = f"{span / 3600:.0f} h"
    else:
        words = f"{span / 86400:.0f} d"
    return f"{words} ago" if seconds >= 0 else f"in {words}"


def second(at: datetime) -> str:
    """``at`` in a sentence: UTC to the second, rounded up ('2026-12-02 09:00:01 UTC'); ``--json`` has the exact instant."""
    return f"{ceil_second(at).astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def past_second(at: datetime) -> str:
    """A past instant in a table: UTC to the second it fell in ('2026-12-02 09:00:00 UTC'); ``--json`` has the exact instant."""
    return f"{at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC"


def when(at: datetime | None, now: datetime, zone: tzinfo = timezone.utc) -> str | None:
    """``at`` for a table: the wall time in ``zone`` to the second, and how far it is from ``now``
    ('2026-12-02 09:00:00 CET, in 20 h'). Rounded *up* to the whole second: a floor shown opening
    a moment early would invite a start that is denied (``--json`` keeps the exact instant)."""
    if at is None:
        return None
    up = ceil_second(at)
    shown = up.astimezone(zone)
    return f"{shown:%Y-%m-%d %H:%M:%S} {shown:%Z}, {ago(at, now)}"  # how far: from the exact instant (a past one is never 'in 0 s')


def guarantee_doc(guarantee: str, why: str, hook_answered_at: datetime | None) -> dict[str, Any]:
    """The guarantee, why it holds or what is missing, and when a pre-model hook last answered."""
    return {"guarantee": guarantee, "guarantee_why": why, "hook_answered_at": iso(hook_answered_at)}


def binding_doc(b: TimerBinding, promise: GuaranteeReadback) -> dict[str, Any]:
    """A timer binding with the guarantee it gives, as JSON."""
    return {**binding_fields(b), **guarantee_doc(promise.guarantee.value, promise.why, promise.hook_answered_at)}


def binding_fields(b: TimerBinding) -> dict[str, Any]:
    """Desired, applied, observed and ACK facts of one binding."""
    return {
        "automation": b.automation_id,
        "timer": b.timer,
        "desired": b.desired,
        "desired_raised": b.desired_raised,
        "hold_reason": b.hold_reason,
        "desired_at": iso(b.desired_at),
        "applied_at": iso(b.applied_at),
        "apply_error": b.apply_error,
        "observed_state": b.observed_state,
        "observed": b.observed,
        "observed_at": iso(b.observed_at),
        "ack_state": ack_status(b),  # acked, none, or superseded by a later, different readback
        "acked_at": iso(b.acked_at),
    }


def envelope_bounds_doc(e: Envelope) -> dict[str, Any]:
    """A merged compute envelope's bounds and the scopes whose blocks made it (None fields: unbounded)."""
    return {
        "max_turns": e.max_turns or None,
        "max_tool_calls": e.max_tool_calls or None,
        "max_tokens": e.max_tokens or None,
        "max_wall_seconds": e.max_wall_seconds or None,
        "model_allowlist": list(e.model_allowlist) if e.model_allowlist is not None else None,
        "backend_allowlist": list(e.backend_allowlist) if e.backend_allowlist is not None else None,
        "on_exhausted": e.on_exhausted,
        "from_scopes": list(e.sources),
    }


def mission_doc(m: Any, envelope: Any = None) -> dict[str, Any]:
    """A mission's counters and what is left of its envelope (None = unbounded)."""

    def left(bound: int, used: int, extra: int) -> int | None:
        return max(bound + extra - used, 0) if bound else None

    doc: dict[str, Any] = {
        "mission_id": m.mission_id,
        "automation": m.automation_id,
        "status": m.status,
        "stop_reason": m.stop_reason,
        "started_at": iso(m.started_at),
        "settled_at": iso(m.settled_at),
        "turns": m.turns,
        "tool_calls": m.tool_calls,
        "tokens": m.tokens if m.usage_known else None,
        "usage_reported": m.usage_known,
        "wall_seconds": m.wall_seconds,  # its turns' run time, what max_wall_seconds bounds
        "latch": m.latch,
        "problems": m.problems,
    }
    if envelope is not None:
        doc["envelope"] = envelope_bounds_doc(envelope)
        doc["left"] = {
            "turns": left(envelope.max_turns, m.turns, m.extra_turns),
            "tool_calls": left(envelope.max_tool_calls, m.tool_calls, m.extra_tool_calls),
            "tokens": left(envelope.max_tokens, m.tokens, m.extra_tokens) if m.usage_known else None,
            "wall_seconds": (
                round(max(envelope.max_wall_seconds + m.extra_wall_seconds - m.wall_seconds, 0), 3) if envelope.max_wall_seconds else None
            ),
        }
        if envelope.max_tokens and not m.usage_known:
            doc["left"]["tokens_note"] = "max_tokens is inert: the host has reported no usage"
    return doc
