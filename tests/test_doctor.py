"""``floorgate doctor`` on both backends: one line per check with ok / warn / fail and the fix,
against a store with a lost host, a stopped cron daemon (the /proc it reads has none) and an
untrusted Codex hook; then each put right. Exit 1 when a check fails, 0 otherwise; --json."""

from __future__ import annotations

import json
import os
import threading
from datetime import timedelta
from pathlib import Path

from floorgate.admission import AutomationSpec, Automations, FixedClock, Store
from floorgate.admission.clock import SystemClock, read_clock
from floorgate.scheduler.app.doctor import Doctor, Status
from floorgate.scheduler.app.root import Floorgate, Settings
from floorgate.scheduler.cli.commands.hook import ServedHooks
from floorgate.scheduler.runtime._heartbeat import Heartbeat
from floorgate.scheduler.runtime.hook_server import HookServer
from floorgate.scheduler.runtime.hook_wire import RUNTIME_DIR_ENV

from cli import run_cli
from helpers import add_automation, command


def _world(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    project, codex_home = tmp_path / "agent", tmp_path / "home" / ".codex"
    (project / ".codex").mkdir(parents=True)
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text('model = "gpt-5"\n')
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(codex_home), "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    env[RUNTIME_DIR_ENV] = str(tmp_path / "rt")  # this world's own hook server directory (none runs there yet)
    return project, env


def _by_name(checks: list) -> dict[str, object]:  # type: ignore[type-arg]
    return {c.name: c for c in checks}


def test_doctor_finds_a_lost_host_a_stopped_cron_daemon_and_an_untrusted_codex_hook(store: Store, db_url: str, tmp_path: Path) -> None:
    project, env = _world(tmp_path)
    clock = FixedClock(read_clock(SystemClock()))  # the store's clock is this machine's: the clock check holds
    add_automation(store, clock, "nightly")  # needs a 'floorgate run' host
    Automations(store, clock).add(
        "cronned", AutomationSpec(goal_id="g", agent_id="b", schedule="RRULE:FREQ=DAILY", host=command("pass"), timer="crontab")
    )
    lane = ("--goal", "g", "--agent", "c", "--automation", "app", "--wake", "automatic")
    added = run_cli(
        "automation",
        "add",
        "app",
        "--goal",
        "g",
        "--agent",
        "c",
        "--schedule",
        "every 1h",
        "--timer",
        "external",
        db=db_url,
        cwd=tmp_path,
        env=env,
    )
    assert added.returncode == 0, added.stderr
    installed = run_cli("hook", "install", "codex", "--project", str(project), *lane, db=db_url, cwd=tmp_path, env=env)
    assert installed.returncode == 0, installed.stderr
    poll = timedelta(seconds=1)
    h1, h2 = Heartbeat(store, clock, "h1:1", poll), Heartbeat(store, clock, "h2:2", poll)
    h1.beat()
    h2.beat()
    clock.advance(timedelta(minutes=3))
    h1.beat()  # h2 was killed three minutes ago
    state = tmp_path / "state"
    (state / "logs").mkdir(parents=True)
    os.chmod(state / "logs", 0o755)
    fg = Floorgate(store, clock=clock, settings=Settings(state_dir=state))
    no_cron = tmp_path / "proc"
    no_cron.mkdir()

    checks = _by_name(Doctor(fg, proc=no_cron, env=env).run())
    assert checks["store"].status is Status.OK and checks["schema"].status is Status.OK  # type: ignore[attr-defined]
    hosts = checks["hosts"]
    assert hosts.status is Status.WARN and f"host {h2.host_id} lost 3 min ago" in hosts.detail, hosts  # type: ignore[attr-defined]
    assert checks["cron"].status is Status.FAIL and "systemctl enable --now cron" in checks["cron"].fix  # type: ignore[attr-defined]
    hook = checks["hook app"]
    assert hook.status is Status.FAIL and "Codex hook" in hook.detail and "trust" in hook.detail, hook  # type: ignore[attr-defined]
    served = checks["hook server"]  # no 'floorgate hook serve' in this world's runtime directory
    assert served.status is Status.WARN and "in-process" in served.detail and "--hooks" in served.fix, served  # type: ignore[attr-defined]
    assert checks["turn logs"].status is Status.FAIL and "0755" in checks["turn logs"].detail  # type: ignore[attr-defined]
    clock_check = checks["clock"]  # this host's clock now runs 3 min ahead of the store's
    assert clock_check.status is Status.FAIL and "s ahead of the store's" in clock_check.detail, clock_check  # type: ignore[attr-defined]
    if "://" in db_url:
        assert checks["lock_timeout"].status is Status.OK and "5s" in checks["lock_timeout"].detail  # type: ignore[attr-defined]
    else:
        assert "lock_timeout" not in checks

    # Put each right: a cron daemon in the /proc it reads, the hook trusted, the log directory private.
    (no_cron / "4242").mkdir()
    (no_cron / "4242" / "comm").write_text("cron\n")
    trusted = run_cli("hook", "install", "codex", "--project", str(project), *lane, "--trust", db=db_url, cwd=tmp_path, env=env)
    assert trusted.returncode == 0, trusted.stderr
    os.chmod(state / "logs", 0o700)
    server = HookServer(Path(env[RUNTIME_DIR_ENV]), ServedHooks())
    server.bind()
    serving = threading.Thread(target=server.serve, daemon=True)
    serving.start()
    try:
        checks = _by_name(Doctor(fg, proc=no_cron, env=env).run())
    finally:
        server.stop()
        serving.join(10)
    for name in ("cron", "hook app", "turn logs", "hook server"):
        assert checks[name].status is Status.OK, checks[name]  # type: ignore[attr-defined]


def test_doctor_on_the_command_line_one_line_per_check_exit_codes_and_json(store: Store, db_url: str, tmp_path: Path) -> None:
    text = run_cli("doctor", "--state-dir", str(tmp_path / "state"), db=db_url, cwd=tmp_path)
    assert text.returncode == 0, text.stdout + text.stderr  # nothing configured: nothing can fail
    lines = text.stdout.strip().splitlines()
    assert lines[0].startswith("ok   store: ") and lines[-1] == "all checks ok"
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in lines[:-1])

    add_automation(store, FixedClock(read_clock(SystemClock())), "nightly")  # no host runs it
    failed = run_cli("doctor", "--json", "--state-dir", str(tmp_path / "state"), db=db_url, cwd=tmp_path)
    assert failed.returncode == 1
    doc = json.loads(failed.stdout)
    [hosts] = [c for c in doc["checks"] if c["check"] == "hosts"]
    assert doc["status"] == "fail" and hosts["status"] == "fail" and "floorgate service install" in hosts["fix"]


