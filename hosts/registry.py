"""The registry of timer hosts: every ``TimerKind`` maps to the adapter that implements it.

Callers look a kind up here and branch on the adapter's declared ``Capabilities``, never on the
kind's name. A new kind without an adapter fails the registry's test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any
from zoneinfo import ZoneInfo

from .apscheduler_timer import ApschedulerTimer
from .contract import Capabilities, TimerHost, TimerKind
from .crontab import CrontabHost
from .errors import HostError
from .external import ExternalTimer


class UnknownTimerKind(HostError, ValueError):
    """A timer kind no adapter implements (a stored value from elsewhere, or a typo)."""


@dataclass(frozen=True)
class HostSetup:
    """What the composition root hands the adapters; each takes the parts it needs.

    - ``command_for``: automation id -> the shell command a crontab line runs;
    - ``user``, ``zone``, ``check_account``: whose crontab, in which zone (default: the system's),
      and a check that the account can run the command;
    - ``scheduler``, ``job``: the live APScheduler scheduler of a ``floorgate run`` and what a fire runs.
    """

    command_for: Callable[[str], str] | None = None
    user: str | None = None
    zone: ZoneInfo | None = None
    check_account: Callable[[str | None], None] | None = None
    scheduler: Any = None
    job: Callable[[str], object] | None = None


def _crontab(setup: HostSetup) -> CrontabHost:
    if setup.command_for is None:
        raise HostError("crontab: the host setup has no command for the lines (HostSetup.command_for)")
    return CrontabHost(setup.command_for, user=setup.user, zone=setup.zone, check_account=setup.check_account)


@dataclass(frozen=True)
class Registered:
    adapter: type
    build: Callable[[HostSetup], TimerHost]


TIMER_HOSTS: Mapping[TimerKind, Registered] = MappingProxyType(
    {
        TimerKind.APSCHEDULER: Registered(ApschedulerTimer, lambda s: ApschedulerTimer(s.scheduler, s.job)),
        TimerKind.CRONTAB: Registered(CrontabHost, _crontab),
        TimerKind.EXTERNAL: Registered(ExternalTimer, lambda s: ExternalTimer()),
    }
)


def timer_kind(value: str) -> TimerKind:
    """The kind named by ``value``; ``UnknownTimerKind`` naming the choices otherwise."""
    try:
        kind = TimerKind(value)
    except ValueError:
        raise UnknownTimerKind(f"timer: unknown kind {value!r}; one of {', '.join(k.value for k in TimerKind)}") from None
    if kind not in TIMER_HOSTS:
        raise UnknownTimerKind(f"timer: no adapter is registered for {kind.value!r}")
    return kind


def capabilities(kind: str) -> Capabilities:
    """The declared capabilities of a kind's adapter (no host is contacted)."""
    caps = _CAPABILITIES.get(kind)
    if caps is None:  # an unknown kind raises, and is never kept
        caps = _CAPABILITIES[kind] = TIMER_HOSTS[timer_kind(kind)].adapter.CAPABILITIES  # type: ignore[attr-defined]
    return caps


# By kind (a TimerKind equals and hashes as its text): status asks it several times per automation.
_CAPABILITIES: dict[str, Capabilities] = {}


def firing_problem(kind: str) -> str | None:
    """Why a kind's timers would not fire on this machine now (None: nothing known against them)."""
    problem: str | None = TIMER_HOSTS[timer_kind(kind)].adapter.firing_problem()  # type: ignore[attr-defined]
    return problem


def timer_host(kind: str, setup: HostSetup) -> TimerHost:
    """The adapter for ``kind``, built from ``setup``."""
    return TIMER_HOSTS[timer_kind(kind)].build(setup)
