"""Policy scopes: a goal, an agent within a goal, an automation within an agent."""

from __future__ import annotations

import re
from enum import Enum

from ._types import Frozen
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


def _unprintable(value: str) -> int | None:
    """The position of the first character a terminal would not print as itself (a NUL, any other
    C0 or C1 control such as ESC or CSI that starts an escape sequence, DEL, a line or paragraph
    separator, a bidi override), or None."""
    if value.isprintable():
        return None
    return next(i for i, c in enumerate(value) if not c.isprintable())


def check_text(value: object, field: str, *, max_len: int) -> str:
    """Free text an owner wrote (a pause note, a manual reason): one line of at most ``max_len``
    printable characters. A control character would reach a terminal that shows it (``status``)
    as an escape sequence, and PostgreSQL refuses a NUL: both are refused here, naming the field."""
    if not isinstance(value, str):
        raise InvalidInput(field, "must be text")
    at = _unprintable(value)
    if at is not None:
        raise InvalidInput(
            field, f"contains the control character {value[at]!r} at position {at}; give one line of printable text (no escape sequences)"
        )
    if len(value) > max_len:
        raise InvalidInput(field, f"keep it under {max_len} characters")
    return value


def check_key(value: object, field: str, max_len: int = 128) -> str:
    """An id floorgate minted (a turn, mission or approval id, a principal's name) as a caller
    passes it back: 1..``max_len`` printable characters, else ``InvalidInput`` naming ``field``
    (a NUL would otherwise fail the PostgreSQL read as if the store were down)."""
    if not isinstance(value, str) or not value or len(value) > max_len or _unprintable(value) is not None:
        raise InvalidInput(field, f"{value!r} is not a valid {field}; give it exactly as floorgate printed it")
    return value


MAX_LIMIT = 10_000


def check_limit(value: object, field: str = "limit") -> int:
    """A count of records to list: 1..``MAX_LIMIT`` (the same answer on every backend)."""
    if type(value) is not int or not 1 <= value <= MAX_LIMIT:
        raise InvalidInput(field, f"{value!r} is not a count of records; give 1..{MAX_LIMIT}")
    return value


class Scope(Frozen):
    """Where a rule applies. Build with ``Scope.goal(g)``, ``Scope.agent(g, a)``, ``Scope.automation(g, a, x)``."""

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
