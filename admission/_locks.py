"""Every lock key of the store in one place.

On PostgreSQL a write transaction takes an advisory lock on its key (``Store.write``), so two
writers serialize exactly when their keys are equal: writers that change the same row must use
the same function here. (On SQLite every write transaction is serialized anyway.)
"""

from __future__ import annotations


def agent(goal_id: str, agent_id: str) -> str:
    """Admission decisions of one agent (its starts and floors are read and written together)."""
    return f"agent/{goal_id}/{agent_id}"


def policy(goal_id: str, agent_id: str, automation_id: str) -> str:
    """A rule row and its history (ids cannot contain NUL, so the key is unambiguous)."""
    return f"policy\0{goal_id}\0{agent_id}\0{automation_id}"


def automation(automation_id: str) -> str:
    """An automation's row, its wake state, and opening its next mission."""
    return f"automation/{automation_id}"


def mission(mission_id: str) -> str:
    """A mission's row: counters, settlement, latch, and the owner asks that change it."""
    return f"mission/{mission_id}"


def turn(turn_id: str) -> str:
    """A turn's journal record."""
    return f"turn/{turn_id}"


def dispatch(request_id: str) -> str:
    """One metered request of a mission."""
    return f"dispatch/{request_id}"


def timer(automation_id: str) -> str:
    """An automation's timer binding."""
    return f"timer/{automation_id}"


def setting(key: str) -> str:
    """A deployment setting."""
    return f"settings/{key}"


def host(host_id: str) -> str:
    """A timer host's heartbeat row."""
    return f"host/{host_id}"


def hook_answer(automation_id: str) -> str:
    """The record of a pre-model hook's answers for one automation."""
    return f"hook-answer/{automation_id}"


def goal(goal_id: str) -> str:
    """Admission decisions of a goal whose limits count across its agents (one series for all)."""
    return f"goal/{goal_id}"
