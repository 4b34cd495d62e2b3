"""Limits across runs, stored on the policy rule beside the floor: starts per window, token and
USD budgets per window, an owner-set per-turn token estimate, and ``across agents`` (a goal rule
whose limits are one series for all of the goal's agents, instead of one per agent).

``Limits`` is what one scope's rule carries (a policy value); ``LimitsChange`` is what one write
asks for (``0`` removes a limit); ``loosened`` names what a write lets through that the stored
limits did not (a higher count or budget, a shorter or different window, a removal, a lower
estimate, ``across agents`` given up), which needs ``--allow-reduction`` like a lower floor.
``bound_limits`` turns a lane's applicable rules into the checks the admission decision runs:
every stored limit binds (limits of one kind with different windows are independent bounds, so
the tightest of each window binds), each counted over its ``Series``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from decimal import Decimal
from enum import StrEnum
from typing import Any, NamedTuple

from ._types import Frozen
from .errors import CorruptState, InvalidInput
from .scope import Scope, ScopeKind
from .windows import (
    MAX_STARTS,
    MAX_TOKENS,
    MAX_USD,
    Window,
    format_tokens,
    format_usd,
    looser_window,
    micros_to_usd,
    parse_window,
    usd_to_micros,
)

# The percentages of a count or budget that raise ``budget_threshold`` unless the owner sets others.
DEFAULT_ALERTS: tuple[int, ...] = (50, 80, 100)


def parse_alerts(text: object, field: str = "--alert-at") -> tuple[int, ...]:
    """``50,80,100``: distinct whole percentages in 1..100, in rising order once parsed;
    ``InvalidInput`` naming ``field`` otherwise."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInput(field, "give whole percentages in 1..100 separated by commas, e.g. 50,80,100")
    values: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isascii() or not part.isdigit() or len(part) > 3 or not 1 <= int(part) <= 100:
            raise InvalidInput(field, f"{part!r} is not a whole percentage in 1..100; give e.g. 50,80,100")
        if int(part) in values:
            raise InvalidInput(field, f"{int(part)} is given twice; name each percentage once")
        values.append(int(part))
    return tuple(sorted(values))


def format_alerts(values: tuple[int, ...]) -> str:
    """The stored and shown form of alert percentages: ``50,80,100``."""
    return ",".join(str(v) for v in values)


class LimitKind(StrEnum):
    """What a limit counts."""

    STARTS = "starts"  # automatic and manual starts (denial: count_exhausted)
    TOKENS = "tokens"  # settled tokens plus in-flight estimates (denial: budget_exhausted)
    USD = "usd"  # reported or priced cost plus in-flight estimates (denial: budget_exhausted)


class Limits(Frozen):
    """The limits one scope's rule carries; None: that limit is not set there."""

    max_starts: int | None = None
    starts_window: Window | None = None
    budget_tokens: int | None = None
    budget_usd: Decimal | None = None
    budget_window: Window | None = None
    estimate_tokens: int | None = None
    across_agents: bool = False
    alert_at: tuple[int, ...] | None = None  # percentages alerted on; None: DEFAULT_ALERTS

    def is_empty(self) -> bool:
        return self == Limits()

    def counts(self) -> bool:
        """Whether the rule carries a count or a budget (what lanes use up; an estimate, alerts or
        a floor across agents alone use nothing)."""
        return self.max_starts is not None or self.budget_tokens is not None or self.budget_usd is not None

    def alerts(self) -> tuple[int, ...]:
        """The percentages of this rule's counts and budgets that raise ``budget_threshold``."""
        return self.alert_at if self.alert_at is not None else DEFAULT_ALERTS

    def doc(self) -> dict[str, Any]:
        """The limits as JSON (amounts exact: USD as a decimal string)."""
        return {
            "max_starts": self.max_starts,
            "starts_window": self.starts_window.text() if self.starts_window is not None else None,
            "budget_tokens": self.budget_tokens,
            "budget_usd": format(self.budget_usd.normalize(), "f") if self.budget_usd is not None else None,
            "budget_window": self.budget_window.text() if self.budget_window is not None else None,
            "estimate_tokens": self.estimate_tokens,
            "across_agents": self.across_agents,
            "alert_at": list(self.alert_at) if self.alert_at is not None else None,
        }

    def summary(self) -> str:
        """One line: ``3 starts per 1d, 2M tokens and $20.00 per day@Europe/Berlin, across agents``."""
        parts = []
        if self.max_starts is not None:
            parts.append(f"{self.max_starts} start{'s' if self.max_starts != 1 else ''} per {self.starts_window}")
        budget = []
        if self.budget_tokens is not None:
            budget.append(f"{format_tokens(self.budget_tokens)} tokens")
        if self.budget_usd is not None:
            budget.append(format_usd(self.budget_usd))
        if budget:
            parts.append(f"{' and '.join(budget)} per {self.budget_window}")
        if self.estimate_tokens is not None:
            parts.append(f"estimate {format_tokens(self.estimate_tokens)} tokens a turn")
        if self.across_agents:
            parts.append("across agents")
        if self.alert_at is not None:
            parts.append("alerts at " + ",".join(f"{p}%" for p in self.alert_at))
        return ", ".join(parts) if parts else "none"

    def columns(self) -> dict[str, Any]:
        """The rule row's limit columns."""
        return {
            "max_starts": self.max_starts,
            "starts_window": self.starts_window.text() if self.starts_window is not None else None,
            "budget_tokens": self.budget_tokens,
            "budget_usd_micros": usd_to_micros(self.budget_usd) if self.budget_usd is not None else None,
            "budget_window": self.budget_window.text() if self.budget_window is not None else None,
            "estimate_tokens": self.estimate_tokens,
            "across_agents": self.across_agents,
            "alert_at": format_alerts(self.alert_at) if self.alert_at is not None else None,
        }


