"""Declarative fleets: ``floorgate apply -f fleet.toml`` and ``floorgate export``.

A fleet file describes automations, floors and webhooks, one TOML table each (``[[automation]]``,
``[[floor]]``, ``[[webhook]]``). ``plan`` compares the file with the store and says, per object,
create, change (with what changes), unchanged, or remove (only with ``prune``); it writes nothing.
A file with any bad object plans nothing: every problem is reported with its line. ``apply``
runs a clean plan, one unit of work per object, each a compare-and-set against what the plan read
(a concurrent change is a conflict, never overwritten). A reduction of a floor (lower, disabled
or a looser compute block, including one ``prune`` removes) is a problem unless the caller
authorized reductions. ``export`` writes today's state in the same format, so exporting and
planning that file shows every object unchanged.

Each kind of object is a ``Section``: its table name, how to plan a file's tables against the
store, and how to export it. Budgets, once the store has them, are one more section in
``SECTIONS`` (nothing else here changes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from floorgate.admission import (
    Automation,
    AutomationConflict,
    AutomationState,
    ComputeBlock,
    FloorgateError,
    HoldKind,
    InvalidInput,
    RevisionConflict,
    Scope,
    parse_compute,
)
from floorgate.admission.automations import PAUSE_NOTE_MAX
from floorgate.admission.events import check_url, parse_kinds
from floorgate.admission.intervals import format_interval, parse_interval
from floorgate.admission.limits import Limits
from floorgate.admission.scope import check_id, check_text
from floorgate.scheduler.app import _fleet_toml as toml
from floorgate.scheduler.app._fleet_plan import Action, Problem, Step, _duplicate, changes, keyed_entries
from floorgate.scheduler.app.automation_spec import spec_doc, spec_from_doc
from floorgate.scheduler.app.fleet_limits import LIMIT_FIELDS, PriceSection, changes_to, check_loosening, limits_table, parse_limits
from floorgate.scheduler.app.rule_writer import Writer

if TYPE_CHECKING:
    from floorgate.scheduler.app.root import Floorgate


@dataclass(frozen=True)
class Plan:
    """Every object's step, and the problems that stop the whole file from applying."""

    steps: list[Step]
    problems: list[Problem]

    def count(self, action: Action) -> int:
        return sum(1 for s in self.steps if s.action is action)

    @property
    def writes(self) -> list[Step]:
        return [s for s in self.steps if s.write is not None]


class Section(Protocol):
    """One kind of object in a fleet file: ``kind`` is its table name (``[[kind]]``)."""

    kind: str

    def plan(self, tables: list[toml.Table], *, prune: bool, allow_reduction: bool, base_dir: str) -> tuple[list[Step], list[Problem]]:
        """Each table's step against the store (and a removal for each stored object not in the file
        when ``prune``); problems instead of steps for bad tables. Writes nothing."""
        ...

    def export(self) -> list[dict[str, Any]]:
        """Every stored object as the table ``plan`` reads back unchanged."""
        ...


def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[[Writer], None]:
    """A step's write that needs nothing of the writer: ``fn(*args, **kwargs)``."""

    def write(_writer: Writer) -> None:
        fn(*args, **kwargs)

    return write


