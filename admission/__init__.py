"""floorgate's admission domain and durable store.

Owners set floors (minimum start-to-start intervals) per goal, agent or automation with
``Policies``; every automatic launch reserves a start with ``Admission.reserve`` and confirms it
once the host attempt is durable. This package imports no other package of the project.

Names load on first use (PEP 562 ``__getattr__``): a process that needs a few of them (a hook, the
CLI's error classes) does not pay for importing every repository, model and table at start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .accounting import Accounting, Dispatch
    from .approvals import Approval, ApprovalRejected, Approvals
    from .automations import (
        Automation,
        AutomationConflict,
        AutomationSpec,
        AutomationState,
        Automations,
        CatchUp,
        CommandHost,
        Debounce,
        HoldKind,
        MeterKind,
        Overlap,
        TimerKind,
        WakeState,
        WhenDenied,
    )
    from .clock import UTC, Clock, FixedClock, SystemClock
    from .decisions import Confirmation, Decision, Eligibility, Phase, Reason, StartKind, StartRecord
    from .envelope import ComputeBlock, Envelope, merge, parse_compute
    from .errors import (
        FloorgateError,
        InvalidInput,
        NoStore,
        NotFound,
        ReductionNotAuthorized,
        RevisionConflict,
        SchemaTooNew,
        StoreUnavailable,
    )
    from .events import Event, EventKind, Events, Webhook
    from .failures import FailureStreaks, failure_wait
    from .gate import Admission
    from .host_policy import HostPolicies, HostPolicy, StoredHostPolicy
    from .intervals import format_interval, parse_interval
    from .journal import Journal, TurnRecord, Verdict
    from .missions import Mission, Missions
    from .policies import EffectiveFloor, Policies, Provenance, Rule, RuleChange
    from .principals import LockReason, Lockout, Principal, Principals, Role, Sessions, SignedIn, token_fingerprint, token_name
    from .scope import Scope, ScopeKind
    from .store import Store, open_store
    from .ticks import Tick, TickLog
    from .timers import TimerBinding, TimerBindings
    from .triggers import PendingTrigger, Triggered, Triggers
    from .unit import LockOrderRefused, UnitOfWork

# Each public name and the module that defines it.
_WHERE = {
    "Accounting": "accounting",
    "Dispatch": "accounting",
    "Approval": "approvals",
    "ApprovalRejected": "approvals",
    "Approvals": "approvals",
    "Automation": "automations",
    "AutomationConflict": "automations",
    "AutomationSpec": "automations",
    "AutomationState": "automations",
    "Automations": "automations",
    "CatchUp": "automations",
    "CommandHost": "automations",
    "Debounce": "automations",
    "HoldKind": "automations",
    "MeterKind": "automations",
    "Overlap": "automations",
    "TimerKind": "automations",
    "WakeState": "automations",
    "WhenDenied": "automations",
    "PendingTrigger": "triggers",
    "Triggered": "triggers",
    "Triggers": "triggers",
    "Clock": "clock",
    "FixedClock": "clock",
    "SystemClock": "clock",
    "UTC": "clock",
    "Confirmation": "decisions",
    "Decision": "decisions",
    "Eligibility": "decisions",
    "Phase": "decisions",
    "Reason": "decisions",
    "StartKind": "decisions",
    "StartRecord": "decisions",
    "ComputeBlock": "envelope",
    "Envelope": "envelope",
    "merge": "envelope",
    "parse_compute": "envelope",
    "FloorgateError": "errors",
    "InvalidInput": "errors",
    "NoStore": "errors",
    "NotFound": "errors",
    "ReductionNotAuthorized": "errors",
    "RevisionConflict": "errors",
    "SchemaTooNew": "errors",
    "StoreUnavailable": "errors",
    "Event": "events",
    "EventKind": "events",
    "Events": "events",
    "Webhook": "events",
    "FailureStreaks": "failures",
    "failure_wait": "failures",
    "Admission": "gate",
    "HostPolicies": "host_policy",
    "HostPolicy": "host_policy",
    "StoredHostPolicy": "host_policy",
    "format_interval": "intervals",
    "parse_interval": "intervals",
    "Journal": "journal",
    "TurnRecord": "journal",
    "Verdict": "journal",
    "Mission": "missions",
    "Missions": "missions",
    "EffectiveFloor": "policies",
    "Policies": "policies",
    "Provenance": "policies",
    "Rule": "policies",
    "RuleChange": "policies",
    "LockReason": "principals",
    "Lockout": "principals",
    "Principal": "principals",
    "Principals": "principals",
    "Role": "principals",
    "Sessions": "principals",
    "SignedIn": "principals",
    "token_fingerprint": "principals",
    "token_name": "principals",
    "Scope": "scope",
    "ScopeKind": "scope",
    "Store": "store",
    "open_store": "store",
    "Tick": "ticks",
    "TickLog": "ticks",
    "TimerBinding": "timers",
    "TimerBindings": "timers",
    "LockOrderRefused": "unit",
    "UnitOfWork": "unit",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once: later reads are plain attribute lookups
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "UTC",
    "Accounting",
    "Admission",
    "Approval",
    "ApprovalRejected",
    "Approvals",
    "Automation",
    "AutomationConflict",
    "AutomationSpec",
    "AutomationState",
    "Automations",
    "CatchUp",
    "Clock",
    "CommandHost",
    "ComputeBlock",
    "Confirmation",
    "Debounce",
    "Decision",
    "Dispatch",
    "EffectiveFloor",
    "Eligibility",
    "Envelope",
    "Event",
    "EventKind",
    "Events",
    "FailureStreaks",
    "FixedClock",
    "FloorgateError",
    "HoldKind",
    "HostPolicies",
    "HostPolicy",
    "InvalidInput",
    "Journal",
    "LockOrderRefused",
    "LockReason",
    "Lockout",
    "MeterKind",
    "Mission",
    "Missions",
    "NoStore",
    "NotFound",
    "Overlap",
    "PendingTrigger",
    "Phase",
    "Policies",
    "Principal",
    "Principals",
    "Provenance",
    "Reason",
    "ReductionNotAuthorized",
    "RevisionConflict",
    "Role",
    "Rule",
    "RuleChange",
    "SchemaTooNew",
    "Scope",
    "ScopeKind",
    "Sessions",
    "SignedIn",
    "StartKind",
    "StartRecord",
    "Store",
    "StoreUnavailable",
    "StoredHostPolicy",
    "SystemClock",
    "Tick",
    "TickLog",
    "TimerBinding",
    "TimerBindings",
    "TimerKind",
    "Triggered",
    "Triggers",
    "TurnRecord",
    "UnitOfWork",
    "Verdict",
    "WakeState",
    "Webhook",
    "WhenDenied",
    "failure_wait",
    "format_interval",
    "merge",
    "open_store",
    "parse_compute",
    "parse_interval",
    "token_fingerprint",
    "token_name",
]