class LimitsChange(Frozen):
    """One write's limits: None keeps what is stored; 0 (``Decimal(0)``) removes that limit.
    ``per`` is the window of the count and/or budgets given with it."""

    max_starts: int | None = None
    budget_tokens: int | None = None
    budget_usd: Decimal | None = None
    estimate_tokens: int | None = None
    per: Window | None = None
    across_agents: bool | None = None
    alert_at: tuple[int, ...] | None = None  # () resets to DEFAULT_ALERTS

    def is_empty(self) -> bool:
        return self == LimitsChange()

    def check(self, scope: Scope) -> None:
        """``InvalidInput`` (naming the CLI flag) when this write's combination does not make sense
        at ``scope``, whatever is stored: a surface checks it before it opens the store."""
        sets_count = bool(self.max_starts)
        sets_budget = bool(self.budget_tokens) or bool(self.budget_usd)
        if self.per is not None and not (sets_count or sets_budget):
            zero = [
                flag
                for flag, v in (
                    ("--max-starts", self.max_starts),
                    ("--budget-tokens", self.budget_tokens),
                    ("--budget-usd", self.budget_usd),
                )
                if v == 0
            ]
            if zero:  # a removal given a window: name what was removed, not the window
                raise InvalidInput(zero[0], "0 removes this limit and a removal takes no window: drop --per, or give a limit above 0")
            raise InvalidInput("--per", "a window goes with --max-starts, --budget-tokens or --budget-usd (give one of them above 0)")
        if (sets_count or sets_budget) and self.per is None:
            raise InvalidInput("--per", "give the window of the limit: --per 1d, --per 12h or --per day@Europe/Berlin")
        if self.across_agents is not None and scope.kind is not ScopeKind.GOAL:
            raise InvalidInput("--across", "only a goal rule can count across agents (name the goal alone as the scope)")

    def carried(self, current: Limits) -> str | None:
        """What this write changes without naming it, in one line (None: nothing): a rule's token
        and USD budgets share one window, so giving one budget with a new ``per`` moves the other's."""
        if self.per is None or not (self.budget_tokens or self.budget_usd) or current.budget_window in (None, self.per):
            return None
        others = [
            kind
            for kind, given, stored in (("token", self.budget_tokens, current.budget_tokens), ("USD", self.budget_usd, current.budget_usd))
            if given is None and stored is not None
        ]
        if not others or current.budget_window is None:
            return None
        return (
            f"the {others[0]} budget now counts per {self.per.text()} too (it was per {current.budget_window.text()}): "
            "a rule's token and USD budgets share one window"
        )

    def apply(self, current: Limits, scope: Scope) -> Limits:
        """The limits after this write at ``scope``; ``InvalidInput`` (naming the CLI flag) when
        the combination does not make sense (``check``)."""
        self.check(scope)
        sets_budget = bool(self.budget_tokens) or bool(self.budget_usd)
        out = current.model_dump()
        if self.max_starts is not None:
            out["max_starts"] = self.max_starts or None
            out["starts_window"] = self.per if self.max_starts else None
        if self.budget_tokens is not None:
            out["budget_tokens"] = self.budget_tokens or None
        if self.budget_usd is not None:
            out["budget_usd"] = self.budget_usd or None
        if sets_budget:
            out["budget_window"] = self.per
        if out["budget_tokens"] is None and out["budget_usd"] is None:
            out["budget_window"] = None
        if self.estimate_tokens is not None:
            out["estimate_tokens"] = self.estimate_tokens or None
        if self.across_agents is not None:
            out["across_agents"] = self.across_agents
        if self.alert_at is not None:
            out["alert_at"] = self.alert_at if self.alert_at and self.alert_at != DEFAULT_ALERTS else None
        return Limits(**out)


