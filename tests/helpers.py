"""Small builders shared by the timer-host tests."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from admission import AutomationSpec, Automations, CommandHost, FixedClock, Policies, Scope, Store
from hosts import Schedule


def command(script: str, timeout: float = 30.0) -> CommandHost:
    """A host that runs a Python snippet with this interpreter (no shell quoting games)."""
    return CommandHost(argv=(sys.executable, "-c", script), timeout_seconds=timeout)


def add_automation(
    store: Store,
    clock: FixedClock,
    automation_id: str = "x",
    schedule: str = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY",
    script: str = "pass",
    timeout: float = 30.0,
    goal: str = "g",
    agent: str = "a",
    model: str | None = None,
):  # type: ignore[no-untyped-def]
    spec = AutomationSpec(
        goal_id=goal,
        agent_id=agent,
        schedule=Schedule.parse(schedule, now=clock.now()).canonical(),
        host=command(script, timeout),
        model=model,
    )
    return Automations(store, clock).add(automation_id, spec)


def floor(store: Store, clock: FixedClock, path: str, interval: timedelta) -> None:
    Policies(store, clock).configure(Scope.parse(path), min_interval=interval, expected_revision=0, owner_ref="owner")


def marker_script(path: Path, exit_code: int = 0) -> str:
    """A snippet that appends one line to ``path`` per launch, then exits with ``exit_code``."""
    return f"import sys; open({str(path)!r}, 'a').write('launch\\n'); sys.exit({exit_code})"
