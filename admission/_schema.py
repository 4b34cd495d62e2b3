"""Table definitions. Times are integer microseconds since the epoch (UTC), exact on every backend;
columns typed ``UtcMicros`` decode (and check) them into aware datetimes for their repositories.

Absent scope levels are stored as the empty string so that keys stay plain columns with a primary
key; ids can never be empty, so the empty string is unambiguous.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table, Text, false, text

from ._types import UtcMicros

metadata = MetaData()

rules = Table(
    "fg_rules",
    metadata,
    Column("goal_id", String(128), primary_key=True),
    Column("agent_id", String(128), primary_key=True),
    Column("automation_id", String(128), primary_key=True),
    # 0 means "no rule at this scope"; the row stays so that revisions never go backwards.
    Column("min_interval_us", BigInteger, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    Column("revision", Integer, nullable=False),
    Column("updated_at_us", UtcMicros, nullable=False),
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

rule_history = Table(
    "fg_rule_history",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("automation_id", String(128), nullable=False),
    Column("before_us", BigInteger, nullable=True),
    Column("after_us", BigInteger, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    Column("changed_at_us", UtcMicros, nullable=False),
    Column("reduction_authorized", Boolean, nullable=False),
    Column("compute_before", Text, nullable=True),
    Column("compute_after", Text, nullable=True),
    Column("owner_kind", String(16), nullable=False, server_default="asserted"),  # Provenance: asserted, authenticated
    Column("note", Text, nullable=True),  # the owner's note on the write, if any
    Column("limits_before", Text, nullable=True),  # the limits (JSON) before and after the write
    Column("limits_after", Text, nullable=True),
    Index("ix_fg_rule_history_scope", "goal_id", "agent_id", "automation_id", "id"),
)

starts = Table(
    "fg_starts",
    metadata,
    Column("turn_id", String(128), primary_key=True),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("automation_id", String(128), nullable=False),
    Column("trigger_us", UtcMicros, nullable=False),
    # The anchor: when admission reserved the start. Start-to-start floors count from here.
    Column("anchor_us", UtcMicros, nullable=False),
    # 'reserved' or 'confirmed'; NULL (older or hand-edited data) is read as a confirmed start.
    Column("phase", String(16), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("manual_reason", Text, nullable=True),
    Column("confirmed_at_us", UtcMicros, nullable=True),
    Index("ix_fg_starts_agent_anchor", "goal_id", "agent_id", "anchor_us"),
    Index("ix_fg_starts_lane_anchor", "goal_id", "agent_id", "automation_id", "anchor_us"),
    Index("ix_fg_starts_lane_trigger", "goal_id", "agent_id", "automation_id", "trigger_us", unique=True),
    # Only unconfirmed reservations: recovery finds the orphaned ones without scanning every start.
    Index("ix_fg_starts_reserved", "anchor_us", sqlite_where=text("phase = 'reserved'"), postgresql_where=text("phase = 'reserved'")),
    Index("ix_fg_starts_anchor", "anchor_us"),  # a host's sync: the lanes that started since its last poll
    Index("ix_fg_starts_goal_anchor", "goal_id", "anchor_us"),  # the goal's latest start (a goal floor across agents)
)

automations = Table(
    "fg_automations",
    metadata,
    Column("automation_id", String(128), primary_key=True),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
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
    Column("created_at_us", UtcMicros, nullable=False),
    Column("updated_at_us", UtcMicros, nullable=False),
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

wake_state = Table(
    "fg_wake_state",
    metadata,
    Column("automation_id", String(128), primary_key=True),
    Column("backoff_step", Integer, nullable=False),  # 0: no backoff chain running
    Column("backoff_wake_us", UtcMicros, nullable=True),
    Column("failures", Integer, nullable=False, server_default="0"),  # consecutive failed turns (0: none)
    Column("failed_at_us", UtcMicros, nullable=True),  # when the latest of them settled
    Column("failing_until_us", UtcMicros, nullable=True),  # the earliest automatic start the streak allows
    Column("updated_at_us", UtcMicros, nullable=False),
    Index("ix_fg_wake_state_updated", "updated_at_us"),
)

# Event triggers: one row per trigger id, pending until a turn starts for it (``admission.triggers``).
triggers = Table(
    "fg_triggers",
    metadata,
    Column("automation_id", String(128), primary_key=True),
    Column("trigger_id", String(128), primary_key=True),  # the caller's idempotency key (or a minted one)
    Column("trigger_key", String(200), nullable=True),  # what the work is about, as the caller named it
    Column("at_us", UtcMicros, nullable=False),
    Column("served_at_us", UtcMicros, nullable=True),  # NULL: pending; set when a turn started for it
    Column("served_turn_id", String(200), nullable=True),
    Index("ix_fg_triggers_pending", "automation_id", "served_at_us"),
    Index("ix_fg_triggers_at", "at_us"),  # a host's sync: triggers since its last poll
)

# The hash of the PostgreSQL decision functions installed after the migrations (decide.render).
installed = Table(
    "fg_installed",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("hash", String(64), nullable=False),
)

ticks = Table(
    "fg_ticks",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("automation_id", String(128), nullable=False),
    Column("nominal_us", UtcMicros, nullable=False),
    Column("actual_us", UtcMicros, nullable=False),
    Column("decision", String(16), nullable=False),
    Column("reason", String(200), nullable=False),
    Column("turn_id", String(128), nullable=True),
    Column("host", String(128), nullable=False),
    Index("ix_fg_ticks_automation", "automation_id", "id"),
    Index("ix_fg_ticks_automation_nominal", "automation_id", "nominal_us"),  # the latest tick of a few automations
)

turns = Table(
    "fg_turns",
    metadata,
    Column("turn_id", String(128), primary_key=True),
    Column("automation_id", String(128), nullable=False),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("kind", String(16), nullable=False),
    Column("manual_reason", Text, nullable=True),
    Column("runner_host", String(128), nullable=False),
    Column("runner_pid", Integer, nullable=False),
    Column("child_pid", Integer, nullable=True),
    Column("started_at_us", UtcMicros, nullable=False),
    Column("deadline_us", UtcMicros, nullable=False),
    # journaled (attempt durable, nothing spawned) -> confirmed (the host may have spawned) ->
    # launched (child pid known) -> settled
    Column("phase", String(16), nullable=False),
    Column("status", String(16), nullable=True),
    Column("stop_reason", Text, nullable=True),  # whole: it may carry the command to run next
    Column("retryable", Boolean, nullable=True),
    Column("failure_category", String(16), nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("stop_bound", String(32), nullable=True),  # the envelope bound that stopped the turn
    Column("settled_at_us", UtcMicros, nullable=True),
    Column("log_path", Text, nullable=True),
    Column("mission_id", String(128), nullable=True),
    # The claim: one owner ("host:pid:nonce") at a time, valid until the lease expires; every
    # step after the claim is an UPDATE conditional on owning it.
    Column("owner_id", String(160), nullable=True),
    Column("lease_expires_us", UtcMicros, nullable=True),
    # Who child_pid was: the boot it was spawned in and its start time (clock ticks since boot), so
    # recovery never signals a process that merely reuses the number (migration 0018).
    Column("child_boot_id", String(64), nullable=True),
    Column("child_start_ticks", BigInteger, nullable=True),
    Index("ix_fg_turns_automation", "automation_id", "started_at_us"),
    Index("ix_fg_turns_phase", "phase"),
)

timer_bindings = Table(
    "fg_timer_bindings",
    metadata,
    Column("automation_id", String(128), primary_key=True),
    Column("timer", String(16), nullable=False),
    Column("desired", Text, nullable=True),  # NULL while held
    Column("desired_raised", Boolean, nullable=False),
    Column("hold_reason", Text, nullable=True),
    Column("desired_at_us", UtcMicros, nullable=False),
    Column("applied_at_us", UtcMicros, nullable=True),
    Column("apply_error", Text, nullable=True),
    Column("observed_state", String(16), nullable=True),  # present, absent, unavailable; NULL never read
    Column("observed", Text, nullable=True),
    Column("observed_at_us", UtcMicros, nullable=True),
    Column("ack_state", String(16), nullable=False),  # none, acked
    Column("acked_at_us", UtcMicros, nullable=True),
    Column("acked_observed", Text, nullable=True),
    Column("read_requested_at_us", UtcMicros, nullable=True),
    Column("host_user", String(64), nullable=True),  # e.g. whose crontab holds the line
    # Only the readbacks someone asked for: a host's poll finds them without reading every binding.
    Index(
        "ix_fg_timer_bindings_read_requested",
        "read_requested_at_us",
        sqlite_where=text("read_requested_at_us IS NOT NULL"),
        postgresql_where=text("read_requested_at_us IS NOT NULL"),
    ),
)

missions = Table(
    "fg_missions",
    metadata,
    Column("mission_id", String(128), primary_key=True),
    Column("automation_id", String(128), nullable=False),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("status", String(16), nullable=False),  # open, succeeded, stuck, awaiting_owner, denied
    Column("stop_reason", Text, nullable=True),
    Column("started_at_us", UtcMicros, nullable=False),
    Column("settled_at_us", UtcMicros, nullable=True),
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

dispatches = Table(
    "fg_dispatches",
    metadata,
    Column("request_id", String(128), primary_key=True),
    Column("mission_id", String(128), nullable=False),
    Column("kind", String(16), nullable=False),  # model, tool
    Column("state", String(16), nullable=False),  # reserved, dispatched, reconciled, released
    Column("estimate_tokens", BigInteger, nullable=False),
    Column("actual_tokens", BigInteger, nullable=True),
    Column("model", String(128), nullable=True),
    Column("created_at_us", UtcMicros, nullable=False),
    Column("updated_at_us", UtcMicros, nullable=False),
    Index("ix_fg_dispatches_mission", "mission_id", "state"),
)

approvals = Table(
    "fg_approvals",
    metadata,
    Column("approval_id", String(64), primary_key=True),
    Column("mission_id", String(128), nullable=False),
    Column("scope", String(400), nullable=False),
    Column("bound", String(32), nullable=False),
    Column("proposal_json", Text, nullable=False),
    Column("state", String(16), nullable=False),  # pending, approved, denied, expired, superseded
    Column("created_at_us", UtcMicros, nullable=False),
    Column("expires_at_us", UtcMicros, nullable=False),
    Column("decided_at_us", UtcMicros, nullable=True),
    Column("decided_by", String(64), nullable=True),  # who decided it (NULL: the CLI, unnamed)
    Column("decided_by_kind", String(16), nullable=True),  # Provenance of decided_by
    Index("ix_fg_approvals_mission", "mission_id", "state"),
)

settings = Table(
    "fg_settings",
    metadata,
    # One row per deployment-wide setting (e.g. "host_policy"), its value as JSON, compare-and-set.
    Column("key", String(64), primary_key=True),
    Column("value_json", Text, nullable=False),
    Column("revision", Integer, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    Column("updated_at_us", UtcMicros, nullable=False),
)

hosts = Table(
    "fg_hosts",
    metadata,
    # One row per running (or recently stopped) `floorgate run`: its heartbeat.
    Column("host_id", String(200), primary_key=True),
    Column("hostname", String(255), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("version", String(64), nullable=False),
    Column("started_at_us", UtcMicros, nullable=False),
    Column("beat_at_us", UtcMicros, nullable=False),
    Column("poll_us", BigInteger, nullable=False),
    Column("stopped_at_us", UtcMicros, nullable=True),
    Column("envelope_mode", String(16), nullable=True),  # EnvelopeMode the host runs with; NULL: not recorded
)

hook_answers = Table(
    "fg_hook_answers",
    metadata,
    # When a pre-model hook last answered for an automation (what the pre-model-hook guarantee needs).
    Column("automation_id", String(128), primary_key=True),
    Column("answered_at_us", UtcMicros, nullable=False),
    Column("admitted", Boolean, nullable=False),
    Column("answers", BigInteger, nullable=False),
)

principals = Table(
    "fg_principals",
    metadata,
    # Console principals: a token's SHA-256 hash, never the token.
    Column("name", String(64), primary_key=True),
    Column("role", String(16), nullable=False),  # owner, viewer
    Column("token_sha256", String(64), nullable=False),
    Column("created_at_us", UtcMicros, nullable=False),
    Column("revoked_at_us", UtcMicros, nullable=True),
    Column("zone", String(64), nullable=True),  # IANA zone the console shows times in; NULL: UTC
)

events = Table(
    "fg_events",
    metadata,
    # The outbox: past-tense records, each written in the transaction of the change it describes.
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("event_id", String(64), nullable=False),
    Column("kind", String(32), nullable=False),  # EventKind
    Column("subject", String(400), nullable=False),
    Column("data_json", Text, nullable=False),
    Column("occurred_at_us", UtcMicros, nullable=False),
    # An observed event (host_lost, timer_drift) is written once per occurrence: its key.
    Column("dedup_key", String(200), nullable=True),
    Index("ix_fg_events_event_id", "event_id", unique=True),
    Index("ix_fg_events_dedup_key", "dedup_key", unique=True),
)

webhooks = Table(
    "fg_webhooks",
    metadata,
    # A subscription: the secret is kept (signing needs it) and shown once, at add.
    Column("webhook_id", String(64), primary_key=True),
    Column("url", Text, nullable=False),
    Column("events", String(400), nullable=False),  # comma-separated EventKind values
    Column("secret", String(128), nullable=False),
    Column("created_at_us", UtcMicros, nullable=False),
    Column("format", String(16), nullable=False, server_default="json"),  # WebhookFormat
)

deliveries = Table(
    "fg_deliveries",
    metadata,
    # One row per (webhook, event), fanned out with the event: the delivery log.
    Column("webhook_id", String(64), primary_key=True),
    Column("event_id", String(64), primary_key=True),
    Column("state", String(16), nullable=False),  # DeliveryState
    Column("attempts", Integer, nullable=False),
    Column("last_status", Integer, nullable=True),
    Column("last_error", Text, nullable=True),
    Column("last_attempt_at_us", UtcMicros, nullable=True),
    Column("next_attempt_at_us", UtcMicros, nullable=False),
    Column("delivered_at_us", UtcMicros, nullable=True),
    Index("ix_fg_deliveries_due", "state", "next_attempt_at_us"),
)

sessions = Table(
    "fg_sessions",
    metadata,
    # Signed-in console sessions: the cookie's SHA-256 hash, never the cookie.
    Column("session_sha256", String(64), primary_key=True),
    Column("principal", String(64), nullable=False),
    Column("csrf", String(64), nullable=False),
    Column("created_at_us", UtcMicros, nullable=False),
    Column("expires_at_us", UtcMicros, nullable=False),
    Index("ix_fg_sessions_expires", "expires_at_us"),
)

signin_locks = Table(
    "fg_signin_locks",
    metadata,
    # An engaged sign-in lock (failures are counted in each console process's memory; only a lock
    # is written): ``token:<sha256>`` for one token, ``client:<address>|<name>`` for guessing.
    Column("lock_key", String(200), primary_key=True),
    Column("reason", String(16), nullable=False),  # LockReason
    Column("failures", Integer, nullable=False),
    Column("until_us", UtcMicros, nullable=False),
    Index("ix_fg_signin_locks_until", "until_us"),
)

usage = Table(
    "fg_usage",
    metadata,
    # One row per turn (idempotent by turn id): an estimate held at admission, reconciled to the
    # reported usage at settlement. Counted in a budget's window at ``at_us`` (the admission).
    Column("turn_id", String(128), primary_key=True),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("automation_id", String(128), nullable=False),
    Column("at_us", UtcMicros, nullable=False),
    Column("state", String(16), nullable=False),  # UsageState: held, settled, unknown
    Column("model", String(128), nullable=True),
    Column("estimate_tokens", BigInteger, nullable=False),
    Column("tokens", BigInteger, nullable=True),  # as reported; NULL while held or unknown
    Column("usd_micros", BigInteger, nullable=True),  # cost as reported; NULL: priced by the model's price
    Column("source", String(16), nullable=False),  # UsageSource: admission, meter, hook
    Column("settled_at_us", UtcMicros, nullable=True),
    # What reported the usage (an app's turn in its transcript): a second report of it is a no-op.
    Column("report_key", String(128), nullable=True),
    Index("ix_fg_usage_report", "report_key", unique=True),
    Index("ix_fg_usage_agent_at", "goal_id", "agent_id", "at_us"),
    Index("ix_fg_usage_goal_at", "goal_id", "at_us"),
    Index("ix_fg_usage_at", "at_us"),
    # A lane's largest recent settled turn: walked from the largest down to the first in the lookback
    # (partial: only a read of settled turns can pick it).
    Index(
        "ix_fg_usage_lane_tokens",
        "goal_id",
        "agent_id",
        "automation_id",
        "tokens",
        "at_us",
        sqlite_where=text("state = 'settled'"),
        postgresql_where=text("state = 'settled'"),
    ),
)

model_prices = Table(
    "fg_model_prices",
    metadata,
    Column("model", String(128), primary_key=True),
    Column("usd_per_mtok_micros", BigInteger, nullable=True),  # NULL: removed (the row keeps the revision)
    Column("revision", Integer, nullable=False),
    Column("owner_ref", String(64), nullable=False),
    Column("updated_at_us", UtcMicros, nullable=False),
)