class LimitNames(NamedTuple):
    """What a surface calls each limit when it names a loosening: ``loosened`` says
    ``NAME BEFORE -> AFTER`` with these names (``across`` is the whole phrase for giving up
    ``across agents``). The defaults are the CLI's flags (``policy set``), as admission's other
    messages name them."""

    max_starts: str = "--max-starts"
    starts_window: str = "--max-starts per"
    budget_tokens: str = "--budget-tokens"
    budget_usd: str = "--budget-usd"
    budget_window: str = "--budget-tokens/--budget-usd per"
    estimate_tokens: str = "--estimate-tokens"
    across: str = "--across agents -> none"


CLI_NAMES = LimitNames()


def loosened(before: Limits, after: Limits, names: LimitNames = CLI_NAMES) -> list[str]:
    """What ``after`` lets through that ``before`` did not (empty: nothing), for the reduction
    check: one ``NAME BEFORE -> AFTER`` each, amounts as the owner writes them (``2M``,
    ``$20.00``), named by ``names`` (the CLI's flags unless a surface gives its own)."""
    out: list[str] = []

    def bound(name: str, old: Any, new: Any, shown: Any) -> None:
        if old is not None and (new is None or new > old):
            out.append(f"{name} {shown(old)} -> {shown(new) if new is not None else 'none'}")

    bound(names.max_starts, before.max_starts, after.max_starts, str)
    bound(names.budget_tokens, before.budget_tokens, after.budget_tokens, format_tokens)
    bound(names.budget_usd, before.budget_usd, after.budget_usd, format_usd)
    if before.estimate_tokens is not None and (after.estimate_tokens is None or after.estimate_tokens < before.estimate_tokens):
        lower = format_tokens(after.estimate_tokens) if after.estimate_tokens is not None else "none"
        out.append(f"{names.estimate_tokens} {format_tokens(before.estimate_tokens)} -> {lower}")
    for name, old, new in (
        (names.starts_window, before.starts_window, after.starts_window),
        (names.budget_window, before.budget_window, after.budget_window),
    ):
        if old is not None and new is not None and looser_window(old, new):
            out.append(f"{name} {old} -> {new}")
    if before.across_agents and not after.across_agents:
        out.append(names.across)
    return out


def limits_from_columns(row: Any, where: str) -> Limits:
    """The one decoder of a rule row's limit columns. A value floorgate never writes (a count or
    amount out of range or of the wrong type, a window that does not parse, a limit without its
    window) raises ``CorruptState``: a damaged limit denies, it is never read as "no limit"."""

    def number(name: str, cap: int) -> int | None:
        value = getattr(row, name)
        if value is None:
            return None
        if type(value) is not int or not 1 <= value <= cap:
            raise CorruptState(f"malformed limit at {where}: {name} {value!r}")
        return value

    def window(name: str, needed: bool) -> Window | None:
        text = getattr(row, name)
        if text is None:
            if needed:
                raise CorruptState(f"malformed limit at {where}: {name} missing")
            return None
        try:
            return parse_window(text, name)
        except InvalidInput:
            raise CorruptState(f"malformed limit at {where}: {name} {text!r}") from None

    max_starts = number("max_starts", MAX_STARTS)
    tokens = number("budget_tokens", MAX_TOKENS)
    usd = number("budget_usd_micros", usd_to_micros(MAX_USD))
    across = row.across_agents
    if across not in (True, False, 0, 1):
        raise CorruptState(f"malformed limit at {where}: across_agents {across!r}")
    alert_text = getattr(row, "alert_at", None)
    try:
        alert_at = parse_alerts(alert_text, "alert_at") if alert_text is not None else None
    except InvalidInput:
        raise CorruptState(f"malformed limit at {where}: alert_at {alert_text!r}") from None
    return Limits.model_construct(
        max_starts=max_starts,
        starts_window=window("starts_window", max_starts is not None),
        budget_tokens=tokens,
        budget_usd=micros_to_usd(usd) if usd is not None else None,
        budget_window=window("budget_window", tokens is not None or usd is not None),
        estimate_tokens=number("estimate_tokens", MAX_TOKENS),
        across_agents=bool(across),
        alert_at=alert_at,
    )


