"""The composition root: one ``Floorgate`` object owns the services every surface calls.

Build it from a store, a clock and ``Settings``; the CLI (and the HTTP console after it) parse
their input, call one method of a service here and render what it returns. Configuration is
resolved once, into ``Settings``, at the edge: services never read the environment.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Self, TypeVar, overload

from pydantic import BaseModel, ConfigDict

from floorgate.admission import Admission, Automations, HostPolicies, Journal, Policies, Principals, Store, open_store
from floorgate.admission.clock import Clock, SystemClock

from .owner_gate import OwnerGate

if TYPE_CHECKING:  # built on first use: a hook's start-up never imports what it does not call
    from floorgate.admission.usage import Prices, Usage

    from ..agents.hooks import HookService
    from ..runtime._webhook_http import AddressRanges
    from ..runtime.executor import TurnExecutor
    from ..runtime.host import HostRuntime, RuntimeConfig
    from .automations import AutomationService
    from .backfill import BackfillService
    from .budget_readback import BudgetReadback
    from .envelopes import EnvelopeService
    from .floors import FloorService
    from .notify import NotifyService
    from .readback import Readback
    from .retention import PruneService
    from .timers import TimerService
    from .usage_ledger import UsageLedger

_S = TypeVar("_S")

# The settings an environment variable may give (a flag given wins): the Settings field, its variable.
ENVIRONMENT = {
    "state_dir": "FLOORGATE_STATE_DIR",
    "envelope_mode": "FLOORGATE_ENVELOPE_MODE",
    "crontab_user": "FLOORGATE_CRONTAB_USER",
    "webhook_allow": "FLOORGATE_WEBHOOK_ALLOW",
    "webhook_deny": "FLOORGATE_WEBHOOK_DENY",
}


class Settings(BaseModel):
    """What a floorgate process is configured with (flags over environment over defaults)."""

    model_config = ConfigDict(frozen=True)

    db: str | None = None  # None: $FLOORGATE_DB, else ./floorgate.db (admission.store.resolve_url)
    state_dir: Path = Path("floorgate-state")
    envelope_mode: str | None = None  # None: enforce
    crontab_user: str | None = None
    webhook_allow: str | None = None  # comma-separated CIDRs (or "internal") webhooks may reach; None: any
    webhook_deny: str | None = None  # comma-separated CIDRs (or "internal") webhooks never reach

    @classmethod
    def resolve(cls, environ: Mapping[str, str] | None = None, **flags: object) -> Settings:
        """Settings from explicit ``flags`` (None: not given), then ``environ``, then defaults."""
        env = os.environ if environ is None else environ

        def pick(flag: str, name: str) -> object:
            value = flags.get(flag)
            return value if value is not None else (env.get(name) or None)

        picked = {field: pick(field, name) for field, name in ENVIRONMENT.items()}
        state = picked.pop("state_dir")
        return cls(
            db=flags.get("db") or None,  # type: ignore[arg-type]
            state_dir=Path(str(state)) if state is not None else Path("floorgate-state"),
            **picked,  # type: ignore[arg-type]
        )

    def webhook_ranges(self) -> AddressRanges:
        """The addresses webhooks may be delivered to (``InvalidInput`` naming the variable when a
        range does not parse); parsed when a deliverer starts, so nothing else depends on it."""
        from ..runtime._webhook_http import AddressRanges

        return AddressRanges.parse(self.webhook_allow, self.webhook_deny)


class Service(Generic[_S]):
    """One of ``Floorgate``'s services: built on first use, then kept on that root (one per root).

    ``cls`` is the service's class, or where it is as ``"module:Class"`` (relative to this package):
    that module loads only when the service is first used, so a hook, which composes two services,
    never pays for importing the host adapters, the previews and the recovery every read needs.
    ``build`` makes the service from its class and the root; without it, ``cls(store, clock)``.
    """

    def __init__(self, cls: type[_S] | str, build: Callable[[type[_S], Floorgate], _S] | None = None) -> None:
        self.cls = cls
        self.build = build
        self.name = ""

    def __set_name__(self, owner: type[Floorgate], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, root: None, owner: type[Floorgate]) -> Self: ...
    @overload
    def __get__(self, root: Floorgate, owner: type[Floorgate]) -> _S: ...
    def __get__(self, root: Floorgate | None, owner: type[Floorgate]) -> Self | _S:
        if root is None:
            return self
        cls = self.service_class()
        if self.build is not None:
            service = self.build(cls, root)
        else:  # typed as any callable: the type checker cannot see a named class's constructor
            over_store: Callable[..., _S] = cls
            service = over_store(root.store, root.clock)
        # Kept in the root's own attributes, which a later read finds before this descriptor. Two
        # threads building at once keep the first one stored, so every caller shares one service.
        kept: _S = root.__dict__.setdefault(self.name, service)
        return kept

    def service_class(self) -> type[_S]:
        """The service's class, importing its module now if it was named by ``"module:Class"``."""
        if not isinstance(self.cls, str):
            return self.cls
        module, _, name = self.cls.partition(":")
        found: type[_S] = getattr(importlib.import_module(module, __package__), name)
        return found


