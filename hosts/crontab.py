"""The ``crontab`` host: a user crontab with a marked block managed by floorgate.

Each automation is one line in the block; the line runs ``floorgate turn run`` so every fire
passes admission (the guarantee is ``enforced``). An RRULE becomes a cron line only when cron, in
its own time zone, fires at exactly the schedule's instants over the horizon; otherwise the
schedule is refused with what cron lacks (every 90 minutes, every other week, DST-sensitive
local times...). Readback parses ``crontab -l``, never floorgate's store.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import ClassVar
from zoneinfo import ZoneInfo

from ._cron import parse_cron, render_cron
from .contract import (
    HORIZON,
    Applied,
    Capabilities,
    Expressed,
    Held,
    Observation,
    ObservationState,
    Reported,
    TimerKind,
    first_difference,
    iter_occurrences_until,
    refuse_report,
)
from .errors import HostUnavailable, UnsupportedSchedule
from .schedule import Schedule

BEGIN = "# BEGIN floorgate (managed by floorgate; edits inside this block are overwritten)"
END = "# END floorgate"
FOREIGN = " [the line does not run floorgate]"
CANNOT_RUN = " [the line cannot run: {program} is not an executable file]"
_NOT_RUNNABLE = re.compile(r" \[the line (does not run floorgate|cannot run: .*)\]$")
_LINE = re.compile(r"^(\S+\s+\S+\s+\S+\s+\S+\s+\S+)\s+(.*?)\s+# floorgate:(\S+)$")


def system_zone() -> ZoneInfo:
    """The zone cron runs in: $TZ, else /etc/timezone, else /etc/localtime's link, else UTC."""
    name = os.environ.get("TZ", "").lstrip(":")
    if not name:
        try:
            name = Path("/etc/timezone").read_text().strip()
        except OSError:
            link = os.path.realpath("/etc/localtime")
            name = link.split("zoneinfo/", 1)[1] if "zoneinfo/" in link else "UTC"
    try:
        return ZoneInfo(name)
    except Exception:
        return ZoneInfo("UTC")


def cron_daemon_running(proc: Path = Path("/proc")) -> bool:
    """Whether a cron daemon process (``cron`` or ``crond``) runs on this machine."""
    for comm in proc.glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() in ("cron", "crond"):
                return True
        except OSError:
            continue  # the process ended while we looked
    return False


def _program(command: str) -> str | None:
    """The program a crontab command starts (None: not a plain command floorgate would write)."""
    try:
        words = shlex.split(command.replace("\\%", "%"))  # cron removes the backslash before a %
    except ValueError:
        return None
    return words[0] if words and os.path.isabs(words[0]) else None


def not_runnable(observation: Observation) -> str | None:
    """Why the crontab line read back cannot launch floorgate's admitted turns (None: it can)."""
    found = _NOT_RUNNABLE.search(observation.text or "") if observation.state == ObservationState.PRESENT else None
    return found.group(0).strip(" []") if found else None


