"""Readbacks that agree, through the CLI with a crontab stand-in (the caller's crontab is a file):
``automation diff`` reads the live crontab as ``status`` does; an ACK a later, different
readback superseded is shown as superseded; ``automation remove`` always removes, and says what
to delete by hand when no ``crontab`` command can confirm it; a never-armed automation is never
``enforced``."""

from __future__ import annotations

import json
import sys
from datetime import timezone
from pathlib import Path

import pytest
from test_readme import FAKE_CRONTAB

from floorgate.admission import open_store
from floorgate.admission.events import EventKind, Events

from test_cli import cli

EVERY_15 = "DTSTART:20261101T000500Z RRULE:FREQ=MINUTELY;INTERVAL=15"


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A shell whose ``crontab`` is the stand-in (crontab in ``tmp_path/crontab.txt``)."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    (fake_bin / "crontab").write_text(FAKE_CRONTAB)
    (fake_bin / "crontab").chmod(0o755)
    return {
        "PATH": f"{fake_bin}:{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TZ": "UTC",
        "FAKE_CRONTAB": str(tmp_path / "crontab.txt"),
    }


def _no_crontab(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The same shell on a machine without the cron package: no ``crontab`` command at all."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return {**env, "PATH": f"{empty}:{Path(sys.executable).parent}"}


def _add(db: str, env: dict[str, str], name: str = "q"):  # type: ignore[no-untyped-def]
    return cli(
        "automation", "add", name, "--goal", "g", "--agent", "a", "--schedule", EVERY_15, "--timer", "crontab",
        "--", sys.executable, "-c", "pass", db=db, env=env,
    )  # fmt: skip


def _hand_edit(env: dict[str, str]) -> None:
    crontab = Path(env["FAKE_CRONTAB"])
    text = crontab.read_text()
    assert "5-59/15 * * * *" in text
    crontab.write_text(text.replace("5-59/15 * * * *", "*/5 * * * *"))


def test_diff_reads_the_live_crontab_as_status_does(sqlite_db: str, env) -> None:  # type: ignore[no-untyped-def]
    assert _add(sqlite_db, env).returncode == 0
    assert json.loads(cli("automation", "diff", "q", "--json", db=sqlite_db, env=env).stdout)["match"] is True
    _hand_edit(env)
    status = json.loads(cli("status", "--json", db=sqlite_db, env=env).stdout)["automations"][0]
    assert status["drift"] is not None and "*/5" in status["drift"]  # status reads the host live
    diff = cli("automation", "diff", "q", "--json", db=sqlite_db, env=env)
    doc = json.loads(diff.stdout)
    assert diff.returncode == 3 and doc["match"] is False and doc["read_live"] is True and "*/5" in doc["observed"]
    text = cli("automation", "diff", "q", db=sqlite_db, env=env).stdout
    assert "desired and observed DIFFER" in text and "(read now from the host)" in text


def test_an_ack_a_drifting_readback_superseded_is_not_shown_as_acked(sqlite_db: str, env) -> None:  # type: ignore[no-untyped-def]
    assert _add(sqlite_db, env).returncode == 0
    assert json.loads(cli("automation", "desired", "q", "--json", db=sqlite_db, env=env).stdout)["ack_state"] == "acked"
    _hand_edit(env)
    assert cli("automation", "observed", "q", db=sqlite_db, env=env).returncode == 0  # records the drifting readback
    desired = cli("automation", "desired", "q", "--json", db=sqlite_db, env=env)
    assert json.loads(desired.stdout)["ack_state"] == "superseded"
    assert "ack:       superseded: the ACK of" in cli("automation", "desired", "q", db=sqlite_db, env=env).stdout
    status = json.loads(cli("status", "--json", db=sqlite_db, env=env).stdout)["automations"][0]
    assert status["timer"]["ack_state"] == "superseded"


def test_remove_without_a_crontab_command_removes_and_says_what_to_delete(sqlite_db: str, env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert _add(sqlite_db, env).returncode == 0
    removed = cli("automation", "remove", "q", db=sqlite_db, env=_no_crontab(env, tmp_path))
    assert removed.returncode == 0, removed.stderr
    assert "ORPHANED TIMER: delete the line ending '# floorgate:q' from the crontab" in removed.stdout
    assert cli("automation", "show", "q", db=sqlite_db, env=env).returncode == 2  # it is gone
    store = open_store(sqlite_db)
    try:
        orphans = Events(store).list(EventKind.TIMER_ORPHANED)
    finally:
        store.close()
    assert [e.subject for e in orphans] == ["q"] and "# floorgate:q" in orphans[0].data["delete_by_hand"]
    assert "# floorgate:q" in Path(env["FAKE_CRONTAB"]).read_text()  # the line is really still there to delete


def test_a_never_armed_automation_is_never_enforced_and_removes_cleanly(sqlite_db: str, env, tmp_path) -> None:  # type: ignore[no-untyped-def]
    bare = _no_crontab(env, tmp_path)
    added = _add(sqlite_db, bare)
    assert added.returncode == 0 and "NOT ARMED" in added.stdout
    status = json.loads(cli("status", "--json", db=sqlite_db, env=bare).stdout)["automations"][0]
    assert status["timer"]["guarantee"] == "not armed" and "nothing was ever armed" in status["timer"]["guarantee_why"]
    assert _add(sqlite_db, bare, "q2").returncode == 0
    removed = cli("automation", "remove", "q", db=sqlite_db, env=bare)
    assert removed.returncode == 0 and "ORPHANED" not in removed.stdout  # nothing was armed: nothing to delete
    from console_kit import console, sign_in

    store = open_store(sqlite_db)  # the automation's page says it too (signing in makes this store owner-gated)
    try:
        c = console(store)
        sign_in(c)
        page = c.client.get("/automations/q2").text
    finally:
        store.close()
    assert "<tr><th>guarantee</th><td>not armed</td>" in page and "<td>enforced</td>" not in page


# -- the settings view: one eligibility readback on every surface -------------------------------


@pytest.mark.parametrize("target", ["g/a/x", "g/a"], ids=["automation", "agent"])
def test_the_settings_view_shows_state_and_next_eligible_time_the_same_on_every_surface(store, wall_clock, tmp_path, target: str) -> None:  # type: ignore[no-untyped-def]
    import re
    from datetime import datetime, timedelta

    from floorgate.scheduler.app.root import Floorgate, Settings

    from console_kit import console, sign_in
    from helpers import add_automation, floor

    floor(store, wall_clock, "g/a", timedelta(days=1))
    add_automation(store, wall_clock, "x", script="pass")
    fg = Floorgate(store, clock=wall_clock, settings=Settings(state_dir=tmp_path / "state"))
    assert fg.executor().run(fg.automations.get("x"), manual_reason="parity").verdict.status == "succeeded"
    wall_clock.set(max(wall_clock.now(), datetime.now(timezone.utc)))  # the CLI below reads the system clock

    shown = json.loads(cli("policy", "show", target, "--json", db=store.url).stdout)["eligibility"]
    assert shown["status"] == "interval_wait" and shown["next_eligible_at"] is not None
    text = cli("policy", "show", target, db=store.url).stdout
    assert f"state: interval_wait, next eligible at {shown['next_eligible_at']}" in text
    c = console(store, wall_clock)
    assert c.get(f"/api/policy?scope={target}").json()["inherited"][0]["eligibility"] == shown
    sign_in(c)
    page = c.client.get(f"/settings?target={target}").text
    row = re.search(rf'<tr data-scope="{re.escape(target)}">(.*?)</tr>', page, re.S)
    assert row is not None
    assert f">{shown['status']}</td>" in row.group(1)
    assert f'<td class="next_eligible_at"><time datetime="{shown["next_eligible_at"]}">' in row.group(1)
    metrics = c.get("/metrics?lanes=all").text  # per-lane series are opt-in
    stamp = re.search(r'floorgate_next_eligible_timestamp_seconds\{[^}]*automation="x"[^}]*\} (\S+)', metrics)
    assert stamp is not None
    assert datetime.fromisoformat(shown["next_eligible_at"].replace("Z", "+00:00")).timestamp() == float(stamp.group(1))
    assert re.search(r'floorgate_eligibility\{[^}]*automation="x"[^}]*status="interval_wait"[^}]*\} 1\.0', metrics)


# -- limits: one readback of used, held, left and when each frees, on every surface -------------


def test_a_spent_limit_reads_the_same_on_every_surface(store, wall_clock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import re
    from datetime import datetime, timedelta

    from floorgate.admission import Policies, Scope
    from floorgate.admission.limits import LimitsChange
    from floorgate.admission.windows import parse_window
    from floorgate.scheduler.app.root import Floorgate, Settings

    from console_kit import console, sign_in
    from helpers import add_automation, floor

    floor(store, wall_clock, "g/a", timedelta(seconds=1))  # today's admission records starts only under a floor
    Policies(store, wall_clock).configure(
        Scope.parse("g/a"), expected_revision=1, owner_ref="o", limits=LimitsChange(max_starts=1, per=parse_window("1d"))
    )
    add_automation(store, wall_clock, "x", script="pass")
    fg = Floorgate(store, clock=wall_clock, settings=Settings(state_dir=tmp_path / "state"))
    assert fg.executor().run(fg.automations.get("x"), manual_reason="parity").verdict.status == "succeeded"
    wall_clock.set(max(wall_clock.now(), datetime.now(timezone.utc)))  # the CLI below reads the system clock

    def limits_of(doc: dict) -> list[tuple]:  # type: ignore[type-arg]
        return [(x["kind"], x["used"], x["held"], x["left"], x["exhausted"], x["frees_at"]) for x in doc["limits"]]

    policy = json.loads(cli("policy", "show", "g/a/x", "--json", db=store.url).stdout)
    [(kind, used, held, left, exhausted, frees)] = limits_of(policy)
    assert (kind, used, held, left, exhausted) == ("starts", 1, 0, 0, True) and frees is not None
    assert policy["eligibility"]["status"] == "limit_wait" and policy["eligibility"]["next_eligible_at"] == frees
    status = json.loads(cli("status", "--json", db=store.url).stdout)["automations"][0]
    shown = json.loads(cli("automation", "show", "x", "--json", db=store.url).stdout)
    assert limits_of(status) == limits_of(shown) == limits_of(policy)
    assert status["state"] == "limit_wait" and status["next_eligible_at"] == frees
    line = f"1 start per 1d at g/a: used 1, held 0, left 0; exhausted until {frees}"
    assert f"x: limit {line}" in cli("status", db=store.url).stdout
    assert f"limit:          {line}" in cli("automation", "show", "x", db=store.url).stdout
    assert f"limit {line}" in cli("policy", "show", "g/a/x", db=store.url).stdout

    c = console(store, wall_clock)
    assert limits_of(c.get("/api/policy?scope=g/a/x").json()["inherited"][0]) == limits_of(policy)
    assert limits_of(c.get("/api/status").json()["automations"][0]) == limits_of(policy)
    assert limits_of(c.get("/api/automations/x").json()) == limits_of(policy)
    verdict = c.get("/api/eligibility?goal=g&agent=a&automation=x").json()
    assert (verdict["status"], verdict["reason"], verdict["next_eligible_at"]) == ("limit_wait", "count_exhausted", frees)
    assert limits_of(verdict) == limits_of(policy)
    metrics = c.get("/metrics?lanes=all").text  # per-lane series are opt-in
    lane = r'automation="x"[^}]*kind="starts"[^}]*scope="g/a"[^}]*window="1d"'
    for name, value in (("used", 1), ("held", 0), ("left", 0)):
        assert re.search(rf"floorgate_limit_{name}\{{[^}}]*{lane}[^}}]*\}} {value}\.0", metrics), name
    stamp = re.search(rf"floorgate_limit_frees_timestamp_seconds\{{[^}}]*{lane}[^}}]*\}} (\S+)", metrics)
    assert stamp is not None and datetime.fromisoformat(frees.replace("Z", "+00:00")).timestamp() == float(stamp.group(1))
    sign_in(c)
    for page in (c.client.get("/settings?target=g/a/x").text, c.client.get("/automations/x").text, c.client.get("/dashboard").text):
        item = re.search(r'<li data-kind="starts" data-scope="g/a" data-window="1d" class="state-limit_wait">(.*?)</li>', page, re.S)
        assert item is not None
        assert '<span class="limit-usage">used 1, held 0, left 0</span>' in item.group(1)
        assert f'<time datetime="{frees}" data-testid="limit-frees"' in item.group(1)
