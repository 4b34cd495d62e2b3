"""Table definitions. Times are integer microseconds since the epoch (UTC), exact on every backend;
columns typed ``UtcMicros`` decode (and check) them into aware datetimes for their repositories.

Absent scope levels are stored as the empty string so that keys stay plain columns with a primary
key; ids can never be empty, so the empty string is unambiguous.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table, Text, false, text

from ._types import UtcMicros

metadata = MetaData()


def _table(name: str, *items: Column[Any] | Index) -> Table:
    """A table of ``metadata``."""
    return Table(name, metadata, *items)


def _partial(name: str, *columns: str, where: str) -> Index:
    """An index over only the rows ``where`` holds (the same condition on both backends)."""
    return Index(name, *columns, sqlite_where=text(where), postgresql_where=text(where))


def _id(name: str) -> Column[str]:
    """A required id (ids are at most 128 characters, on every table)."""
    return Column(name, String(128), nullable=False)


def _key(name: str) -> Column[str]:
    """An id that is the table's primary key (or part of it)."""
    return Column(name, String(128), primary_key=True)


def _lane(*, key: bool = False) -> tuple[Column[str], ...]:
    """A lane's scope: its goal, agent and automation ids (the primary key with ``key``)."""
    return tuple((_key if key else _id)(name) for name in ("goal_id", "agent_id", "automation_id"))


def _at(name: str) -> Column[datetime]:
    """A required time (``UtcMicros``)."""
    return Column(name, UtcMicros, nullable=False)


def _at_or_none(name: str) -> Column[datetime]:
    """A time that may be NULL."""
    return Column(name, UtcMicros, nullable=True)


