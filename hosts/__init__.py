"""Host adapters and schedules: RFC 5545 recurrence, desired versus observed timers.

May import ``admission``; nothing else of ours.
"""

from .errors import HostError, HostUnavailable, InvalidSchedule, UnsupportedSchedule
from .schedule import Schedule

__all__ = ["HostError", "HostUnavailable", "InvalidSchedule", "Schedule", "UnsupportedSchedule"]
