"""Host adapters and schedules: RFC 5545 recurrence, desired versus observed timers.

May import ``admission``; nothing else of ours. The timer-host contract is in ``hosts.contract``,
the kind -> adapter registry in ``hosts.registry``.
"""

from .contract import Guarantee, TimerKind
from .errors import HostError, HostUnavailable, InvalidSchedule, UnsupportedSchedule
from .schedule import Schedule

__all__ = ["Guarantee", "HostError", "HostUnavailable", "InvalidSchedule", "Schedule", "TimerKind", "UnsupportedSchedule"]