@dataclass(frozen=True)
class Pause:
    """An ``[[automation]]``'s ``paused`` and ``pause_note``: None where the file does not say
    (an automation's pause is then left as it is: an apply never resumes what someone paused)."""

    paused: bool | None
    note: str | None

    @classmethod
    def pop(cls, values: dict[str, Any]) -> Pause:
        """The pause fields taken out of a table's ``values`` (``InvalidInput`` naming a bad one)."""
        paused, note = values.pop("paused", None), values.pop("pause_note", None)
        if paused is not None and not isinstance(paused, bool):
            raise InvalidInput("paused", "write paused = true (it stays paused) or paused = false (it is resumed)")
        if note is not None:
            if not isinstance(note, str):
                raise InvalidInput("pause_note", 'write pause_note = "why it is paused", as a string')
            if paused is not True:
                raise InvalidInput("pause_note", "a pause note goes with paused = true")
            check_text(note, "pause_note", max_len=PAUSE_NOTE_MAX)
        return cls(paused, note)

    @staticmethod
    def of(stored: Automation) -> dict[str, Any]:
        """What ``export`` writes of a stored automation's pause: the owner's pause with its note; a
        hold floorgate put it under (a stuck mission, a failure streak) as a pause naming it, so the
        file never starts what this store keeps stopped; nothing for a timer's hold (made again
        wherever the file is applied) or an active one."""
        if stored.state is AutomationState.PAUSED:
            return {"paused": True} | ({"pause_note": stored.state_note} if stored.state_note is not None else {})
        if _kept_stopped(stored):
            kind = stored.hold_kind.value if stored.hold_kind is not None else "a hold"
            note = f"held by floorgate ({kind}): {stored.state_note or ''}".rstrip(": ")
            return {"paused": True, "pause_note": note[:PAUSE_NOTE_MAX]}
        return {}

    def change(self, stored: Automation) -> tuple[str, ...]:
        """What applying this to ``stored`` changes of its pause (nothing: empty)."""
        if self.paused is True and not _kept_stopped(stored):
            return (f"paused: false -> true{f' ({self.note})' if self.note else ''}",)
        if self.paused is True and stored.state is AutomationState.PAUSED and self.note is not None and self.note != stored.state_note:
            return (f"pause_note: {stored.state_note!r} -> {self.note!r}",)
        if self.paused is False and stored.state is AutomationState.PAUSED:
            return ("paused: true -> false",)
        return ()


def _kept_stopped(stored: Automation) -> bool:
    """Whether ``stored`` is stopped until someone resumes it: paused by its owner, or held by
    floorgate for a reason that stays wherever it is applied (not a timer's hold, made anew)."""
    return stored.state is AutomationState.PAUSED or (stored.state is AutomationState.HELD and stored.hold_kind is not HoldKind.TIMER)


class AutomationSection:
    """``[[automation]]``: ``id`` plus the fields of ``automation_spec.FIELDS``, and its pause
    (``Pause``: ``paused``, ``pause_note``)."""

    kind = "automation"

    def __init__(self, fg: Floorgate) -> None:
        self.fg = fg

    def plan(self, tables: list[toml.Table], *, prune: bool, allow_reduction: bool, base_dir: str) -> tuple[list[Step], list[Problem]]:
        service = self.fg.automations
        current, broken = service.repo.scan()
        steps: list[Step] = []
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for t in tables:
            values = dict(t.values)
            aid = values.pop("id", None)
            what = f"automation {aid}" if isinstance(aid, str) else "automation"
            try:
                if not isinstance(aid, str):
                    raise InvalidInput("id", 'give the automation\'s id, e.g. id = "nightly"')
                check_id(aid, "id")
                if (dup := _duplicate(seen, aid, t.line, what)) is not None:
                    problems.append(dup)
                    continue
                if aid in broken:
                    raise InvalidInput("id", f"the stored automation is unreadable ({broken[aid]}); remove it first")
                pause = Pause.pop(values)
                spec = spec_from_doc(values, service, base_dir=base_dir)
            except FloorgateError as exc:
                problems.append(Problem(t.line_of(exc), what, str(exc)))
                continue
            stored = current.get(aid)
            if stored is None:
                add = _call(service.add, aid, spec, paused=pause.paused is True, note=pause.note)
                steps.append(Step(self.kind, aid, Action.CREATE, t.line, write=add))
                continue
            paused = pause.change(stored)
            if stored.spec == spec and not paused:
                steps.append(Step(self.kind, aid, Action.UNCHANGED, t.line))
                continue
            what_changes = changes(spec_doc(stored.spec), spec_doc(spec)) + paused
            steps.append(
                Step(self.kind, aid, Action.CHANGE, t.line, what_changes, write=self._change(aid, spec, stored, pause, bool(paused)))
            )
        if prune:
            for aid, stored in current.items():
                if aid not in seen:
                    steps.append(Step(self.kind, aid, Action.REMOVE, None, write=_call(self._remove, aid, stored.revision)))
        return steps, problems

    def _change(self, aid: str, spec: Any, stored: Automation, pause: Pause, switch: bool) -> Callable[[Writer], None]:
        """A change's write: the edit guarded by the revision the plan read, then the pause or
        resume guarded by the revision that left (a concurrent change is a conflict)."""
        service = self.fg.automations

        def write(_writer: Writer) -> None:
            expected = stored.revision
            if spec != stored.spec:
                expected = service.edit(aid, spec, expected_revision=expected).automation.revision
            if switch:  # the check and the write one statement: a change made since is a conflict
                if pause.paused:
                    service.pause(aid, pause.note, expected_revision=expected)
                else:
                    service.resume(aid, expected_revision=expected)

        return write

    def _remove(self, automation_id: str, revision: int) -> None:
        current = self.fg.automations.get(automation_id)
        if current.revision != revision:
            raise AutomationConflict(automation_id, revision, current.revision)
        self.fg.automations.remove(automation_id)

    def export(self) -> list[dict[str, Any]]:
        found, _broken = self.fg.automations.repo.scan()
        return [{"id": aid, **spec_doc(a.spec), **Pause.of(a)} for aid, a in sorted(found.items())]


