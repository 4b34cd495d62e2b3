"""Policy scopes: a goal, an agent within a goal, an automation within an agent."""

from __future__ import annotations

import re
from enum import Enum

from pydantic import BaseModel, ConfigDict

from .errors import InvalidInput

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


class ScopeKind(str, Enum):
    GOAL = "goal"
    AGENT = "agent"
    AUTOMATION = "automation"


# Ids already found valid (every decision checks four): a set lookup instead of the pattern.
_VALID: set[str] = set()
_VALID_KEPT = 65_536


def check_id(value: object, field: str) -> str:
    """A stable id: 1-128 characters of letters, digits and ``._:@-``, starting alphanumeric."""
    if type(value) is str and value in _VALID:
        return value
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidInput(
            field,
            f"{value!r} is not a valid id; use 1-128 letters, digits or ._:@- starting with a letter or digit",
        )
    if type(value) is str:  # a str subclass could compare equal to a valid id and differ otherwise
        if len(_VALID) >= _VALID_KEPT:
            _VALID.clear()
        _VALID.add(value)
    return value


MAX_LIMIT = 10_000


def check_limit(value: object, field: str = "limit") -> int:
    """A count of records to list: 1..``MAX_LIMIT`` (the same answer on every backend)."""
    if type(value) is not int or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(field, f"{value!r} is not a count of records; give 1..{MAX_LIMIT}")
    return value


class Scope(BaseModel):
    """Where a rule applies. Build with ``Scope.goal(g)``, ``Scope.agent(g, a)``, ``Scope.automation(g, a, x)``."""

    model_config = ConfigDict(frozen=True)

    goal_id: str
    agent_id: str | None = None
    automation_id: str | None = None

    def model_post_init(self, __context: object) -> None:
        check_id(self.goal_id, "goal")
        if self.agent_id is not None:
            check_id(self.agent_id, "agent")
        if self.automation_id is not None:
            if self.agent_id is None:
                raise InvalidInput("automation", "an automation scope needs its agent")
            check_id(self.automation_id, "automation")

    @classmethod
    def goal(cls, goal: str) -> Scope:
        return cls(goal_id=check_id(goal, "goal"))

    @classmethod
    def agent(cls, goal: str, agent: str) -> Scope:
        return cls(goal_id=check_id(goal, "goal"), agent_id=check_id(agent, "agent"))

    @classmethod
    def automation(cls, goal: str, agent: str, automation: str) -> Scope:
        return cls(
            goal_id=check_id(goal, "goal"),
            agent_id=check_id(agent, "agent"),
            automation_id=check_id(automation, "automation"),
        )

    @classmethod
    def parse(cls, text: str) -> Scope:
        """Parse the path form ``goal[/agent[/automation]]``."""
        parts = text.split("/") if isinstance(text, str) else []
        if not 1 <= len(parts) <= 3:
            raise InvalidInput("scope", f"{text!r} is not a scope; write GOAL, GOAL/AGENT or GOAL/AGENT/AUTOMATION")
        return (cls.goal, cls.agent, cls.automation)[len(parts) - 1](*parts)

    @property
    def kind(self) -> ScopeKind:
        if self.automation_id is not None:
            return ScopeKind.AUTOMATION
        if self.agent_id is not None:
            return ScopeKind.AGENT
        return ScopeKind.GOAL

    def key(self) -> tuple[str, str, str]:
        """The storage key; absent levels are empty strings."""
        return (self.goal_id, self.agent_id or "", self.automation_id or "")

    def __str__(self) -> str:
        return "/".join(p for p in (self.goal_id, self.agent_id, self.automation_id) if p is not None)
