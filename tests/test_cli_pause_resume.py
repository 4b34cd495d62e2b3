"""``automation pause``, ``resume`` and ``edit`` say what they did, and a step with nothing to do
writes nothing and says so (exit 0: each is idempotent)."""

from __future__ import annotations

import json
import sys
from datetime import timedelta

import pytest
from basics import T0

from floorgate.admission import Automations, FixedClock, open_store
from floorgate.admission.automations import WakeState

from test_cli import cli


def _add(db: str) -> None:
    r = cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", sys.executable, "-c", "pass", db=db)
    assert r.returncode == 0, r.stderr


def _revision(db: str) -> int:
    store = open_store(db)
    try:
        return Automations(store, FixedClock(T0)).get("x").revision
    finally:
        store.close()


# Each case: the steps before, the step, its line, whether it changed anything (JSON ``changed``).
CASES = [
    pytest.param([], ["pause", "--note", "on holiday"], "paused x: on holiday", True, id="pause-with-a-note"),
    pytest.param([], ["pause"], "paused x: no note given", True, id="pause-without-a-note"),
    pytest.param(
        [["pause", "--note", "on holiday"]],
        ["pause"],
        "x was paused already (on holiday); nothing changed",
        False,
        id="pause-again-keeps-the-note",
    ),
    pytest.param(
        [["pause", "--note", "on holiday"]],
        ["pause", "--note", "back on monday"],
        "paused x: back on monday",
        True,
        id="pause-again-new-note",
    ),
    pytest.param([["pause"]], ["resume"], "resumed x: eligible", True, id="resume-a-paused-one"),
    pytest.param([], ["resume"], "x was not paused, held or failing: nothing to resume; eligible", False, id="resume-an-active-one"),
    pytest.param([], ["edit"], "x has these settings already (revision 1); nothing changed", False, id="edit-nothing"),
    pytest.param(
        [], ["edit", "--overlap", "skip"], "x has these settings already (revision 1); nothing changed", False, id="edit-same-value"
    ),
    pytest.param([], ["edit", "--timeout", "5m"], "edited x (revision 2)", True, id="edit-a-setting"),
]


@pytest.mark.parametrize(("before", "step", "line", "changed"), CASES)
def test_pause_resume_and_edit_say_what_they_did(
    sqlite_db: str, before: list[list[str]], step: list[str], line: str, changed: bool
) -> None:
    _add(sqlite_db)
    for args in before:
        assert cli("automation", args[0], "x", *args[1:], db=sqlite_db).returncode == 0
    revision = _revision(sqlite_db)
    r = cli("automation", step[0], "x", *step[1:], db=sqlite_db)
    assert r.returncode == 0 and r.stdout.startswith(line), r.stdout + r.stderr
    assert _revision(sqlite_db) == revision + (1 if changed else 0)  # nothing written when nothing changed
    doc = json.loads(cli("automation", step[0], "x", *step[1:], "--json", db=sqlite_db).stdout)
    assert doc["changed"] is False  # the same step again has nothing left to do


def test_status_names_a_paused_automation_s_state_beside_its_note(sqlite_db: str) -> None:
    _add(sqlite_db)
    assert cli("automation", "pause", "x", "--note", "on holiday", db=sqlite_db).returncode == 0
    assert "  x: paused: on holiday" in cli("status", db=sqlite_db).stdout.splitlines()


def test_resume_of_an_active_automation_with_a_backoff_running_ends_it(sqlite_db: str) -> None:
    _add(sqlite_db)
    clock = FixedClock(T0)
    store = open_store(sqlite_db)
    try:
        repo = Automations(store, clock)
        repo.save_wake_state(WakeState(automation_id="x", backoff_step=2, backoff_wake_at=T0 + timedelta(minutes=6)))
        r = cli("automation", "resume", "x", "--json", db=sqlite_db)
        assert json.loads(r.stdout)["changed"] is True
        wake = repo.wake_state("x")
        assert (wake.backoff_step, wake.backoff_wake_at) == (0, None)
    finally:
        store.close()