class FloorSection:
    """``[[floor]]``: ``scope`` (GOAL, GOAL/AGENT or GOAL/AGENT/AUTOMATION), ``min_interval``,
    ``compute`` and/or limits (``fleet_limits.LIMIT_FIELDS``)."""

    kind = "floor"
    _FIELDS = ("scope", "min_interval", "compute", *LIMIT_FIELDS)

    def __init__(self, fg: Floorgate) -> None:
        self.fg = fg

    def plan(self, tables: list[toml.Table], *, prune: bool, allow_reduction: bool, base_dir: str) -> tuple[list[Step], list[Problem]]:
        rules = {str(r.scope): r for r in self.fg.policies.list()}
        steps: list[Step] = []
        problems: list[Problem] = []
        seen: dict[str, int] = {}

        def read(v: dict[str, Any], scope: Scope, line: int) -> Step:
            interval = v.get("min_interval")
            if interval is not None and not isinstance(interval, str):
                raise InvalidInput("min_interval", 'give an interval as text, e.g. min_interval = "24h"')
            floor = parse_interval(interval, "min_interval") if interval is not None else None
            compute = parse_compute(v["compute"], "compute") if "compute" in v else None
            limits = parse_limits(v, scope)
            if floor is None and compute is None and limits is None:
                raise InvalidInput("min_interval", "give min_interval, compute and/or a limit (max_starts, budget_tokens, ...)")
            return self._step(scope, floor, compute, line, allow_reduction, limits)

        fix = 'give a target, e.g. scope = "inbox/triager"'
        steps += keyed_entries(tables, "floor", self._FIELDS, "scope", fix, Scope.parse, read, seen, problems)
        if prune:
            for name, rule in rules.items():
                if name in seen or _empty(rule):
                    continue
                try:
                    compute = ComputeBlock() if rule.compute is not None else None
                    steps.append(self._step(rule.scope, _ZERO, compute, None, allow_reduction, Limits()))
                except FloorgateError as exc:
                    problems.append(Problem(1, f"floor {name}", f"--prune would remove it: {exc}"))
        return steps, problems

    def _step(
        self, scope: Scope, floor: Any, compute: ComputeBlock | None, line: int | None, allow_reduction: bool, limits: Limits | None = None
    ) -> Step:
        view = self.fg.floors.read(scope)
        kept = view.rule.min_interval if view.rule is not None else _ZERO  # a limit-only table keeps the stored floor
        probe = kept if floor is None and compute is None else floor
        change = self.fg.floors.preview(scope, revision=view.revision, min_interval=probe, compute=compute)
        stored = view.rule.limits if view.rule is not None else Limits()
        wanted = limits if limits is not None else stored
        before = {"min_interval": _interval(change.before), "compute": _compute(change.compute_before), "limits": limits_table(stored)}
        after = {"min_interval": _interval(change.after), "compute": _compute(change.compute_after), "limits": limits_table(wanted)}
        name = str(scope)
        if line is None:
            action = Action.REMOVE
        elif before == after and view.rule is not None:
            return Step(self.kind, name, Action.UNCHANGED, line)
        else:
            action = Action.CREATE if view.rule is None or _empty(view.rule) else Action.CHANGE
        if change.reduction and not allow_reduction:
            raise InvalidInput("min_interval", f"{'; '.join(change.reduction_what)} is a reduction; pass --allow-reduction to apply it")
        check_loosening(stored, wanted, allow_reduction)
        revision = view.revision
        writes = changes_to(stored, wanted, scope)

        def write(w: Writer) -> None:
            rev = revision
            first = writes[0] if writes else None
            if floor is not None or compute is not None or first is not None:
                rev = w.configure(self.fg.policies, scope, rev, min_interval=floor, compute=compute, limits=first, note=_NOTE).revision
            for more in writes[1:]:
                rev = w.configure(self.fg.policies, scope, rev, limits=more, note=_NOTE).revision

        return Step(self.kind, name, action, line, changes(before, after), write=write, needs_owner=True)

    def export(self) -> list[dict[str, Any]]:
        out = []
        for rule in self.fg.policies.list():
            if _empty(rule):
                continue
            doc: dict[str, Any] = {"scope": str(rule.scope)}
            if rule.active or rule.limits.is_empty():
                doc["min_interval"] = format_interval(rule.min_interval).replace(" ", "")
            if rule.compute is not None:
                doc["compute"] = rule.compute.doc()
            out.append(doc | limits_table(rule.limits))
        return out


