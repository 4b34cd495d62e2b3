"""Automations as stored: which goal and agent they serve, their schedule text, their host, their
state (active, paused by the owner, held by the system), and their wake state (backoff).

The schedule is kept as canonical text; parsing and validating it is the hosts package's job,
done by the service that calls ``add`` or ``edit``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from datetime import datetime, timedelta
from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from sqlalchemy import Table, delete, insert, select, update

from . import _locks as locks
from . import _schema as s
from ._repository import Repository
from ._types import Frozen, decode_row, from_row, raw_columns, shared_fields, to_row
from .clock import read_clock
from .errors import CorruptState, FloorgateError, InvalidInput, NotFound, RevisionConflict, StoreUnavailable
from .events import EventKind, record
from .liveness import HookInstalls
from .scope import check_id, check_text
from .unit import UnitOfWork

PAUSE_NOTE_MAX = 1000  # characters of a pause note (the console adds who paused it)
MAX_LABELS = 32  # labels one automation may carry
LABEL_VALUE_MAX = 128  # characters of a label's value


class AutomationState(StrEnum):
    """Whether timers tick an automation: ``paused`` by the owner, ``held`` by floorgate."""

    ACTIVE = "active"
    PAUSED = "paused"
    HELD = "held"


class HoldKind(StrEnum):
    """Why floorgate holds an automation (stored in its own column, beside the readable note)."""

    TIMER = "timer"  # the timer host cannot express a floor-compatible schedule
    MISSION_STUCK = "mission_stuck"  # the latest mission hit an envelope bound or an owner's deny
    FAILING = "failing"  # ``hold_after`` consecutive turns failed (task or infra)


class CatchUp(StrEnum):
    """After downtime: ``skip`` every missed fire, or run the ``latest`` one (inside the window)."""

    SKIP = "skip"
    LATEST = "latest"


class Overlap(StrEnum):
    """While a turn runs: skip further ticks, or allow them to start turns too."""

    SKIP = "skip"
    ALLOW = "allow"


class WhenDenied(StrEnum):
    """What a scheduled fire does when a floor denies it: ``wait`` for the floor's end (one wake
    then; the lane may run off its schedule's time of day), or ``skip`` to the next scheduled fire
    the floors admit (the time of day is kept; a fire is skipped instead)."""

    WAIT = "wait"
    SKIP = "skip"


class TimerKind(StrEnum):
    """Who keeps an automation's timer (the hosts package maps each to its adapter)."""

    APSCHEDULER = "apscheduler"  # a running ``floorgate run``
    CRONTAB = "crontab"
    EXTERNAL = "external"  # an agent app with its own timer


class MeterKind(StrEnum):
    """How to read the usage a command host prints."""

    NONE = "none"
    CLAUDE_STREAM_JSON = "claude-stream-json"
    CODEX_JSON = "codex-json"
    JSONL = "jsonl"


MAX_TIMEOUT = timedelta(days=7)
DEFAULT_HOLD_AFTER = 5  # consecutive failed turns that hold an automation (``hold_after`` None)
MAX_HOLD_AFTER = 1000
MAX_CATCH_UP_WINDOW = timedelta(days=7)
MAX_DEBOUNCE = timedelta(days=1)  # the longest quiet period or cap a debounce may set


