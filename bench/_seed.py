"""Seeding a benchmark's store: its automations written straight into the table, thousands in one
statement (the service adds one a call, with its checks and events, which a bench does not measure).

floorgate is imported inside the function: a bench that compares two trees imports this module
before it knows which tree a process runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any


def add_automations(store: Any, lanes: Iterable[tuple[str, str, str]], host_spec: str, at: datetime) -> None:
    """Active automations of goal ``bench``, one per ``(automation_id, agent_id, schedule)`` (the
    schedule canonical), each with ``host_spec`` (a host's JSON), created and last changed ``at``."""
    from sqlalchemy import insert

    from floorgate.admission import _schema as tables

    # The lanes' automations differ only in their ids and schedule: one spec, in the state an added one starts in.
    spec = dict(goal_id="bench", host_spec=host_spec, model=None, overlap="skip")
    added = dict(state="active", state_note=None, revision=1, created_at_us=at, updated_at_us=at)
    rows = [
        dict(spec, **added, automation_id=automation_id, agent_id=agent_id, schedule=schedule)
        for automation_id, agent_id, schedule in lanes
    ]
    with store.write() as conn:
        conn.execute(insert(tables.automations), rows)
