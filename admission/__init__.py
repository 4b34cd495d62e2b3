"""floorgate's admission domain and durable store.

Owners set floors (minimum start-to-start intervals) per goal, agent or automation with
``Policies``; every automatic launch reserves a start with ``Admission.reserve`` and confirms it
once the host attempt is durable. This package imports no other package of the project.
"""

from .accounting import Accounting, Dispatch
from .approvals import Approval, ApprovalRejected, Approvals
from .automations import (
    Automation,
    AutomationSpec,
    AutomationState,
    Automations,
    CatchUp,
    CommandHost,
    HoldKind,
    MeterKind,
    Overlap,
    TimerKind,
    WakeState,
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

__all__ = [
    "UTC",
    "Accounting",
    "Admission",
    "Approval",
    "ApprovalRejected",
    "Approvals",
    "Automation",
    "AutomationSpec",
    "AutomationState",
    "Automations",
    "CatchUp",
    "Clock",
    "CommandHost",
    "ComputeBlock",
    "Confirmation",
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
    "LockReason",
    "Lockout",
    "MeterKind",
    "Mission",
    "Missions",
    "NoStore",
    "NotFound",
    "Overlap",
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
    "TurnRecord",
    "Verdict",
    "WakeState",
    "Webhook",
    "failure_wait",
    "format_interval",
    "merge",
    "open_store",
    "parse_compute",
    "parse_interval",
    "token_fingerprint",
    "token_name",
]
