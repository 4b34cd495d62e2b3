"""The composition root: one ``Floorgate`` object owns the services every surface calls.

Build it from a store, a clock and ``Settings``; the CLI (and the HTTP console after it) parse
their input, call one method of a service here and render what it returns. Configuration is
resolved once, into ``Settings``, at the edge: services never read the environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from floorgate.admission import Admission, Automations, HostPolicies, Journal, Policies, Principals, Store, open_store
from floorgate.admission.clock import Clock, SystemClock

from .owner_gate import OwnerGate

if TYPE_CHECKING:  # built on first use: a hook's start-up never imports what it does not call
    from ..agents.hooks import HookService
    from ..runtime._webhook_http import AddressRanges
    from ..runtime.executor import TurnExecutor
    from ..runtime.host import HostRuntime, RuntimeConfig
    from .automations import AutomationService
    from .backfill import BackfillService
    from .envelopes import EnvelopeService
    from .floors import FloorService
    from .notify import NotifyService
    from .readback import Readback
    from .timers import TimerService

# Each service's module loads when the service is first used: a hook composes two services, and
# must not pay for importing the host adapters, the previews and the recovery every read needs.

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

    # -- services --------------------------------------------------------------------------------
    @cached_property
    def admission(self) -> Admission:
        return Admission(self.store, self.clock)

    @cached_property
    def policies(self) -> Policies:
        return Policies(self.store, self.clock)

    @cached_property
    def principals(self) -> Principals:
        """Who may sign in to the owner console, and with which role."""
        return Principals(self.store, self.clock)

    @cached_property
    def owner_gate(self) -> OwnerGate:
        """Whether an owner write from the CLI may run, and as whom (``owner_gate``)."""
        return OwnerGate(self.store, self.clock)

    @cached_property
    def floors(self) -> FloorService:
        """Floor settings at one target: read with inheritance, preview, apply, read back."""
        from .floors import FloorService

        return FloorService(self.store, self.clock)

    @cached_property
    def usage(self):  # type: ignore[no-untyped-def]
        """The per-turn usage ledger budgets count (``admission.usage``)."""
        from floorgate.admission.usage import Usage

        return Usage(self.store, self.clock)

    @cached_property
    def usage_ledger(self):  # type: ignore[no-untyped-def]
        """``floorgate usage``: the ledger newest first, each turn's cost as a budget counts it."""
        from .usage_ledger import UsageLedger

        return UsageLedger(self.usage, self.clock)

    @cached_property
    def budgets(self):  # type: ignore[no-untyped-def]
        """Where a lane's counts and budgets stand (``budget_readback``)."""
        from .budget_readback import BudgetReadback

        return BudgetReadback(self.store, self.clock)

    @cached_property
    def prices(self):  # type: ignore[no-untyped-def]
        """Owner-set prices per million tokens, by model (``admission.usage``)."""
        from floorgate.admission.usage import Prices

        return Prices(self.store, self.clock)

    @cached_property
    def host_policy(self) -> HostPolicies:
        return HostPolicies(self.store, self.clock)

    @cached_property
    def pruning(self):  # type: ignore[no-untyped-def]
        """``floorgate prune``: the store's retention batches and the turn logs of what they delete."""
        from .retention import PruneService

        return PruneService(self.store, self.clock, self.settings.state_dir)

    @cached_property
    def readback(self) -> Readback:
        from .readback import Readback

        return Readback(self.store, self.clock, self.timers)  # status compares cron lines as apply writes them

    @cached_property
    def timers(self) -> TimerService:
        from .timers import TimerService

        return TimerService(self.store, clock=self.clock, crontab_user=self.settings.crontab_user, state_dir=self.settings.state_dir)

    @cached_property
    def automations(self) -> AutomationService:
        from .automations import AutomationService

        return AutomationService(self.store, self.clock, self.timers, self.readback)

    @cached_property
    def envelopes(self) -> EnvelopeService:
        from .envelopes import EnvelopeService

        return EnvelopeService(self.store, self.clock)

    @cached_property
    def turns(self) -> Journal:
        """The turn journal (read by ``turn show``; managed turns run through ``executor()``)."""
        return Journal(self.store, self.clock)

    @cached_property
    def hooks(self) -> HookService:
        from ..agents.hooks import HookService

        return HookService(self.store, self.clock, self.settings.envelope_mode)

    @cached_property
    def notify(self) -> NotifyService:
        """Webhook subscriptions, the event outbox and delivering it."""
        from .notify import NotifyService

        return NotifyService(self.store, self.clock, ranges=self.settings.webhook_ranges())

    @cached_property
    def backfill(self) -> BackfillService:
        """Backfills: a past range's fires, each an automatic start through admission."""
        from .backfill import BackfillService

        return BackfillService(self.store, self.clock, self.executor)

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
