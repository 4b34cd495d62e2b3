"""Table definitions. Times are integer microseconds since the epoch (UTC), exact on every backend.

Absent scope levels are stored as the empty string so that keys stay plain columns with a primary
key; ids can never be empty, so the empty string is unambiguous.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Column, Index, Integer, MetaData, String, Table, Text

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
    Column("updated_at_us", BigInteger, nullable=False),
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
    Column("changed_at_us", BigInteger, nullable=False),
    Column("reduction_authorized", Boolean, nullable=False),
    Index("ix_fg_rule_history_scope", "goal_id", "agent_id", "automation_id", "id"),
)

starts = Table(
    "fg_starts",
    metadata,
    Column("turn_id", String(128), primary_key=True),
    Column("goal_id", String(128), nullable=False),
    Column("agent_id", String(128), nullable=False),
    Column("automation_id", String(128), nullable=False),
    Column("trigger_us", BigInteger, nullable=False),
    # The anchor: when admission reserved the start. Start-to-start floors count from here.
    Column("anchor_us", BigInteger, nullable=False),
    # 'reserved' or 'confirmed'; NULL (older or hand-edited data) is read as a confirmed start.
    Column("phase", String(16), nullable=True),
    Column("kind", String(16), nullable=False),
    Column("manual_reason", Text, nullable=True),
    Column("confirmed_at_us", BigInteger, nullable=True),
    Index("ix_fg_starts_agent_anchor", "goal_id", "agent_id", "anchor_us"),
    Index("ix_fg_starts_lane_anchor", "goal_id", "agent_id", "automation_id", "anchor_us"),
    Index("ix_fg_starts_lane_trigger", "goal_id", "agent_id", "automation_id", "trigger_us", unique=True),
)