rules = _table(
    "fg_rules",
    *_lane(key=True),
    # 0 means "no rule at this scope"; the row stays so that revisions never go backwards.
    Column("min_interval_us", BigInteger, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    Column("revision", Integer, nullable=False),
    _at("updated_at_us"),
    Column("compute_json", Text, nullable=True),  # the scope's compute block, as written
    # Limits across runs (admission.limits): NULL where the scope sets none.
    Column("max_starts", Integer, nullable=True),
    Column("starts_window", String(80), nullable=True),  # admission.windows text: 1d, day@Europe/Berlin
    Column("budget_tokens", BigInteger, nullable=True),
    Column("budget_usd_micros", BigInteger, nullable=True),
    Column("budget_window", String(80), nullable=True),
    Column("estimate_tokens", BigInteger, nullable=True),
    Column("across_agents", Boolean, nullable=False, server_default=false()),  # goal rules: one series for all agents
    Column("alert_at", String(40), nullable=True),  # budget_threshold percentages (50,80,100); NULL: the default
)

rule_history = _table(
    "fg_rule_history",
    Column("id", Integer, primary_key=True, autoincrement=True),
    *_lane(),
    Column("before_us", BigInteger, nullable=True),
    Column("after_us", BigInteger, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    _at("changed_at_us"),
    Column("reduction_authorized", Boolean, nullable=False),
    Column("compute_before", Text, nullable=True),
    Column("compute_after", Text, nullable=True),
    Column("owner_kind", String(16), nullable=False, server_default="asserted"),  # Provenance: asserted, authenticated
    Column("note", Text, nullable=True),  # the owner's note on the write, if any
    Column("limits_before", Text, nullable=True),  # the limits (JSON) before and after the write
    Column("limits_after", Text, nullable=True),
    Index("ix_fg_rule_history_scope", "goal_id", "agent_id", "automation_id", "id"),
)

starts = _table(
    "fg_starts",
    _key("turn_id"),
    *_lane(),
    _at("trigger_us"),
    # The anchor: when admission reserved the start. Start-to-start floors count from here.
    _at("anchor_us"),
    # 'reserved' or 'confirmed'; NULL (older or hand-edited data) is read as a confirmed start.
    Column("phase", String(16), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("manual_reason", Text, nullable=True),
    _at_or_none("confirmed_at_us"),
    Index("ix_fg_starts_agent_anchor", "goal_id", "agent_id", "anchor_us"),
    Index("ix_fg_starts_lane_anchor", "goal_id", "agent_id", "automation_id", "anchor_us"),
    Index("ix_fg_starts_lane_trigger", "goal_id", "agent_id", "automation_id", "trigger_us", unique=True),
    # Only unconfirmed reservations: recovery finds the orphaned ones without scanning every start.
    _partial("ix_fg_starts_reserved", "anchor_us", where="phase = 'reserved'"),
    Index("ix_fg_starts_anchor", "anchor_us"),  # a host's sync: the lanes that started since its last poll
    Index("ix_fg_starts_goal_anchor", "goal_id", "anchor_us"),  # the goal's latest start (a goal floor across agents)
)

automations = _table(
    "fg_automations",
    _key("automation_id"),
    _id("goal_id"),
    _id("agent_id"),
    Column("schedule", Text, nullable=False),
    Column("host_spec", Text, nullable=False),  # JSON of the host's spec
    Column("model", String(128), nullable=True),
    Column("overlap", String(16), nullable=False),
    Column("timer", String(16), nullable=False, server_default="apscheduler"),
    Column("backend", String(128), nullable=True),
    Column("meter", String(32), nullable=False, server_default="none"),
    Column("state", String(16), nullable=False),
    Column("state_note", Text, nullable=True),
    Column("revision", Integer, nullable=False),
    _at("created_at_us"),
    _at("updated_at_us"),
    Column("hold_kind", String(16), nullable=True),  # HoldKind while held, else NULL
    Column("hold_after", Integer, nullable=True),  # consecutive failures that hold it (0: never; NULL: the default)
    Column("catch_up", String(16), nullable=True),  # CatchUp (NULL: the deployment's host policy)
    Column("catch_up_window_us", BigInteger, nullable=True),  # NULL: the deployment's catch-up window
    Column("external_id", String(128), nullable=True),  # the caller's own id for it (fleets)
    Column("labels", Text, nullable=True),  # JSON object of label -> value (fleets), NULL: none
    Column("when_denied", String(8), nullable=False, server_default="wait"),  # WhenDenied
    Column("debounce_quiet_us", BigInteger, nullable=True),  # a trigger burst wakes after this quiet (NULL: at once)
    Column("debounce_max_us", BigInteger, nullable=True),  # ... never later than this after its first trigger (NULL: no cap)
    Index("ix_fg_automations_updated", "updated_at_us"),  # a host's sync: what changed since its last poll
)

wake_state = _table(
    "fg_wake_state",
    _key("automation_id"),
    Column("backoff_step", Integer, nullable=False),  # 0: no backoff chain running
    _at_or_none("backoff_wake_us"),
    Column("failures", Integer, nullable=False, server_default="0"),  # consecutive failed turns (0: none)
    _at_or_none("failed_at_us"),  # when the latest of them settled
    _at_or_none("failing_until_us"),  # the earliest automatic start the streak allows
    _at("updated_at_us"),
    Index("ix_fg_wake_state_updated", "updated_at_us"),
)

# Event triggers: one row per trigger id, pending until a turn starts for it (``admission.triggers``).
triggers = _table(
    "fg_triggers",
    _key("automation_id"),
    _key("trigger_id"),  # the caller's idempotency key (or a minted one)
    Column("trigger_key", String(200), nullable=True),  # what the work is about, as the caller named it
    _at("at_us"),
    _at_or_none("served_at_us"),  # NULL: pending; set when a turn started for it
    Column("served_turn_id", String(200), nullable=True),
    Index("ix_fg_triggers_pending", "automation_id", "served_at_us"),
    Index("ix_fg_triggers_at", "at_us"),  # a host's sync: triggers since its last poll
)

# The hash of the PostgreSQL decision functions installed after the migrations (decide.render).
installed = _table(
    "fg_installed",
    Column("name", String(64), primary_key=True),
    Column("hash", String(64), nullable=False),
)

ticks = _table(
    "fg_ticks",
    Column("id", Integer, primary_key=True, autoincrement=True),
    _id("automation_id"),
    _at("nominal_us"),
    _at("actual_us"),
    Column("decision", String(16), nullable=False),
    Column("reason", String(200), nullable=False),
    Column("turn_id", String(128), nullable=True),
    _id("host"),
    Index("ix_fg_ticks_automation", "automation_id", "id"),
    Index("ix_fg_ticks_automation_nominal", "automation_id", "nominal_us"),  # the latest tick of a few automations
)

turns = _table(
    "fg_turns",
    _key("turn_id"),
    _id("automation_id"),
    _id("goal_id"),
    _id("agent_id"),
    Column("attempt", Integer, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("manual_reason", Text, nullable=True),
    _id("runner_host"),
    Column("runner_pid", Integer, nullable=False),
    Column("child_pid", Integer, nullable=True),
    _at("started_at_us"),
    _at("deadline_us"),
    # journaled (attempt durable, nothing spawned) -> confirmed (the host may have spawned) ->
    # launched (child pid known) -> settled
    Column("phase", String(16), nullable=False),
    Column("status", String(16), nullable=True),
    Column("stop_reason", Text, nullable=True),  # whole: it may carry the command to run next
    Column("retryable", Boolean, nullable=True),
    Column("failure_category", String(16), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("stop_bound", String(32), nullable=True),  # the envelope bound that stopped the turn
    _at_or_none("settled_at_us"),
    Column("log_path", Text, nullable=True),
    Column("mission_id", String(128), nullable=True),
    # The claim: one owner ("host:pid:nonce") at a time, valid until the lease expires; every
    # step after the claim is an UPDATE conditional on owning it.
    Column("owner_id", String(160), nullable=True),
    _at_or_none("lease_expires_us"),
    # Who child_pid was: the boot it was spawned in and its start time (clock ticks since boot), so
    # recovery never signals a process that merely reuses the number (migration 0018).
    Column("child_boot_id", String(64), nullable=True),
    Column("child_start_ticks", BigInteger, nullable=True),
    Index("ix_fg_turns_automation", "automation_id", "started_at_us"),
    Index("ix_fg_turns_phase", "phase"),
)

timer_bindings = _table(
    "fg_timer_bindings",
    _key("automation_id"),
    Column("timer", String(16), nullable=False),
    Column("desired", Text, nullable=True),  # NULL while held
    Column("desired_raised", Boolean, nullable=False),
    Column("hold_reason", Text, nullable=True),
    _at("desired_at_us"),
    _at_or_none("applied_at_us"),
    Column("apply_error", Text, nullable=True),
    Column("observed_state", String(16), nullable=True),  # present, absent, unavailable; NULL never read
    Column("observed", Text, nullable=True),
    _at_or_none("observed_at_us"),
    Column("ack_state", String(16), nullable=False),  # none, acked
    _at_or_none("acked_at_us"),
    Column("acked_observed", Text, nullable=True),
    _at_or_none("read_requested_at_us"),
    Column("host_user", String(64), nullable=True),  # e.g. whose crontab holds the line
    # Only the readbacks someone asked for: a host's poll finds them without reading every binding.
    _partial("ix_fg_timer_bindings_read_requested", "read_requested_at_us", where="read_requested_at_us IS NOT NULL"),
)

missions = _table(
    "fg_missions",
    _key("mission_id"),
    _id("automation_id"),
    _id("goal_id"),
    _id("agent_id"),
    Column("status", String(16), nullable=False),  # open, succeeded, stuck, awaiting_owner, denied
    Column("stop_reason", Text, nullable=True),
    _at("started_at_us"),
    _at_or_none("settled_at_us"),
    Column("turns", Integer, nullable=False),
    Column("tool_calls", Integer, nullable=False),
    Column("tokens", BigInteger, nullable=False),
    Column("usage_reports", Integer, nullable=False),  # 0: the host never reported usage
    Column("extra_turns", Integer, nullable=False),  # granted by approved asks
    Column("extra_tool_calls", Integer, nullable=False),
    Column("extra_tokens", BigInteger, nullable=False),
    Column("extra_wall_seconds", Integer, nullable=False),
    Column("wall_ms", BigInteger, nullable=False, server_default=text("0")),  # its turns' run time
    Column("latch", Text, nullable=True),  # accounting latch reason; blocks dispatch in enforce
    Column("problems", Text, nullable=True),  # envelope problems reported in observe
    Index("ix_fg_missions_automation", "automation_id", "status"),
)

dispatches = _table(
    "fg_dispatches",
    _key("request_id"),
    _id("mission_id"),
    Column("kind", String(16), nullable=False),  # model, tool
    Column("state", String(16), nullable=False),  # reserved, dispatched, reconciled, released
    Column("estimate_tokens", BigInteger, nullable=False),
    Column("actual_tokens", BigInteger, nullable=True),
    Column("model", String(128), nullable=True),
    _at("created_at_us"),
    _at("updated_at_us"),
    Index("ix_fg_dispatches_mission", "mission_id", "state"),
)

approvals = _table(
    "fg_approvals",
    Column("approval_id", String(64), primary_key=True),
    _id("mission_id"),
    Column("scope", String(400), nullable=False),
    Column("bound", String(32), nullable=False),
    Column("proposal_json", Text, nullable=False),
    Column("state", String(16), nullable=False),  # pending, approved, denied, expired, superseded
    _at("created_at_us"),
    _at("expires_at_us"),
    _at_or_none("decided_at_us"),
    Column("decided_by", String(64), nullable=True),  # who decided it (NULL: the CLI, unnamed)
    Column("decided_by_kind", String(16), nullable=True),  # Provenance of decided_by
    Index("ix_fg_approvals_mission", "mission_id", "state"),
)

settings = _table(
    "fg_settings",
    # One row per deployment-wide setting (e.g. "host_policy"), its value as JSON, compare-and-set.
    Column("key", String(64), primary_key=True),
    Column("value_json", Text, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    _at("updated_at_us"),
)

hosts = _table(
    "fg_hosts",
    # One row per running (or recently stopped) `floorgate run`: its heartbeat.
    Column("host_id", String(200), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    _at("started_at_us"),
    _at("beat_at_us"),
    Column("poll_us", BigInteger, nullable=False),
    _at_or_none("stopped_at_us"),
    Column("envelope_mode", String(16), nullable=True),  # EnvelopeMode the host runs with; NULL: not recorded
)

hook_answers = _table(
    "fg_hook_answers",
    # When a pre-model hook last answered for an automation (what the pre-model-hook guarantee needs).
    _key("automation_id"),
    _at("answered_at_us"),
    Column("admitted", Boolean, nullable=False),
    Column("answers", BigInteger, nullable=False),
)

principals = _table(
    "fg_principals",
    # Console principals: a token's SHA-256 hash, never the token.
    Column("name", String(64), primary_key=True),
    Column("role", String(16), nullable=False),  # owner, viewer
    Column("token_sha256", String(64), nullable=False),
    _at("created_at_us"),
    _at_or_none("revoked_at_us"),
    Column("zone", String(64), nullable=True),  # IANA zone the console shows times in; NULL: UTC
)

sessions = _table(
    "fg_sessions",
    # Signed-in console sessions: the cookie's SHA-256 hash, never the cookie.
    Column("session_sha256", String(64), primary_key=True),
    Column("principal", String(64), nullable=False),
    Column("csrf", String(64), nullable=False),
    _at("created_at_us"),
    _at("expires_at_us"),
    Index("ix_fg_sessions_expires", "expires_at_us"),
)

signin_locks = _table(
    "fg_signin_locks",
    # An engaged sign-in lock (failures are counted in each console process's memory; only a lock
    # is written): ``token:<sha256>`` for one token, ``client:<address>|<name>`` for guessing.
    Column("lock_key", String(200), primary_key=True),
    Column("reason", String(16), nullable=False),  # LockReason
    Column("failures", Integer, nullable=False),
    _at("until_us"),
    Index("ix_fg_signin_locks_until", "until_us"),
)

events = _table(
    "fg_events",
    # The outbox: past-tense records, each written in the transaction of the change it describes.
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(64), nullable=False),
    Column("kind", String(32), nullable=False),  # EventKind
    Column("subject", String(400), nullable=False),
    Column("data_json", Text, nullable=False),
    _at("occurred_at_us"),
    # An observed event (host_lost, timer_drift) is written once per occurrence: its key.
    Column("dedup_key", String(200), nullable=True),
    Index("ix_fg_events_event_id", "event_id", unique=True),
    Index("ix_fg_events_dedup_key", "dedup_key", unique=True),
)

webhooks = _table(
    "fg_webhooks",
    # A subscription: the secret is kept (signing needs it) and shown once, at add.
    Column("webhook_id", String(64), primary_key=True),
    Column("url", Text, nullable=False),
    Column("events", String(400), nullable=False),  # comma-separated EventKind values
    _id("secret"),
    _at("created_at_us"),
    Column("format", String(16), nullable=False, server_default="json"),  # WebhookFormat
)

deliveries = _table(
    "fg_deliveries",
    # One row per (webhook, event), fanned out with the event: the delivery log.
    Column("webhook_id", String(64), primary_key=True),
    Column("event_id", String(64), primary_key=True),
    Column("state", String(16), nullable=False),  # DeliveryState
    Column("attempts", Integer, nullable=False),
    Column("last_status", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    _at_or_none("last_attempt_at_us"),
    _at("next_attempt_at_us"),
    _at_or_none("delivered_at_us"),
    Index("ix_fg_deliveries_due", "state", "next_attempt_at_us"),
)

usage = _table(
    "fg_usage",
    # One row per turn (idempotent by turn id): an estimate held at admission, reconciled to the
    # reported usage at settlement. Counted in a budget's window at ``at_us`` (the admission).
    _key("turn_id"),
    *_lane(),
    _at("at_us"),
    Column("state", String(16), nullable=False),  # UsageState: held, settled, unknown
    Column("model", String(128), nullable=True),
    Column("estimate_tokens", BigInteger, nullable=False),
    Column("tokens", BigInteger, nullable=True),  # as reported; NULL while held or unknown
    Column("usd_micros", BigInteger, nullable=True),  # cost as reported; NULL: priced by the model's price
    Column("source", String(16), nullable=False),  # UsageSource: admission, meter, hook
    _at_or_none("settled_at_us"),
    # What reported the usage (an app's turn in its transcript): a second report of it is a no-op.
    Column("report_key", String(128), nullable=True),
    Index("ix_fg_usage_report", "report_key", unique=True),
    Index("ix_fg_usage_agent_at", "goal_id", "agent_id", "at_us"),
    Index("ix_fg_usage_goal_at", "goal_id", "at_us"),
    Index("ix_fg_usage_at", "at_us"),
    # A lane's largest recent settled turn: walked from the largest down to the first in the lookback
    # (partial: only a read of settled turns can pick it).
    _partial("ix_fg_usage_lane_tokens", "goal_id", "agent_id", "automation_id", "tokens", "at_us", where="state = 'settled'"),
)

model_prices = _table(
    "fg_model_prices",
    _key("model"),
    Column("usd_per_mtok_micros", BigInteger, nullable=True),  # NULL: removed (the row keeps the revision)
    Column("revision", Integer, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    _at("updated_at_us"),
)

# A SQLite store's mark of what a limited lane's decision reads (migration 0032): one row whose
# value triggers replace with a random one whenever a start, usage row, rule, price or an
# automation's model changes. A decision that finds it unchanged since its lane's limits were last
# read reuses what that read found (``admission._limit_read``). PostgreSQL keeps the row, no triggers.
limit_mark = _table(
    "fg_limit_mark",
    Column("k", Integer, primary_key=True, autoincrement=False),
    Column("n", BigInteger, nullable=False),
)
