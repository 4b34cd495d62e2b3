"""``/metrics``: Prometheus text computed from the store at each scrape, so every host serving the
console reports the same numbers. Labels are bounded (goal, agent, automation, decision, reason,
status, bound); never a turn or mission id.

Cardinality is bounded as Prometheus practice asks: by default totals (automations by state,
decisions by reason, turns by status, budget alerts by event and limit kind) and per-lane series only for a lane in trouble (its mission's
accounting latch set, its failure streak running); ``every_lane`` (``/metrics?lanes=all``) adds every lane's next eligible
time, last start, launch skew, latch and timer drift, from a full readback (heavy at 10,000)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar, get_args

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector

from floorgate.admission import AutomationState, FailureStreaks
from floorgate.admission.clock import read_clock
from floorgate.admission.decisions import EligibilityStatus
from floorgate.admission.limits import LimitKind
from floorgate.admission.tallies import Tallies
from floorgate.admission.windows import NEVER

from .._version import floorgate_version
from ..app.budget_readback import LaneLimits
from ..app.root import Floorgate

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_Family = TypeVar("_Family", GaugeMetricFamily, CounterMetricFamily)


class StoreCollector(Collector):
    """Reads tallies and readbacks from the store on every ``collect``."""

    def __init__(self, fg: Floorgate, every_lane: bool = False) -> None:
        self.fg = fg
        self.every_lane = every_lane

    def collect(self) -> Iterator[Any]:
        fg = self.fg
        tallies = Tallies(fg.store)
        now = read_clock(fg.clock)
        yield _counted(
            GaugeMetricFamily, "floorgate_automations", "Automations by stored state", ["state"], sorted(tallies.automations().items())
        )
        decided = [(("admitted", kind), n) for (kind,), n in tallies.starts().items()]
        ticks = tallies.ticks()
        decided += [(("denied", reason), n) for (decision, reason), n in ticks.items() if decision == "denied"]
        yield _counted(
            CounterMetricFamily,
            "floorgate_admissions",
            "Admission decisions: admitted = start records by kind; denied = host-recorded denials",
            ["decision", "reason"],
            decided,
        )

        by_decision: dict[tuple[str], int] = {}
        for (decision, _reason), n in ticks.items():
            by_decision[(decision,)] = by_decision.get((decision,), 0) + n
        yield _counted(CounterMetricFamily, "floorgate_ticks", "Timer ticks recorded by hosts", ["decision"], sorted(by_decision.items()))
        yield _counted(CounterMetricFamily, "floorgate_turns", "Settled turns", ["status", "failure_category"], tallies.turns().items())
        yield _counted(
            GaugeMetricFamily,
            "floorgate_turns_in_flight",
            "Turns not settled yet: journaled = admitted, waiting for a turn worker (or left by a crash); launched = running",
            ["phase"],
            (((phase,), n) for phase, n in tallies.in_flight().items()),
        )
        yield _counted(
            CounterMetricFamily,
            "floorgate_budget_alerts",
            "Alerts written (budget_threshold, budget_exhausted) by event and what the limit counts (starts, tokens, usd)",
            ["event", "limit"],
            sorted(fg.readback.budgets.alert_counts().items()),
        )
        yield _counted(
            CounterMetricFamily, "floorgate_envelope_exhausted", "Turns an envelope bound stopped", ["bound"], tallies.exhausted().items()
        )

        if self.every_lane:
            yield from self._every_lane(tallies)
        else:
            yield from self._in_trouble()

        yield GaugeMetricFamily("floorgate_asks_pending", "Owner asks waiting for a decision", value=tallies.pending_asks())
        yield _counted(
            GaugeMetricFamily,
            "floorgate_webhook_deliveries",
            "Webhook deliveries by state (dead: given up after the last retry; alert on it)",
            ["state"],
            (((state.value,), n) for state, n in fg.notify.delivery_counts().items()),
        )
        alive = sum(1 for h in fg.readback.hosts() if h.alive(now))
        yield GaugeMetricFamily("floorgate_hosts_alive", "Timer hosts alive now", value=alive)
        info = InfoMetricFamily("floorgate_build", "floorgate's version")
        info.add_metric([], {"version": floorgate_version()})
        yield info

    def _in_trouble(self) -> Iterator[Any]:
        """Per-lane series only for lanes in trouble (a set latch), and their total."""
        lane = ["goal", "agent", "automation"]
        latch = GaugeMetricFamily("floorgate_accounting_latch_active", "1 while the current mission's accounting latch is set", labels=lane)
        latched = [m for m in self.fg.readback.missions.latest_many().values() if m.latch]
        for m in sorted(latched, key=lambda m: (m.goal_id, m.agent_id, m.automation_id)):
            latch.add_metric([m.goal_id, m.agent_id, m.automation_id], 1.0)
        yield latch
        yield GaugeMetricFamily("floorgate_accounting_latches_active", "Lanes whose mission's accounting latch is set", value=len(latched))
        failing = _failing_family()
        for goal, agent, automation, state, failures in FailureStreaks(self.fg.store).failing():
            shown = "failing" if state == AutomationState.ACTIVE.value else state  # as its readback shows it
            failing.add_metric([goal, agent, automation, shown], float(failures))
        yield failing

    def _every_lane(self, tallies: Tallies) -> Iterator[Any]:
        """Every lane's series (opt-in): next eligible time, last start, launch skew, latch, drift."""
        view = self.fg.readback.overview()
        lane = ["goal", "agent", "automation"]
        next_eligible = GaugeMetricFamily(
            "floorgate_next_eligible_timestamp_seconds", "When the lane may start next (Unix time)", labels=lane
        )
        last_start = GaugeMetricFamily("floorgate_last_start_timestamp_seconds", "The lane's last admitted start (Unix time)", labels=lane)
        skew = GaugeMetricFamily("floorgate_launch_skew_seconds", "Latest admitted tick: nominal fire to start", labels=lane)
        latch = GaugeMetricFamily("floorgate_accounting_latch_active", "1 while the current mission's accounting latch is set", labels=lane)
        drift = GaugeMetricFamily("floorgate_timer_drift", "1 while the host's live timer differs from the applied one", labels=lane)
        failing = _failing_family()
        eligibility = GaugeMetricFamily(
            "floorgate_eligibility",
            f"1 for the lane's eligibility state ({', '.join(get_args(EligibilityStatus))}), as 'policy show' reads it",
            labels=[*lane, "status"],
        )
        limits = _LimitFamilies()
        marks = tallies.last_admitted(rb.automation_id for rb in view.readbacks)
        for rb in view.readbacks:
            a, e = rb.automation, rb.eligibility
            if a is None:
                continue
            labels = [a.spec.goal_id, a.spec.agent_id, rb.automation_id]
            if e is not None and e.next_eligible_at is not None:
                next_eligible.add_metric(labels, e.next_eligible_at.timestamp())
            if e is not None:
                eligibility.add_metric([*labels, e.status], 1.0)
            if e is not None and e.last_start is not None:
                last_start.add_metric(labels, e.last_start.anchor_at.timestamp())
            if (mark := marks.get(rb.automation_id)) is not None:
                skew.add_metric(labels, (mark.actual_at - mark.nominal_at).total_seconds())
            latch.add_metric(labels, 1.0 if rb.mission is not None and rb.mission.latch else 0.0)
            drift.add_metric(labels, 1.0 if rb.drift is not None else 0.0)
            failing.add_metric([*labels, rb.state.value], float(rb.failures))
            limits.add(labels, rb.limits)
        for e in view.lanes:  # floored lanes no automation stands for
            labels = [e.goal_id, e.agent_id, e.automation_id or ""]
            if e.next_eligible_at is not None:
                next_eligible.add_metric(labels, e.next_eligible_at.timestamp())
            eligibility.add_metric([*labels, e.status], 1.0)
            if e.last_start is not None:
                last_start.add_metric(labels, e.last_start.anchor_at.timestamp())
            limits.add(labels, view.lane_limits.get((e.goal_id, e.agent_id, e.automation_id)))
        yield from (next_eligible, eligibility, last_start, skew, latch, drift, failing, *limits.families())