class CommandHost(BaseModel):
    """The ``command`` host: run ``argv`` in ``cwd`` with only ``env_allow`` passed through."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["command"] = "command"
    argv: tuple[str, ...] = Field(min_length=1)
    cwd: str | None = None
    env_allow: tuple[str, ...] = ()
    timeout_seconds: float = Field(gt=0, le=MAX_TIMEOUT.total_seconds())

    @field_validator("argv")
    @classmethod
    def _argv(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value[0]:
            raise ValueError("argv[0] must name a program")
        return value


class Debounce(Frozen):
    """How a burst of triggers coalesces into one wake: ``quiet`` after the latest trigger, never
    later than ``max_wait`` after the first (None: no cap)."""

    quiet: timedelta = Field(ge=timedelta(0), le=MAX_DEBOUNCE)
    max_wait: timedelta | None = Field(default=None, ge=timedelta(0), le=MAX_DEBOUNCE)

    @model_validator(mode="after")
    def _ordered(self) -> Debounce:
        if self.max_wait is not None and self.max_wait < self.quiet:
            raise ValueError("debounce MAX_WAIT must be at least QUIET")
        return self

    def due(self, first_at: datetime, last_at: datetime) -> datetime:
        """When a burst whose triggers came from ``first_at`` to ``last_at`` wakes the automation."""
        due = last_at + self.quiet
        return min(due, first_at + self.max_wait) if self.max_wait is not None else due


class AutomationSpec(BaseModel):
    """What the owner configures."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    goal_id: str
    agent_id: str
    schedule: str
    host: CommandHost | None  # None only for an external timer: floorgate does not launch it
    model: str | None = None
    overlap: Overlap = Overlap.SKIP
    timer: TimerKind = TimerKind.APSCHEDULER
    backend: str | None = None  # the model backend/provider the host is configured for
    meter: MeterKind = MeterKind.NONE  # how to read the usage the host prints
    hold_after: int | None = Field(default=None, ge=0, le=MAX_HOLD_AFTER)  # None: DEFAULT_HOLD_AFTER; 0: never
    catch_up: CatchUp | None = None  # None: the deployment's host policy
    catch_up_window: timedelta | None = None  # None: the deployment's host policy
    external_id: str | None = None  # the caller's own id for it (a fleet's deduplication key)
    labels: tuple[tuple[str, str], ...] = ()  # (name, value) pairs, sorted by name (fleets select by these)
    when_denied: WhenDenied = WhenDenied.WAIT  # a scheduled fire inside a floor: wait for it, or skip
    debounce: Debounce | None = None  # None: a trigger wakes it at once

    @model_validator(mode="after")
    def _host_needed(self) -> AutomationSpec:
        if self.host is None and self.timer is not TimerKind.EXTERNAL:
            raise ValueError(f"a {self.timer.value} timer needs a command host (-- PROGRAM ARGS...)")
        window = self.catch_up_window
        if window is not None and not timedelta(0) <= window <= MAX_CATCH_UP_WINDOW:
            raise ValueError("catch_up_window must be between 0 and 7 days")
        return self

    @property
    def holds_after(self) -> int:
        """Consecutive failed turns that hold the automation (0: never)."""
        return DEFAULT_HOLD_AFTER if self.hold_after is None else self.hold_after


class AutomationConflict(RevisionConflict):
    """An exact-revision edit of an automation lost: its stored revision is not the one passed."""

    def __init__(self, automation_id: str, expected: int, current: int) -> None:
        self.scope = automation_id
        self.expected_revision = expected
        self.current_revision = current
        FloorgateError.__init__(
            self,
            f"revision conflict on automation {automation_id}: you passed revision {expected}, the store holds "
            f"revision {current}; re-read it and pass revision {current}",
        )


class Automation(Frozen):
    """A stored automation. ``revision`` increases with every change."""

    automation_id: str
    spec: AutomationSpec
    state: AutomationState
    state_note: str | None
    revision: int
    created_at: datetime
    updated_at: datetime
    hold_kind: HoldKind | None = None  # set while ``state`` is held


class WakeState(Frozen):
    """Adaptive backoff: ``backoff_step`` 0 means no chain is running. ``failures``: consecutive
    failed turns (0: the latest turn succeeded, or none ran), the latest settled at ``failed_at``."""

    automation_id: str
    backoff_step: int = Field(default=0, ge=0, le=64)
    backoff_wake_at: datetime | None = None
    failures: int = Field(default=0, ge=0)
    failed_at: datetime | None = None
    failing_until: datetime | None = None  # the earliest automatic start the streak allows (None: no slowdown)


@lru_cache(maxsize=4096)
def _host(text: str) -> CommandHost | None:
    """The host of a stored spec, one frozen object per distinct text: ten thousand automations
    running one command share it (a host's and a status read's memory)."""
    doc = json.loads(text)
    return CommandHost.model_validate(doc) if doc is not None else None


# Text columns many automations hold the same value in.
_REPEATED = (
    "goal_id", "agent_id", "schedule", "model", "overlap", "state", "state_note", "timer", "backend", "meter", "hold_kind", "labels",
    "when_denied",
)  # fmt: skip


