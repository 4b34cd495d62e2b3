"""How long ago this process started, so that a hook's deadline counts from its start: under load,
Python's start-up and floorgate's imports took seconds before the hook could arm its timer (a
"27 s" block took 38 s of the app's wall time)."""

from __future__ import annotations

import os
import time
from datetime import timedelta

_own = False  # whether this process was started to run floorgate (``mark_own``)

# The fallback when /proc cannot say: the first moment floorgate's code runs (this module is
# imported first by the scheduler package), which still misses the interpreter's own start-up.
_IMPORTED = time.monotonic()


def process_age(stat: str | None = None, since_boot: float | None = None, ticks_per_second: int | None = None) -> timedelta:
    """This process's age: now (CLOCK_BOOTTIME) less its start time (field 22 of /proc/self/stat,
    clock ticks since boot). The start time is fixed, so this is right whenever it is read. The
    arguments replace what is read from the system (tests)."""
    try:
        if stat is None:
            with open("/proc/self/stat", encoding="ascii", errors="replace") as f:
                stat = f.read()
        if since_boot is None:
            since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
        if ticks_per_second is None:
            ticks_per_second = os.sysconf("SC_CLK_TCK")
        # Field 2 is the command in parentheses, which may itself hold spaces and parentheses.
        fields = stat[stat.rindex(")") + 2 :].split()
        started = int(fields[22 - 3]) / ticks_per_second
    except (OSError, ValueError, IndexError, AttributeError):
        return timedelta(seconds=time.monotonic() - _IMPORTED)
    return timedelta(seconds=max(0.0, since_boot - started))


def mark_own() -> None:
    """Record that this process was started to run floorgate's CLI (its entry point calls this)."""
    global _own
    _own = True


def hook_age() -> timedelta:
    """What an agent app's clock for this hook has run before the hook could arm its deadline:
    the process's age when the process is floorgate's own; nothing when a command runs inside
    another program (a test runner, a library user), whose age is not the hook's."""
    return process_age() if _own else timedelta(0)