def test_doctor_with_no_store_says_so_in_one_failing_check(tmp_path: Path) -> None:
    r = run_cli("doctor", db=str(tmp_path / "missing.db"), cwd=tmp_path)
    assert r.returncode == 1 and r.stdout.startswith("fail store: unreachable: no floorgate store") and "Traceback" not in r.stderr
    assert not (tmp_path / "missing.db").exists()


def test_doctor_reports_each_webhooks_last_delivery(store: Store, tmp_path: Path) -> None:
    from floorgate.admission import Approvals
    from floorgate.admission.events import DeliveryFailure
    from floorgate.scheduler.app.notify import NotifyService
    from floorgate.scheduler.runtime._webhook_http import Outcome

    clock = FixedClock(read_clock(SystemClock()))

    def post(url: str, body: bytes, headers: dict[str, str]) -> Outcome:
        return Outcome(503, DeliveryFailure.HTTP_STATUS) if "broken" in url else Outcome(204)

    notify = NotifyService(store, clock, post=post)
    fine = notify.add_webhook("http://127.0.0.1:9/fine", "ask_pending")[0].webhook_id
    broken = notify.add_webhook("http://127.0.0.1:9/broken", "ask_pending")[0].webhook_id
    fg = Floorgate(store, clock=clock, settings=Settings(state_dir=tmp_path / "state"))
    checks = _by_name(Doctor(fg, proc=tmp_path).run())
    assert checks[f"webhook {fine}"].status is Status.OK and "no delivery attempted yet" in checks[f"webhook {fine}"].detail  # type: ignore[attr-defined]
    Approvals(store, clock).ask("m-1", "g/a/x", "max_turns", 2)  # an ask_pending event
    notify.deliver()
    checks = _by_name(Doctor(fg, proc=tmp_path).run())
    ok, failing = checks[f"webhook {fine}"], checks[f"webhook {broken}"]
    assert ok.status is Status.OK and "(status 204)" in ok.detail, ok  # type: ignore[attr-defined]
    assert failing.status is Status.WARN and "1 deliveries failing" in failing.detail and "(status 503)" in failing.detail, failing  # type: ignore[attr-defined]
    assert f"floorgate notify retry {broken}" in failing.fix  # type: ignore[attr-defined]