def idle_wake(automation_id: str) -> WakeState:
    """The wake state of an automation that has no stored row: no backoff chain running (a host
    keeps one for each armed timer, so its field-name set is shared)."""
    return shared_fields(WakeState(automation_id=automation_id))


def _read_one(conn: Any, automation_id: str) -> Automation:
    """One automation read on ``conn``: ``NotFound`` when there is none, a malformed row named."""
    a = s.automations
    try:
        row = conn.execute(select(a).where(a.c.automation_id == check_id(automation_id, "automation"))).first()
    except CorruptState as exc:
        raise CorruptState(f"automation {automation_id!r} is malformed in the store: {exc}") from None
    if row is None:
        raise NotFound(
            f"automation {automation_id!r} does not exist (see 'floorgate automation list'; a lane an agent app's"
            " own timer wakes through the hooks is no automation: 'floorgate policy show GOAL/AGENT/LANE' reads it)"
        )
    return _row_to_automation(row)


def _row_to_automation(row) -> Automation:  # type: ignore[no-untyped-def]
    try:
        window = row.catch_up_window_us
        spec = from_row(
            AutomationSpec,
            s.automations,
            row,
            host=_host(row.host_spec),
            catch_up_window=timedelta(microseconds=window) if window is not None else None,
            labels=_labels_from(row.labels),
            debounce=_debounce_from(row.debounce_quiet_us, row.debounce_max_us),
        )
        return shared_fields(from_row(Automation, s.automations, row, spec=shared_fields(spec)))
    except (ValidationError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise StoreUnavailable(f"automation {row.automation_id!r} is malformed in the store: {_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    lines = str(exc).strip().splitlines()
    return " ".join(line.strip() for line in lines[:3]) if lines else type(exc).__name__


def _labels_from(text: str | None) -> tuple[tuple[str, str], ...]:
    if text is None:
        return ()
    doc = json.loads(text)
    if not isinstance(doc, dict) or not all(isinstance(v, str) for v in doc.values()):
        raise ValueError("labels must be a JSON object of strings")
    return tuple(sorted(doc.items()))


def check_labels(labels: object, field: str = "labels") -> tuple[tuple[str, str], ...]:
    """Labels as stored: (name, value) pairs sorted by name; names are ids, values short printable text."""
    items = list(labels.items()) if isinstance(labels, dict) else labels
    if not isinstance(items, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in items):
        raise InvalidInput(field, 'give an object of name -> value, e.g. {"team": "search"}')
    if len(items) > MAX_LABELS:
        raise InvalidInput(field, f"give at most {MAX_LABELS} labels")
    out: dict[str, str] = {}
    for name, value in items:
        check_id(name, f"{field}.{name}" if isinstance(name, str) else field)
        if not isinstance(value, str):
            raise InvalidInput(f"{field}.{name}", "a label's value must be a string")
        check_text(value, f"{field}.{name}", max_len=LABEL_VALUE_MAX)
        if name in out:
            raise InvalidInput(f"{field}.{name}", "is given twice")
        out[name] = value
    return tuple(sorted(out.items()))


def check_spec(spec: AutomationSpec) -> None:
    """Refuse a spec the store cannot hold as given (ids, labels, name lengths), naming the field."""
    check_id(spec.goal_id, "goal")
    check_id(spec.agent_id, "agent")
    if spec.external_id is not None:
        check_id(spec.external_id, "external_id")
    if check_labels(spec.labels) != spec.labels:
        raise InvalidInput("labels", "pass labels sorted by name (check_labels)")
    if spec.model is not None and not spec.model.strip():
        raise InvalidInput("model", "give a model name or omit it")
    # The columns hold 128 characters: PostgreSQL would refuse a longer value as a store error, and
    # SQLite would keep it; the same input gets the same answer on both.
    for field, value in (("model", spec.model), ("backend", spec.backend)):
        if value is not None and (len(value) > 128 or "\0" in value):
            raise InvalidInput(field, f"keep the {field} name to at most 128 characters (no NUL)")


class Automations(Repository):
    """The automation registry in the store."""

    def add(self, automation_id: str, spec: AutomationSpec, *, paused: bool = False, note: str | None = None) -> Automation:
        """Store a new automation, active, or ``paused`` with the owner's ``note`` from its first
        commit (no timer may tick it in between)."""
        check_id(automation_id, "automation")
        check_spec(spec)
        if note is not None:
            if not paused:
                raise InvalidInput("note", "only a paused automation carries a pause note")
            check_text(note, "note", max_len=PAUSE_NOTE_MAX)
        now = read_clock(self.clock)
        a = s.automations
        with self.store.write(lock_key=locks.automation(automation_id)) as conn:
            if conn.execute(select(a.c.automation_id).where(a.c.automation_id == automation_id)).first():
                raise InvalidInput("automation", f"{automation_id!r} already exists; use 'automation edit' or another id")
            conn.execute(
                insert(a).values(
                    automation_id=automation_id,
                    **_spec_columns(spec),
                    state=(AutomationState.PAUSED if paused else AutomationState.ACTIVE).value,
                    state_note=note,
                    revision=1,
                    created_at_us=now,
                    updated_at_us=now,
                )
            )
        return self.get(automation_id)

    def get(self, automation_id: str) -> Automation:
        with self.store.read() as conn:
            return _read_one(conn, automation_id)

    def list(self, goal: str | None = None, agent: str | None = None) -> list[Automation]:
        a = s.automations
        query = select(a).order_by(a.c.goal_id, a.c.agent_id, a.c.automation_id)
        if goal is not None:
            query = query.where(a.c.goal_id == goal)
        if agent is not None:
            query = query.where(a.c.agent_id == agent)
        with self.store.read() as conn:
            return [_row_to_automation(row) for row in conn.execute(query)]

    def scan(
        self, automation_ids: Collection[str] | None = None, *, goal: str | None = None, agent: str | None = None
    ) -> tuple[dict[str, Automation], dict[str, str]]:
        """Every automation (or those named, or of a goal/agent) that decodes, and
        ``{automation_id: reason}`` for the rows that do not, in one query: one corrupt row is
        reported, never raised, so a host or a status page holds that automation and goes on."""
        found: dict[str, Automation] = {}
        bad: dict[str, str] = {}
        for aid, automation, reason in self.decoded(automation_ids, goal=goal, agent=agent):
            if automation is not None:
                found[aid] = automation
            else:
                bad[aid] = reason
        return found, bad

    def decoded(
        self, automation_ids: Collection[str] | None = None, *, goal: str | None = None, agent: str | None = None
    ) -> Iterator[tuple[str, Automation | None, str]]:
        """``scan``'s rows one at a time, as fetched: ``(automation_id, automation, "")`` for a row
        that decodes, ``(automation_id, None, reason)`` for one that does not (the read stays open
        until the iteration ends, so a caller keeps only what it needs of each)."""
        a = s.automations
        query = select(*raw_columns(a)).order_by(a.c.goal_id, a.c.agent_id, a.c.automation_id)
        if automation_ids is not None:
            query = query.where(a.c.automation_id.in_(sorted(automation_ids)))
        if goal is not None:
            query = query.where(a.c.goal_id == goal)
        if agent is not None:
            query = query.where(a.c.agent_id == agent)
        texts: dict[str, str] = {}  # one string object per distinct goal, agent, schedule, state...
        with self.store.read() as conn:
            for row in conn.execute(query):  # decoded as fetched: the raw rows are never all held
                try:
                    decoded = _decoded(a, row, "automation")
                    for name in _REPEATED:
                        value = getattr(decoded, name)
                        if type(value) is str:
                            setattr(decoded, name, texts.setdefault(value, value))
                    automation = _row_to_automation(decoded)
                except StoreUnavailable as exc:
                    yield str(row.automation_id), None, str(exc)
                    continue
                yield row.automation_id, automation, ""

    def exists(self, automation_id: str) -> bool:
        """Whether a row for ``automation_id`` exists, decodable or not."""
        a = s.automations
        with self.store.read() as conn:
            return conn.execute(select(a.c.automation_id).where(a.c.automation_id == automation_id)).first() is not None

    def revisions(self) -> dict[str, int]:
        """automation id -> revision, for cheap change detection by a running host. A row whose id
        is not text (a hand edit; the key cannot be NULL where the schema holds) names nothing to
        arm, so it is left out: nothing is planned for it."""
        a = s.automations
        with self.store.read() as conn:
            return {row[0]: row[1] for row in conn.execute(select(a.c.automation_id, a.c.revision)) if isinstance(row[0], str)}

    def edit(self, automation_id: str, spec: AutomationSpec, *, expected_revision: int | None = None) -> Automation:
        """Change an automation's spec; with ``expected_revision``, only while the stored revision is
        exactly that (``AutomationConflict``, nothing written, when it is not)."""
        check_spec(spec)
        if expected_revision is not None and (type(expected_revision) is not int or expected_revision < 1):
            raise InvalidInput("revision", "pass the revision you read (a whole number from 1)")
        return self._update(automation_id, _spec_columns(spec), expected_revision=expected_revision)

    def set_state(
        self,
        automation_id: str,
        state: AutomationState | str,
        note: str | None,
        hold_kind: HoldKind | None = None,
        *,
        expected_revision: int | None = None,
        unit: UnitOfWork | None = None,
    ) -> Automation:
        """Pause, resume or hold; a hold names its kind (``hold_kind``), every other state clears it.
        With ``expected_revision``, only while the stored revision is exactly that (``AutomationConflict``,
        nothing written, when it is not), in one statement. ``unit``: written in the caller's unit of work."""
        try:
            state = AutomationState(state)
        except ValueError:
            raise InvalidInput("state", "one of " + ", ".join(s.value for s in AutomationState)) from None
        if (state is AutomationState.HELD) != (hold_kind is not None):
            raise InvalidInput("hold_kind", "a held automation needs a hold kind, and only a held one has one")
        if state is AutomationState.PAUSED and note is not None:
            check_text(note, "note", max_len=PAUSE_NOTE_MAX)  # the owner's own words, shown by status
        kind = hold_kind.value if hold_kind is not None else None
        held = {"automation_id": automation_id, "hold_kind": kind, "note": note} if kind is not None else None
        values = {"state": state.value, "state_note": note, "hold_kind": kind}
        return self._update(automation_id, values, held=held, expected_revision=expected_revision, unit=unit)

    def remove(self, automation_id: str) -> None:
        """Delete the automation with its wake state, pending triggers, timer binding, hook answers and hook install record, in one commit
        (its starts, turns and ticks stay: they are the record)."""
        a, w, b, h = s.automations, s.wake_state, s.timer_bindings, s.hook_answers
        with self.store.write(lock_key=locks.automation(automation_id)) as conn:
            done = conn.execute(delete(a).where(a.c.automation_id == check_id(automation_id, "automation")))
            if done.rowcount != 1:
                raise NotFound(f"automation {automation_id!r} does not exist")
            conn.execute(delete(w).where(w.c.automation_id == automation_id))
            conn.execute(delete(s.triggers).where(s.triggers.c.automation_id == automation_id))
            conn.execute(delete(b).where(b.c.automation_id == automation_id))
            conn.execute(delete(h).where(h.c.automation_id == automation_id))
            HookInstalls(self.store).forget(automation_id, conn)

    def _update(
        self,
        automation_id: str,
        values: dict,  # type: ignore[type-arg]
        *,
        held: dict | None = None,  # type: ignore[type-arg]
        expected_revision: int | None = None,
        unit: UnitOfWork | None = None,
    ) -> Automation:
        check_id(automation_id, "automation")
        a = s.automations
        now = read_clock(self.clock)
        with self.store.write(lock_key=locks.automation(automation_id), unit=unit) as conn:
            query = update(a).where(a.c.automation_id == automation_id)
            if expected_revision is not None:
                query = query.where(a.c.revision == expected_revision)
            done = conn.execute(query.values(**values, revision=a.c.revision + 1, updated_at_us=now))
            if done.rowcount != 1:
                current = conn.execute(select(a.c.revision).where(a.c.automation_id == automation_id)).scalar()
                if current is not None and expected_revision is not None:
                    raise AutomationConflict(automation_id, expected_revision, int(current))
                raise NotFound(f"automation {automation_id!r} does not exist (see 'floorgate automation list')")
            if held is not None:
                record(conn, EventKind.AUTOMATION_HELD, automation_id, held, now)
            if unit is not None:  # read in the caller's unit: what it will commit
                return _read_one(conn, automation_id)
        return self.get(automation_id)

    # -- wake state ----------------------------------------------------------------------------
    def wake_state(self, automation_id: str) -> WakeState:
        w = s.wake_state
        try:
            row = self._read_first(select(w).where(w.c.automation_id == automation_id))
        except CorruptState as exc:
            raise CorruptState(f"wake state of automation {automation_id!r} is malformed in the store: {exc}") from None
        if row is None:
            return idle_wake(automation_id)
        return _wake_from_row(row)

    def wake_scan(self, automation_ids: Collection[str] | None = None) -> tuple[dict[str, WakeState], dict[str, str]]:
        """Every stored wake state (of every automation, or those named), by automation id; a malformed row is
        reported as ``{automation_id: reason}`` instead of failing the whole read."""
        w = s.wake_state
        found: dict[str, WakeState] = {}
        bad: dict[str, str] = {}
        query = select(*raw_columns(w))
        if automation_ids is not None:
            query = query.where(w.c.automation_id.in_(sorted(automation_ids)))
        with self.store.read() as conn:
            rows = list(conn.execute(query))
        for row in rows:
            try:
                found[row.automation_id] = _wake_from_row(_decoded(w, row, "wake state of automation"))
            except StoreUnavailable as exc:
                bad[row.automation_id] = str(exc)
        return found, bad

    def save_wake_state(self, state: WakeState) -> None:
        """Store the backoff chain (which ticks happened is the tick log's to say, not this row's)."""
        w = s.wake_state
        values = dict(backoff_step=state.backoff_step, backoff_wake_us=state.backoff_wake_at, updated_at_us=read_clock(self.clock))
        with self.store.write(lock_key=locks.automation(state.automation_id)) as conn:
            done = conn.execute(update(w).where(w.c.automation_id == state.automation_id).values(**values))
            if done.rowcount == 0:
                conn.execute(insert(w).values(automation_id=state.automation_id, **values))


def _wake_from_row(row) -> WakeState:  # type: ignore[no-untyped-def]
    """Decode a wake-state row; malformed values raise ``StoreUnavailable`` naming the automation."""
    try:
        if type(row.backoff_step) is not int or row.backoff_step < 0:
            raise ValueError(f"backoff_step must be a non-negative integer, found {row.backoff_step!r}")
        failures = getattr(row, "failures", 0)
        if type(failures) is not int or failures < 0:
            raise ValueError(f"failures must be a non-negative integer, found {failures!r}")
        return shared_fields(
            WakeState(
                automation_id=row.automation_id,
                backoff_step=row.backoff_step,
                backoff_wake_at=row.backoff_wake_us,
                failures=failures,
                failed_at=getattr(row, "failed_at_us", None),
                failing_until=getattr(row, "failing_until_us", None),
            )
        )
    except (ValidationError, ValueError, TypeError, OverflowError) as exc:
        raise StoreUnavailable(f"wake state of automation {row.automation_id!r} is malformed in the store: {_one_line(exc)}") from None


def _decoded(table: Table, row: Any, what: str) -> Any:
    """A row of a tolerant scan, decoded; a malformed time raises ``CorruptState`` naming the automation."""
    try:
        return decode_row(table, row)
    except CorruptState as exc:
        raise CorruptState(f"{what} {row.automation_id!r} is malformed in the store: {exc}") from None


def _spec_columns(spec: AutomationSpec) -> dict:  # type: ignore[type-arg]
    """The columns that store ``spec``: its fields as they are, but for those stored as JSON or microseconds."""
    window, debounce = spec.catch_up_window, spec.debounce
    return to_row(
        spec,
        s.automations,
        host_spec=json.dumps(spec.host.model_dump(mode="json") if spec.host is not None else None, sort_keys=True),
        catch_up_window_us=window // _US if window is not None else None,
        labels=json.dumps(dict(spec.labels), sort_keys=True) if spec.labels else None,
        debounce_quiet_us=debounce.quiet // _US if debounce is not None else None,
        debounce_max_us=debounce.max_wait // _US if debounce is not None and debounce.max_wait is not None else None,
    )


_US = timedelta(microseconds=1)


def _debounce_from(quiet_us: int | None, max_us: int | None) -> Debounce | None:
    if quiet_us is None:
        return None
    return Debounce(quiet=timedelta(microseconds=quiet_us), max_wait=timedelta(microseconds=max_us) if max_us is not None else None)
