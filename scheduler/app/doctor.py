"""``floorgate doctor``: a deployment checked end to end, one line per check with ok / warn / fail
and, unless ok, the fix.

Checks, in order: the store (reachable; its schema current), timer hosts (one alive when an
automation needs ``floorgate run``; each lost one named with when it was last seen), the cron
daemon (when an automation has a crontab timer), each recorded hook install (still in place and,
for Codex, trusted so that Codex runs it; whether a hook server answers them), PostgreSQL's ``lock_timeout`` (so a stalled lock holder
is a prompt denial, not a hung launch), this machine's clock against the store's, the turn-log
directory (writable, owner-only) and each webhook's last delivery. Everything read, nothing written.
What the machine is asked (``/proc`` for the cron daemon, the environment for the agent apps'
homes) is injected, so a test simulates a stopped daemon without stopping the machine's.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from floorgate.admission import FloorgateError, TimerKind
from floorgate.admission.clock import read_clock
from floorgate.admission.health import store_health
from floorgate.admission.liveness import HookInstalls
from floorgate.hosts.crontab import cron_daemon_running
from floorgate.scheduler.agents.hook_clients import hook_problem
from floorgate.scheduler.views.present import ago

if TYPE_CHECKING:
    from floorgate.scheduler.app.root import Floorgate

CLOCK_WARN_SECONDS = 2.0  # a skew past this makes start times and floors drift between hosts
CLOCK_FAIL_SECONDS = 30.0


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """One check's outcome: what it looked at, ok/warn/fail, what it found, and the fix (unless ok)."""

    name: str
    status: Status
    detail: str
    fix: str | None = None

    def doc(self) -> dict[str, Any]:
        return {"check": self.name, "status": self.status.value, "detail": self.detail, "fix": self.fix}

    def text(self) -> str:
        fix = f"; fix: {self.fix}" if self.fix and self.status is not Status.OK else ""
        return f"{self.status.value:<4} {self.name}: {self.detail}{fix}"


def worst(checks: list[Check]) -> Status:
    """The worst status among ``checks`` (ok when there are none)."""
    order = [Status.OK, Status.WARN, Status.FAIL]
    return max((c.status for c in checks), key=order.index, default=Status.OK)


def store_unreachable(error: BaseException) -> Check:
    """The one check there is when the store cannot be opened."""
    return Check(
        "store",
        Status.FAIL,
        f"unreachable: {error}",
        "check --db / $FLOORGATE_DB (and that the database server runs); 'floorgate init' makes a new SQLite store",
    )


