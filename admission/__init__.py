"""floorgate's admission domain and durable store.

Owners set floors (minimum start-to-start intervals) per goal, agent or automation with
``Policies``; every automatic launch reserves a start with ``Admission.reserve`` and confirms it
once the host attempt is durable. This package imports no other package of the project.
"""

from .accounting import Accounting, Dispatch
from .approvals import Approval, ApprovalRejected, Approvals
from .automations import (
    Automation,
    Automations,
    AutomationSpec,
    AutomationState,
    CommandHost,
    HoldKind,
    MeterKind,
    Overlap,
    TimerKind,
    WakeState,
)
from .clock import UTC, Clock, FixedClock, SystemClock
from .decisions import Confirmation, Decision, Eligibility, Phase, Reason, StartKind, StartRecord
from .errors import (
    FloorgateError,
    InvalidInput,
    NotFound,
    ReductionNotAuthorized,
    RevisionConflict,
    SchemaTooNew,
    StoreUnavailable,
)
from .gate import Admission
from .host_policy import HostPolicies, HostPolicy, StoredHostPolicy
from .intervals import format_interval, parse_interval
from .envelope import ComputeBlock, Envelope, merge, parse_compute
from .journal import Journal, TurnRecord, Verdict
from .missions import Mission, Missions
from .policies import EffectiveFloor, Policies, Rule, RuleChange
from .scope import Scope, ScopeKind
from .store import Store, open_store
from .ticks import Tick, TickLog
from .timers import TimerBinding, TimerBindings

__all__ = [
    "UTC",
    "Accounting",
    "Approval",
    "ApprovalRejected",
    "Approvals",
    "ComputeBlock",
    "Dispatch",
    "Envelope",
    "Mission",
    "Missions",
    "merge",
    "parse_compute",
    "Admission",
    "Automation",
    "AutomationSpec",
    "AutomationState",
    "HoldKind",
    "MeterKind",
    "Overlap",
    "TimerKind",
    "Automations",
    "CommandHost",
    "HostPolicies",
    "HostPolicy",
    "Journal",
    "StoredHostPolicy",
    "Tick",
    "TickLog",
    "TimerBinding",
    "TimerBindings",
    "TurnRecord",
    "Verdict",
    "WakeState",
    "Clock",
    "Confirmation",
    "Decision",
    "EffectiveFloor",
    "Eligibility",
    "FixedClock",
    "FloorgateError",
    "InvalidInput",
    "NotFound",
    "Phase",
    "Policies",
    "Reason",
    "ReductionNotAuthorized",
    "RevisionConflict",
    "Rule",
    "RuleChange",
    "SchemaTooNew",
    "Scope",
    "ScopeKind",
    "StartKind",
    "StartRecord",
    "Store",
    "StoreUnavailable",
    "SystemClock",
    "format_interval",
    "open_store",
    "parse_interval",
]
