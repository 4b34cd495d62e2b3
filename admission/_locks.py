"""Every lock key of the store in one place.

On PostgreSQL a write transaction takes an advisory lock on its key (``Store.write``), so two
writers serialize exactly when their keys are equal: writers that change the same row must use
the same function here. (On SQLite every write transaction is serialized anyway.)
"""

from __future__ import annotations

from dataclasses import dataclass


def agent(goal_id: str, agent_id: str) -> str:
    """Admission decisions of one agent (its starts and floors are read and written together)."""
    return f"agent/{goal_id}/{agent_id}"


def goal(goal_id: str) -> str:
    """Admission decisions of a goal whose limits count across its agents (one series for all)."""
    return f"goal/{goal_id}"


def policy(goal_id: str, agent_id: str, automation_id: str) -> str:
    """A rule row and its history (ids cannot contain NUL, so the key is unambiguous)."""
    return f"policy\0{goal_id}\0{agent_id}\0{automation_id}"


@dataclass(frozen=True)
class _Family:
    """A family of lock keys over one id: ``<prefix>/<id>``."""

    prefix: str

    def __call__(self, one_id: str) -> str:
        return f"{self.prefix}/{one_id}"


# An automation's row, its wake state, and opening its next mission.
automation = _Family("automation")
# A mission's row: counters, settlement, latch, and the owner asks that change it.
mission = _Family("mission")
# A turn's journal record.
turn = _Family("turn")
# One metered request of a mission.
dispatch = _Family("dispatch")
# An automation's timer binding.
timer = _Family("timer")
# A deployment setting.
setting = _Family("settings")
# A timer host's heartbeat row.
host = _Family("host")
# The record of a pre-model hook's answers for one automation.
hook_answer = _Family("hook-answer")