def limits_json(limits: Limits) -> str | None:
    """The limits as kept in policy history (None: none set)."""
    return None if limits.is_empty() else json.dumps(limits.doc(), sort_keys=True)


class Series(NamedTuple):
    """Whose starts or usage a limit counts: a goal's (``agent`` None: across agents), an agent's
    (goal and agent rules without ``across agents``) or one lane's (an automation rule)."""

    goal_id: str
    agent_id: str | None
    automation_id: str | None


class BoundLimit(NamedTuple):
    """One limit that binds a lane: where it is set, what it counts, how much, per which window,
    over which series. ``amount`` is a count, tokens, or micro-dollars."""

    scope: Scope
    revision: int
    kind: LimitKind
    amount: int
    window: Window
    series: Series
    alerts: tuple[int, ...] = DEFAULT_ALERTS  # the percentages its rule alerts on

    def describe(self) -> str:
        shown = {
            LimitKind.STARTS: f"{self.amount} start{'s' if self.amount != 1 else ''}",
            LimitKind.TOKENS: f"{format_tokens(self.amount)} tokens",
            LimitKind.USD: format_usd(micros_to_usd(self.amount)),
        }[self.kind]
        return f"{shown} per {self.window} at {self.scope}" + (" across agents" if self.series.agent_id is None else "")

    def quantity(self, value: int) -> str:
        """``value`` of this limit's kind as the text shows it: ``2``, ``55000 tokens``, ``$0.33``
        (dollars as the limit itself and ``usage`` show them; a USD amount is kept in
        micro-dollars and never shown as such)."""
        if self.kind is LimitKind.USD:
            return format_usd(micros_to_usd(value))
        return f"{value} tokens" if self.kind is LimitKind.TOKENS else str(value)


def series_of(scope: Scope, limits: Limits, agent: str) -> Series:
    """The series a limit of ``scope`` counts for a lane of ``agent``."""
    if scope.kind is ScopeKind.AUTOMATION:
        return Series(scope.goal_id, scope.agent_id, scope.automation_id)
    if scope.kind is ScopeKind.GOAL and limits.across_agents:
        return Series(scope.goal_id, None, None)
    return Series(scope.goal_id, agent, None)


def bound_limits(rules: Iterable[tuple[Scope, int, Limits]], agent: str) -> list[BoundLimit]:
    """Every limit the applicable rules ``(scope, revision, limits)`` put on a lane of ``agent``
    (its goal's, its agent's and its automation's rules): each is checked on its own; of two
    of one kind over the same series and window, only the smaller is kept (it binds)."""
    best: dict[tuple[LimitKind, Series, Window], BoundLimit] = {}
    for scope, revision, limits in rules:
        series = series_of(scope, limits, agent)
        found: list[tuple[LimitKind, int | None, Window | None]] = [
            (LimitKind.STARTS, limits.max_starts, limits.starts_window),
            (LimitKind.TOKENS, limits.budget_tokens, limits.budget_window),
            (LimitKind.USD, usd_to_micros(limits.budget_usd) if limits.budget_usd is not None else None, limits.budget_window),
        ]
        for kind, amount, window in found:
            if amount is None or window is None:
                continue
            key = (kind, series, window)
            if key not in best or amount < best[key].amount:
                best[key] = BoundLimit(scope, revision, kind, amount, window, series, limits.alerts())
    return sorted(best.values(), key=lambda b: (b.kind.value, str(b.scope), b.window.text()))


def owner_estimate(rules: Iterable[Limits]) -> int | None:
    """The owner-set per-turn estimate for a lane: the largest of its applicable rules' (conservative)."""
    values = [r.estimate_tokens for r in rules if r.estimate_tokens is not None]
    return max(values) if values else None