class Floorgate:
    """floorgate's application services over one store. Share one per process."""

    def __init__(self, store: Store, *, clock: Clock | None = None, settings: Settings | None = None) -> None:
        self.store = store
        self.clock = clock if clock is not None else SystemClock()
        self.settings = settings if settings is not None else Settings()

    @classmethod
    def open(cls, settings: Settings, *, clock: Clock | None = None, create: bool = True) -> Floorgate:
        """Open the store the settings name and compose the services over it (``create=False``:
        refuse with ``NoStore`` where none exists, as reads and hooks do)."""
        return cls(open_store(settings.db, create=create), clock=clock, settings=settings)

    def close(self) -> None:
        self.store.close()

    # -- services: each built on first use and then kept (``Service``) --------------------------
    admission = Service(Admission)
    policies = Service(Policies)
    principals = Service(Principals)
    """Who may sign in to the owner console, and with which role."""
    owner_gate = Service(OwnerGate)
    """Whether an owner write from the CLI may run, and as whom (``owner_gate``)."""
    floors: Service[FloorService] = Service(".floors:FloorService")
    """Floor settings at one target: read with inheritance, preview, apply, read back."""
    usage: Service[Usage] = Service("floorgate.admission.usage:Usage")
    """The per-turn usage ledger budgets count (``admission.usage``)."""
    usage_ledger: Service[UsageLedger] = Service(".usage_ledger:UsageLedger", lambda cls, fg: cls(fg.usage, fg.clock, fg.admission))
    """``floorgate usage``: the ledger newest first, each turn's cost as a budget counts it."""
    budgets: Service[BudgetReadback] = Service(".budget_readback:BudgetReadback")
    """Where a lane's counts and budgets stand (``budget_readback``)."""
    prices: Service[Prices] = Service("floorgate.admission.usage:Prices")
    """Owner-set prices per million tokens, by model (``admission.usage``)."""
    host_policy = Service(HostPolicies)
    pruning: Service[PruneService] = Service(".retention:PruneService", lambda cls, fg: cls(fg.store, fg.clock, fg.settings.state_dir))
    """``floorgate prune``: the store's retention batches and the turn logs of what they delete."""
    # status compares cron lines as apply writes them: one TimerService for both
    readback: Service[Readback] = Service(".readback:Readback", lambda cls, fg: cls(fg.store, fg.clock, fg.timers))
    timers: Service[TimerService] = Service(
        ".timers:TimerService",
        lambda cls, fg: cls(fg.store, clock=fg.clock, crontab_user=fg.settings.crontab_user, state_dir=fg.settings.state_dir),
    )
    automations: Service[AutomationService] = Service(
        ".automations:AutomationService", lambda cls, fg: cls(fg.store, fg.clock, fg.timers, fg.readback)
    )
    envelopes: Service[EnvelopeService] = Service(".envelopes:EnvelopeService")
    turns = Service(Journal)
    """The turn journal (read by ``turn show``; managed turns run through ``executor()``)."""
    hooks: Service[HookService] = Service("..agents.hooks:HookService", lambda cls, fg: cls(fg.store, fg.clock, fg.settings.envelope_mode))
    notify: Service[NotifyService] = Service(
        ".notify:NotifyService", lambda cls, fg: cls(fg.store, fg.clock, ranges=fg.settings.webhook_ranges())
    )
    """Webhook subscriptions, the event outbox and delivering it."""
    backfill: Service[BackfillService] = Service(".backfill:BackfillService", lambda cls, fg: cls(fg.store, fg.clock, fg.executor))
    """Backfills: a past range's fires, each an automatic start through admission."""

    def executor(self, *, host: str | None = None) -> TurnExecutor:
        """A managed-turn executor with these settings' state directory and envelope mode."""
        from ..runtime.executor import TurnExecutor

        return TurnExecutor(self.store, state_dir=self.settings.state_dir, clock=self.clock, host=host, mode=self.settings.envelope_mode)

    def host_runtime(self, config: RuntimeConfig) -> HostRuntime:
        """The host runtime ``floorgate run`` starts, with its collaborators built here over this
        store and clock (``config`` says its state directory, envelope mode and webhook ranges)."""
        from floorgate.admission import TickLog, TimerBindings, Triggers
        from floorgate.admission.changes import ChangeFeed

        from ..runtime._heartbeat import Heartbeat
        from ..runtime._tick_log import TickRecords
        from ..runtime.executor import TurnExecutor, host_identity
        from ..runtime.host import HostParts, HostRuntime
        from .notify import NotifyService
        from .retention import HostPruner, PruneService

        store, clock, host = self.store, self.clock, host_identity()
        executor = TurnExecutor(store, state_dir=config.state_dir, clock=clock, host=host, mode=config.envelope_mode)
        parts = HostParts(
            store=store,
            clock=clock,
            host=host,
            # The beat records the envelope mode its turns run with (readback never mistakes observe for enforce).
            heartbeat=Heartbeat(store, clock, host, config.poll, executor.gate.mode.value),
            automations=Automations(store, clock),
            admission=Admission(store, clock),
            journal=Journal(store, clock),
            records=TickRecords(host, TickLog(store)),
            timers=TimerBindings(store),
            triggers=Triggers(store, clock),
            executor=executor,
            host_policies=HostPolicies(store, clock),
            notifier=NotifyService(store, clock, ranges=config.webhook_ranges),
            changes=ChangeFeed(store),
            pruner=HostPruner(PruneService(store, clock, config.state_dir), clock),
        )
        return HostRuntime(parts, config)