def _counted(
    family: type[_Family], name: str, documentation: str, labels: list[str], counts: Iterable[tuple[Sequence[str], float]]
) -> _Family:
    """A family of one sample per ``(label values, count)``, in the order given."""
    metric = family(name, documentation, labels=labels)
    for values, n in counts:
        metric.add_metric(list(values), n)
    return metric


class _LimitFamilies:
    """Each limit of each lane (``budget_readback.LaneLimits``): used, held in flight, left (USD in
    dollars) and when its window frees it, labelled with the lane, what it counts, its window and
    where it is set."""

    def __init__(self) -> None:
        labels = ["goal", "agent", "automation", "kind", "window", "scope"]
        self.used = GaugeMetricFamily("floorgate_limit_used", "Settled starts, tokens or USD the limit counts in its window", labels=labels)
        self.held = GaugeMetricFamily("floorgate_limit_held", "Tokens or USD in-flight turns hold against the limit", labels=labels)
        self.left = GaugeMetricFamily("floorgate_limit_left", "What is left of the limit in its window", labels=labels)
        self.frees = GaugeMetricFamily(
            "floorgate_limit_frees_timestamp_seconds", "When the spent limit lets a start through again (Unix time)", labels=labels
        )
        self.alert = GaugeMetricFamily(
            "floorgate_limit_alert_timestamp_seconds",
            "The limit's latest alert in its current period (Unix time), by event (budget_threshold, budget_exhausted)",
            labels=[*labels, "event"],
        )

    def add(self, lane: list[str], limits: LaneLimits | None) -> None:
        for x, alert in limits.with_alerts() if limits is not None else []:
            labels = [*lane, x.limit.kind.value, x.limit.window.text(), str(x.limit.scope)]
            if alert is not None:
                self.alert.add_metric([*labels, alert.kind.value], alert.at.timestamp())
            scale = 1e-6 if x.limit.kind is LimitKind.USD else 1.0
            self.used.add_metric(labels, x.used * scale)
            self.held.add_metric(labels, x.held * scale)
            self.left.add_metric(labels, x.left * scale)
            if x.blocked and x.frees_at is not None and x.frees_at != NEVER:
                self.frees.add_metric(labels, x.frees_at.timestamp())

    def families(self) -> tuple[GaugeMetricFamily, ...]:
        return (self.used, self.held, self.left, self.frees, self.alert)


def _failing_family() -> GaugeMetricFamily:
    return GaugeMetricFamily(
        "floorgate_automation_consecutive_failures",
        "Consecutive failed turns of the automation (0: its latest turn succeeded); alert above 1",
        labels=["goal", "agent", "automation", "state"],
    )


def render(fg: Floorgate, every_lane: bool = False) -> bytes:
    """The metrics exposition, read from the store now (``every_lane``: every lane's series too)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(StoreCollector(fg, every_lane))
    return generate_latest(registry)