def _empty(rule: Any) -> bool:
    """A rule with nothing left to apply or export: no floor, no compute block, no limit."""
    return not rule.active and rule.compute is None and rule.limits.is_empty()


_ZERO = parse_interval("0", "min_interval")
_NOTE = "floorgate apply"  # recorded with each rule an apply writes


def _interval(value: Any) -> str | None:
    return format_interval(value) if value is not None else None


def _compute(block: ComputeBlock | None) -> dict[str, Any] | None:
    return block.doc() if block is not None and not block.is_empty() else None


class WebhookSection:
    """``[[webhook]]``: ``url`` (its identity), ``events`` and ``format``. A change of events or format
    replaces the subscription (a new signing secret, printed once)."""

    kind = "webhook"
    _FIELDS = ("url", "events", "format")

    def __init__(self, fg: Floorgate) -> None:
        self.fg = fg
        self.secrets: dict[str, str] = {}  # url -> the signing secret of a subscription this apply made

    def plan(self, tables: list[toml.Table], *, prune: bool, allow_reduction: bool, base_dir: str) -> tuple[list[Step], list[Problem]]:
        from floorgate.admission.events import WebhookFormat

        current = {w.url: w for w in self.fg.notify.webhooks()}
        steps: list[Step] = []
        problems: list[Problem] = []
        seen: dict[str, int] = {}

        def read(v: dict[str, Any], url: str, line: int) -> tuple[int, str, list[str], str]:
            events = v.get("events")
            if not isinstance(events, (list, str)):
                raise InvalidInput("events", 'give the event kinds, e.g. events = ["turn_failed", "ask_pending"]')
            kinds = [k.value for k in parse_kinds(events)]
            fmt = v.get("format", WebhookFormat.JSON.value)
            if fmt not in [f.value for f in WebhookFormat]:
                raise InvalidInput("format", f"{fmt!r} is not a format; use {' or '.join(f.value for f in WebhookFormat)}")
            return line, url, kinds, fmt

        fix = 'give the URL, e.g. url = "https://hooks.example.com/floorgate"'
        for line, url, kinds, fmt in keyed_entries(tables, "webhook", self._FIELDS, "url", fix, check_url, read, seen, problems):
            desired = {"events": sorted(kinds), "format": fmt}
            stored = current.get(url)
            add = self._adder(url, kinds, fmt)
            if stored is None:
                steps.append(Step(self.kind, url, Action.CREATE, line, write=add))
                continue
            before = {"events": sorted(k.value for k in stored.events), "format": stored.format.value}
            if before == desired:
                steps.append(Step(self.kind, url, Action.UNCHANGED, line))
                continue

            def replace(w: Writer, old: str = stored.webhook_id, add: Callable[[Writer], None] = add) -> None:
                self.fg.notify.remove_webhook(old)
                add(w)

            steps.append(Step(self.kind, url, Action.CHANGE, line, changes(before, desired), write=replace))
        if prune:
            for url, w in current.items():
                if url not in seen:
                    steps.append(Step(self.kind, url, Action.REMOVE, None, write=_call(self.fg.notify.remove_webhook, w.webhook_id)))
        return steps, problems

    def _adder(self, url: str, kinds: list[str], fmt: str) -> Callable[[Writer], None]:
        def add(w: Writer) -> None:
            _webhook, secret = self.fg.notify.add_webhook(url, kinds, fmt)
            self.secrets[url] = secret

        return add

    def export(self) -> list[dict[str, Any]]:
        return [{"url": w.url, "events": [k.value for k in w.events], "format": w.format.value} for w in self.fg.notify.webhooks()]