class Doctor:
    """Every check, against one open store (``Floorgate``) and this machine."""

    def __init__(self, fg: Floorgate, *, proc: Path = Path("/proc"), env: Mapping[str, str] | None = None) -> None:
        self.fg = fg
        self.proc = proc
        self.env = os.environ if env is None else env

    def run(self) -> list[Check]:
        checks = self._store()
        if checks[0].status is Status.FAIL:
            return checks
        automations, broken = self.fg.automations.repo.scan()
        timers = {a.spec.timer for a in automations.values()}
        for step in (
            lambda: self._hosts(TimerKind.APSCHEDULER in timers),
            lambda: self._cron(TimerKind.CRONTAB in timers),
            lambda: self._hooks(sorted(automations)),
            lambda: self._webhooks(),
            lambda: self._turn_logs(),
        ):
            try:
                checks += step()
            except FloorgateError as exc:  # a check that cannot read says so; the others still run
                checks.append(Check("store", Status.FAIL, f"a read failed: {exc}", "see 'floorgate status' for what is unreadable"))
        if broken:
            checks.append(
                Check(
                    "automations", Status.FAIL, f"{len(broken)} unreadable: {', '.join(sorted(broken))}", "see 'floorgate automation list'"
                )
            )
        return checks

    def _store(self) -> list[Check]:
        try:
            health = store_health(self.fg.store)
        except FloorgateError as exc:
            return [store_unreachable(exc)]
        url = self.fg.store.safe_url
        out = [Check("store", Status.OK, f"{url} reachable")]
        if health.current:
            out.append(Check("schema", Status.OK, f"revision {health.revision} (current)"))
        else:
            out.append(
                Check(
                    "schema",
                    Status.FAIL,
                    f"revision {health.revision}, this floorgate's is {health.head}",
                    "run 'floorgate init' to migrate it",
                )
            )
        if self.fg.store.dialect == "postgresql":
            off = health.lock_timeout in (None, "0")
            out.append(
                Check(
                    "lock_timeout",
                    Status.FAIL if off else Status.OK,
                    f"lock_timeout {'is off' if off else f'{health.lock_timeout} in force'}",
                    "floorgate sets it per session; a pooler in transaction mode drops it: connect directly or in session mode",
                )
            )
        skew = (read_clock(self.fg.clock) - health.server_now).total_seconds()
        status = Status.FAIL if abs(skew) > CLOCK_FAIL_SECONDS else Status.WARN if abs(skew) > CLOCK_WARN_SECONDS else Status.OK
        out.append(
            Check(
                "clock",
                status,
                f"this host's clock is {abs(skew):.1f} s {'ahead of' if skew >= 0 else 'behind'} the store's",
                "sync both clocks with NTP (timedatectl set-ntp true); floors are measured on them",
            )
        )
        return out

    def _hosts(self, needed: bool) -> list[Check]:
        now = read_clock(self.fg.clock)
        hosts = self.fg.readback.hosts()
        alive = [h for h in hosts if h.alive(now)]
        lost = [h for h in hosts if h.stopped_at is None and not h.alive(now)]
        lost_text = "; ".join(f"host {h.host_id} lost {ago(h.beat_at, now)}" for h in lost)
        fix = "start 'floorgate run' and keep it running ('floorgate service install' writes a systemd unit for it)"
        if alive:
            detail = ", ".join(f"{h.host_id} alive (beat {ago(h.beat_at, now)})" for h in alive)
            return [Check("hosts", Status.WARN if lost else Status.OK, detail + (f"; {lost_text}" if lost else ""), fix)]
        if not needed:
            return [Check("hosts", Status.WARN if lost else Status.OK, lost_text or "no apscheduler automation needs 'floorgate run'", fix)]
        return [Check("hosts", Status.FAIL, "no 'floorgate run' host is alive" + (f"; {lost_text}" if lost else ""), fix)]

    def _cron(self, needed: bool) -> list[Check]:
        if not needed:
            return [Check("cron", Status.OK, "no crontab automation")]
        if cron_daemon_running(self.proc):
            return [Check("cron", Status.OK, "a cron daemon is running")]
        return [
            Check(
                "cron",
                Status.FAIL,
                "no cron daemon is running: no crontab line fires",
                "start it (e.g. 'systemctl enable --now cron', or 'service cron start')",
            )
        ]

    def _hooks(self, automation_ids: list[str]) -> list[Check]:
        installs = HookInstalls(self.fg.store)
        out = []
        for aid in automation_ids:
            install = installs.get(aid)
            if install is None:
                continue
            problem = hook_problem(self.fg.store, aid, self.env)
            name = f"hook {aid}"
            if problem is None:
                out.append(Check(name, Status.OK, f"{install.client} hook in {install.settings_file} will run"))
            else:
                out.append(Check(name, Status.FAIL, problem, f"'floorgate hook install {aid} --client {install.client}' shows the steps"))
        if out:
            out.append(self._hook_server())
        return out

    def _hook_server(self) -> Check:
        from floorgate.scheduler.runtime import hook_wire

        why = hook_wire.probe(self.env)
        if why is None:
            return Check("hook server", Status.OK, "this user's prompt and tool hooks are served")
        return Check(
            "hook server",
            Status.WARN,
            f"hooks answer in-process, paying floorgate's start-up on every prompt and tool call: {why}",
            "'floorgate hook serve' (kept running by 'floorgate service install --user --hooks')",
        )

    def _webhooks(self) -> list[Check]:
        now = read_clock(self.fg.clock)
        out = []
        for w in self.fg.notify.webhooks():
            name = f"webhook {w.webhook_id}"
            last = f"last attempt {ago(w.last_attempt_at, now)}" if w.last_attempt_at is not None else "no delivery attempted yet"
            result = f" (status {w.last_status})" if w.last_status is not None else f" ({w.last_error})" if w.last_error else ""
            fix = f"fix the receiver at {w.url}, then 'floorgate notify retry {w.webhook_id}'"
            if w.dead:
                out.append(Check(name, Status.FAIL, f"{w.dead} deliveries given up; {last}{result}", fix))
            elif w.failing:
                out.append(Check(name, Status.WARN, f"{w.failing} deliveries failing; {last}{result}", fix))
            else:
                out.append(Check(name, Status.OK, f"{last}{result}"))
        return out

    def _turn_logs(self) -> list[Check]:
        where = (self.fg.settings.state_dir / "logs").absolute()
        try:
            st = os.lstat(where)
        except FileNotFoundError:
            return [Check("turn logs", Status.OK, f"{where} not made yet (the first managed turn makes it, 0700)")]
        except OSError as exc:
            return [
                Check("turn logs", Status.FAIL, f"{where} cannot be read: {exc.strerror}", "fix its permissions, or choose --state-dir")
            ]
        fix = f"chmod 700 {where} (and chown it to this user), or choose another --state-dir"
        if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
            return [Check("turn logs", Status.FAIL, f"{where} is not a directory (a link or a file)", f"remove it; {fix}")]
        problems = []
        if st.st_uid != os.geteuid():
            problems.append(f"owned by uid {st.st_uid}")
        if stat.S_IMODE(st.st_mode) & 0o077:
            problems.append(f"mode {stat.S_IMODE(st.st_mode):04o} lets others in")
        if not os.access(where, os.W_OK | os.X_OK):
            problems.append("not writable")
        if problems:
            return [Check("turn logs", Status.FAIL, f"{where}: {', '.join(problems)}", fix)]
        return [Check("turn logs", Status.OK, f"{where} writable, owner-only")]
