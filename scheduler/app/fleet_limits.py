"""Limits and prices in a fleet file: the limit fields of a ``[[floor]]`` table (counts and
budgets per window, the estimate, across agents, the alert percentages), and ``[[price]]`` tables (a model's price per
million tokens, for usage whose cost is not reported).

A ``[[floor]]`` table that names any limit field states the scope's whole set of limits (a
stored limit it leaves out is removed, which is a loosening); one that names none keeps the
stored limits, as a table without ``compute`` keeps the compute block.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

from floorgate.admission import FloorgateError, InvalidInput, Scope, ScopeKind
from floorgate.admission.limits import DEFAULT_ALERTS, LimitNames, Limits, LimitsChange, loosened, parse_alerts
from floorgate.admission.usage import check_model
from floorgate.admission.windows import check_max_starts, format_usd, micros_to_usd, parse_tokens, parse_usd, parse_window

from . import _fleet_toml as toml
from ._fleet_plan import Action, Problem, Step, keyed_entries, shown
from .rule_writer import Writer

if TYPE_CHECKING:
    from .root import Floorgate

LIMIT_FIELDS = ("max_starts", "starts_per", "budget_tokens", "budget_usd", "budget_per", "estimate_tokens", "across_agents", "alert_at")


def parse_limits(v: dict[str, Any], scope: Scope) -> Limits | None:
    """The limits a ``[[floor]]`` table at ``scope`` states (None: it names no limit field, keep
    the stored ones); ``InvalidInput`` naming the field and the fix."""
    if not any(k in v for k in LIMIT_FIELDS):
        return None
    starts = check_max_starts(v["max_starts"], "max_starts") if "max_starts" in v else None
    tokens = parse_tokens(v["budget_tokens"], "budget_tokens") if "budget_tokens" in v else None
    usd = parse_usd(_text(v["budget_usd"], "budget_usd", '"20.50"'), "budget_usd") if "budget_usd" in v else None
    estimate = parse_tokens(v["estimate_tokens"], "estimate_tokens") if "estimate_tokens" in v else None
    starts_per = parse_window(v["starts_per"], "starts_per") if "starts_per" in v else None
    budget_per = parse_window(v["budget_per"], "budget_per") if "budget_per" in v else None
    if (starts is None) != (starts_per is None):
        raise InvalidInput("starts_per", 'max_starts and starts_per go together, e.g. max_starts = 3 and starts_per = "1d"')
    if (tokens is None and usd is None) != (budget_per is None):
        raise InvalidInput("budget_per", 'budget_tokens or budget_usd go with budget_per, e.g. budget_per = "day@Europe/Berlin"')
    across = v.get("across_agents", False)
    if not isinstance(across, bool):
        raise InvalidInput("across_agents", "give true or false")
    if across and scope.kind is not ScopeKind.GOAL:  # as policy set refuses it (a rule never stores it)
        raise InvalidInput("across_agents", "only a goal rule can count across agents (name the goal alone as the scope)")
    alerts = _alerts(v["alert_at"]) if "alert_at" in v else None
    return Limits(
        max_starts=starts,
        starts_window=starts_per,
        budget_tokens=tokens,
        budget_usd=usd,
        budget_window=budget_per,
        estimate_tokens=estimate,
        across_agents=across,
        alert_at=alerts if alerts != DEFAULT_ALERTS else None,  # stored as the default is: None
    )


def _alerts(value: object) -> tuple[int, ...]:
    """``alert_at = [50, 80, 100]`` (or ``"50,80,100"``): the percentages that raise
    ``budget_threshold``; ``InvalidInput`` naming ``alert_at`` otherwise."""
    if isinstance(value, list):
        if not value or not all(isinstance(p, int) and not isinstance(p, bool) for p in value):
            raise InvalidInput("alert_at", "give whole percentages in 1..100, e.g. alert_at = [50, 80, 100]")
        value = ",".join(str(p) for p in value)
    return parse_alerts(value, "alert_at")


def _text(value: object, field: str, example: str) -> object:
    if isinstance(value, float):  # a TOML float is binary: 0.1 is not exactly 0.1
        raise InvalidInput(field, f"give the amount as text for an exact value, e.g. {field} = {example}")
    return value


def limits_table(limits: Limits) -> dict[str, Any]:
    """The limit fields of a ``[[floor]]`` table for ``limits`` (what ``parse_limits`` reads back)."""
    out: dict[str, Any] = {}
    if limits.max_starts is not None and limits.starts_window is not None:
        out |= {"max_starts": limits.max_starts, "starts_per": limits.starts_window.text()}
    if limits.budget_tokens is not None:
        out["budget_tokens"] = limits.budget_tokens
    if limits.budget_usd is not None:
        out["budget_usd"] = format(limits.budget_usd.normalize(), "f")
    if limits.budget_window is not None:
        out["budget_per"] = limits.budget_window.text()
    if limits.estimate_tokens is not None:
        out["estimate_tokens"] = limits.estimate_tokens
    if limits.across_agents:
        out["across_agents"] = True
    if limits.alert_at is not None:
        out["alert_at"] = list(limits.alert_at)
    return out


# A loosening named by the fleet file's keys, where the owner will change it.
FILE_NAMES = LimitNames(
    max_starts="max_starts",
    starts_window="starts_per",
    budget_tokens="budget_tokens",
    budget_usd="budget_usd",
    budget_window="budget_per",
    estimate_tokens="estimate_tokens",
    across="across_agents true -> false",
)


def check_loosening(before: Limits, after: Limits, allow_reduction: bool) -> None:
    """``InvalidInput`` when ``after`` loosens ``before`` without ``--allow-reduction``."""
    looser = loosened(before, after, FILE_NAMES)
    if looser and not allow_reduction:
        raise InvalidInput("limits", f"{'; '.join(looser)} is a loosening; pass --allow-reduction to apply it")


def changes_to(before: Limits, after: Limits, scope: Scope) -> list[LimitsChange]:
    """The writes that turn ``before`` into ``after`` (one, or two when the count and the budgets
    have different windows: a write has one ``per``); empty when they are equal."""
    if before == after:
        return []
    across = after.across_agents if scope.kind is ScopeKind.GOAL else None
    count = {"max_starts": after.max_starts or 0}
    budget = {"budget_tokens": after.budget_tokens or 0, "budget_usd": after.budget_usd or Decimal(0)}
    # alert_at (): back to the default percentages, as a stored None is.
    rest = {"estimate_tokens": after.estimate_tokens or 0, "across_agents": across, "alert_at": after.alert_at or ()}
    starts_per, budget_per = after.starts_window, after.budget_window
    if starts_per is None or budget_per is None or starts_per == budget_per:
        return [LimitsChange(**count, **budget, **rest, per=starts_per or budget_per)]
    return [LimitsChange(**count, **rest, per=starts_per), LimitsChange(**budget, per=budget_per)]


class PriceSection:
    """``[[price]]``: ``model`` (its identity) and ``usd_per_mtok`` (text, exact: ``"3.00"``)."""

    kind = "price"
    _FIELDS = ("model", "usd_per_mtok")

    def __init__(self, fg: Floorgate) -> None:
        self.fg = fg

    def plan(self, tables: list[toml.Table], *, prune: bool, allow_reduction: bool, base_dir: str) -> tuple[list[Step], list[Problem]]:

        stored = {p.model: p for p in self.fg.prices.list() if p.usd_per_mtok_micros is not None}
        steps: list[Step] = []
        problems: list[Problem] = []
        seen: dict[str, int] = {}

        def read(v: dict[str, Any], model: str, line: int) -> Step:
            if "usd_per_mtok" not in v:
                raise InvalidInput("usd_per_mtok", 'give the price per million tokens, e.g. usd_per_mtok = "3.00"')
            price = parse_usd(_text(v["usd_per_mtok"], "usd_per_mtok", '"3.00"'), "usd_per_mtok", allow_zero=True)
            return self._step(model, price, line, allow_reduction)

        fix = 'give the model, e.g. model = "claude-sonnet-4"'
        steps += keyed_entries(tables, "price", self._FIELDS, "model", fix, check_model, read, seen, problems)
        if prune:
            for model in stored:
                if model in seen:
                    continue
                try:
                    steps.append(self._step(model, None, None, allow_reduction))
                except FloorgateError as exc:
                    problems.append(Problem(1, f"price {model}", f"--prune would remove it: {exc}"))
        return steps, problems

    def _step(self, model: str, price: Decimal | None, line: int | None, allow_reduction: bool) -> Step:

        current = next((p for p in self.fg.prices.list() if p.model == model), None)
        before = micros_to_usd(current.usd_per_mtok_micros) if current is not None and current.usd_per_mtok_micros is not None else None
        if line is not None and before == price:
            return Step(self.kind, model, Action.UNCHANGED, line)
        if before is not None and (price is None or price < before) and not allow_reduction:
            raise InvalidInput(
                "usd_per_mtok",
                f"lowering the price of {model} ({format_usd(before)} -> {format_usd(price) if price is not None else 'none'}) "
                "lets a USD budget admit more; pass --allow-reduction",
            )
        revision = current.revision if current is not None else 0
        action = Action.REMOVE if line is None else Action.CREATE if before is None else Action.CHANGE

        def write(w: Writer) -> None:
            self.fg.prices.set(model, price, expected_revision=revision, owner_ref=w.owner_ref, allow_reduction=w.allow_reduction)

        return Step(
            self.kind,
            model,
            action,
            line,
            (f"usd_per_mtok: {shown(_shown(before))} -> {shown(_shown(price))}",),
            write=write,
            needs_owner=True,
        )

    def export(self) -> list[dict[str, Any]]:
        return [
            {"model": p.model, "usd_per_mtok": format(micros_to_usd(p.usd_per_mtok_micros).normalize(), "f")}
            for p in self.fg.prices.list()
            if p.usd_per_mtok_micros is not None
        ]


def _shown(price: Decimal | None) -> str | None:
    return format(price.normalize(), "f") if price is not None else None