class CrontabHost:
    """A timer host over the real ``crontab`` command (optionally for another ``user``).

    ``command_for`` gives the shell command a line runs for an automation id; ``check_account``
    (if given) raises ``HostUnavailable`` when ``user`` could not run that command, so apply
    refuses before writing a line that would never start floorgate.
    """

    kind = TimerKind.CRONTAB
    CAPABILITIES: ClassVar[Capabilities] = Capabilities(
        can_apply=True,
        can_read_back=True,
        armed_by_runtime=False,
        launches_turns=True,
        floor_aware=False,
        expresses=frozenset(),
        summary="whole-minute schedules whose instants cron reproduces exactly in its own time zone, from now on",
    )

    def __init__(
        self,
        command_for: Callable[[str], str],
        *,
        user: str | None = None,
        zone: ZoneInfo | None = None,
        crontab: str = "crontab",
        check_account: Callable[[str | None], None] | None = None,
    ) -> None:
        self.command_for = command_for
        self.user = user
        self.zone = zone if zone is not None else system_zone()
        self.crontab = crontab
        self.check_account = check_account

    # -- the contract ----------------------------------------------------------------------------
    def capabilities(self) -> Capabilities:
        return self.CAPABILITIES

    def manual_removal(self, automation_id: str) -> str:
        """What to delete by hand when floorgate cannot remove the automation's line itself."""
        where = f"{self.user}'s crontab ('crontab -u {self.user} -e' as root)" if self.user else "the crontab ('crontab -e')"
        return f"delete the line ending '# floorgate:{automation_id}' from {where}"

    @classmethod
    def firing_problem(cls) -> str | None:
        if cron_daemon_running():
            return None
        return "no cron daemon is running on this machine, so no crontab line fires (start it, e.g. 'service cron start')"

    def express(self, schedule: Schedule, now: datetime) -> Expressed | Held:
        try:
            return Expressed(self._fields(schedule, now))
        except UnsupportedSchedule as exc:
            return Held(str(exc))

    def _fields(self, schedule: Schedule, now: datetime) -> str:
        fields = render_cron(schedule)
        spec = parse_cron(fields.split())
        end = now + HORIZON
        # Compared one fire at a time up to the first difference: listing both over the horizon
        # cost seconds for a per-minute line whose schedule starts years ahead.
        difference = first_difference(spec.iter_fires(self.zone, now, end), iter_occurrences_until(schedule, now, end))
        if difference is None:
            return fields
        cron, wanted = difference
        if cron is not None and schedule.last_at_or_before(now) is None:
            begins = wanted if wanted is not None else schedule.next_after(now)
            if begins is not None and cron < begins:
                raise UnsupportedSchedule(f"crontab: cron has no start date; this schedule begins at {begins.isoformat()}")
        at = (cron if cron is not None else wanted).isoformat()  # type: ignore[union-attr]
        zoned = (
            f" (the schedule is in {schedule.tzid}: write it in {self.zone.key}, cron's zone)"
            if schedule.tzid not in (None, self.zone.key)
            else ""
        )
        raise UnsupportedSchedule(
            f"crontab: cron in {self.zone.key} would not fire at exactly the schedule's instants (first difference near {at}){zoned}"
        )

    def apply(self, automation_id: str, schedule: Schedule, now: datetime) -> Applied:
        form = self.express(schedule, now)
        if isinstance(form, Held):
            raise UnsupportedSchedule(form.reason)
        if self.check_account is not None:
            self.check_account(self.user)
        line = f"{form.text} {self.command_for(automation_id)} # floorgate:{automation_id}"
        current = self._read_lines()
        managed = self._managed(current)
        if managed.get(automation_id) != line:  # unchanged: no write, no duplicate
            managed[automation_id] = line
            self._write(current, managed)
        return Applied(armed=True, host_form=form.text, host_user=self.user)

    def remove(self, automation_id: str) -> None:
        current = self._read_lines()
        managed = self._managed(current)
        if managed.pop(automation_id, None) is not None:
            self._write(current, managed)

    def read(self, automation_id: str, now: datetime, reported: Reported | None = None) -> Observation:
        refuse_report(self.kind, reported)
        try:
            lines = self._read_lines()
        except HostUnavailable as exc:
            return Observation(state=ObservationState.UNAVAILABLE, text=None, read_at=now, detail=str(exc))
        line = self._managed(lines).get(automation_id)
        if line is None:
            return Observation(state=ObservationState.ABSENT, text=None, read_at=now, detail="no floorgate line for it in the crontab")
        match = _LINE.match(line)
        fields = match.group(1) if match else line
        program = _program(match.group(2)) if match else None
        if program is not None and not (os.path.isfile(program) and os.access(program, os.X_OK)):
            mark = CANNOT_RUN.format(program=program)  # e.g. the interpreter it names was removed
        else:
            mark = "" if match and match.group(2) == self.command_for(automation_id) else FOREIGN
        return Observation(state=ObservationState.PRESENT, text=f"CRON {fields} ({self.zone.key}){mark}", read_at=now)

    def matches(self, observation: Observation, schedule: Schedule, now: datetime) -> bool:
        if observation.state != ObservationState.PRESENT or not observation.text or not observation.text.startswith("CRON "):
            return False
        if not_runnable(observation) is not None:
            return False  # fires would skip admission, or fail: not the schedule floorgate armed
        fields = observation.text[5:].rsplit(" (", 1)[0].split()
        try:
            spec = parse_cron(fields)
            end = now + HORIZON
            return first_difference(spec.iter_fires(self.zone, now, end), iter_occurrences_until(schedule, now, end)) is None
        except (ValueError, UnsupportedSchedule):
            return False

    # -- crontab plumbing ------------------------------------------------------------------------
    def _cmd(self, *args: str) -> list[str]:
        return [self.crontab, *(["-u", self.user] if self.user else []), *args]

    def _read_lines(self) -> list[str]:
        try:
            result = subprocess.run(self._cmd("-l"), capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HostUnavailable(f"crontab: cannot run {self.crontab!r}: {exc}") from None
        if result.returncode != 0:
            if "no crontab for" in result.stderr:
                return []
            raise HostUnavailable(
                f"crontab -l failed: {result.stderr.strip().splitlines()[0] if result.stderr.strip() else result.returncode}"
            )
        return result.stdout.splitlines()

    def _managed(self, lines: list[str]) -> dict[str, str]:
        out: dict[str, str] = {}
        inside = False
        for line in lines:
            if line == BEGIN:
                inside = True
            elif line == END:
                inside = False
            elif inside:
                match = _LINE.match(line)
                if match:
                    out[match.group(3)] = line
        return out

    def _write(self, current: list[str], managed: dict[str, str]) -> None:
        outside, inside = [], False
        for line in current:
            if line == BEGIN:
                inside = True
            elif line == END:
                inside = False
            elif not inside:
                outside.append(line)
        block = [BEGIN, *[managed[k] for k in sorted(managed)], END] if managed else []
        kept = [*outside, *block]
        text = "\n".join(kept) + "\n" if kept else ""  # nothing left: an empty crontab, not a blank line
        try:
            result = subprocess.run(self._cmd("-"), input=text, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise HostUnavailable(f"crontab: cannot run {self.crontab!r}: {exc}") from None
        if result.returncode != 0:
            raise HostUnavailable(f"crontab - failed: {result.stderr.strip() or result.returncode}")