class FleetService:
    """Plan, apply and export a fleet file against one store."""

    def __init__(self, fg: Floorgate) -> None:
        self.fg = fg
        self.sections: tuple[Section, ...] = (AutomationSection(fg), FloorSection(fg), PriceSection(fg), WebhookSection(fg))

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(s.kind for s in self.sections)

    def plan(self, text: str, *, base_dir: Path, prune: bool = False, allow_reduction: bool = False) -> Plan:
        """What applying ``text`` would do (writes nothing); problems name each bad object's line."""
        parsed = toml.read(text, self.kinds)
        problems = [Problem(line, "file", message) for line, message in parsed.problems]
        if problems:
            return Plan([], problems)
        steps: list[Step] = []
        for section in self.sections:
            got, bad = section.plan(
                parsed.tables.get(section.kind, []), prune=prune, allow_reduction=allow_reduction, base_dir=str(base_dir.absolute())
            )
            steps += got
            problems += bad
        problems.sort(key=lambda p: p.line)
        return Plan(steps if not problems else [], problems)

    def apply(self, plan: Plan, writer: Writer, progress: Callable[[Step], None] = lambda _s: None) -> list[Step]:
        """Run a clean plan's writes in order, each its own unit of work (a conflict stops the
        rest: ``RevisionConflict`` propagates after ``progress`` saw each step done)."""
        if plan.problems:
            raise InvalidInput("file", "a plan with problems applies nothing")
        done: list[Step] = []
        for step in plan.writes:
            try:
                step.write(writer)  # type: ignore[misc]
            except InvalidInput as exc:
                if step.action is Action.CREATE and "already exists" in str(exc):
                    raise RevisionConflict(f"{step.kind} {step.name}", 0, 1) from None
                raise
            done.append(step)
            progress(step)
        return done

    def webhook_secrets(self) -> dict[str, str]:
        """The signing secrets of webhooks the last apply subscribed (shown once)."""
        for section in self.sections:
            if isinstance(section, WebhookSection):
                return dict(section.secrets)
        return {}

    def export(self) -> str:
        """Today's state as a fleet file."""
        return toml.dumps(
            [(s.kind, s.export()) for s in self.sections],
            header="floorgate fleet file: 'floorgate apply -f FILE --dry-run' shows what applying it changes",
        )
