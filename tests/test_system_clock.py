"""The CLI and the prompt hook with their default clock (the system's), at exact floor boundaries.

Every other test injects a ``FixedClock``; these are the ones where the system clock itself is
under test: ``floorgate admit`` and ``floorgate hook user-prompt-submit`` run in process with no
clock given, and ``freezegun`` sets the time they read. One microsecond before the floor has
elapsed they deny (exit 3) or block (exit 2); at the floor exactly they admit.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from basics import T0
from freezegun import freeze_time

from floorgate.admission import FixedClock, open_store

from cli import run_cli
from helpers import floor

FLOOR = timedelta(hours=1)
JUST_BEFORE = T0 + FLOOR - timedelta(microseconds=1)
PAYLOAD = json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "triage the inbox"})
HOOK_LANE = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")


@pytest.fixture
def floored_db(sqlite_db: str) -> str:
    with open_store(sqlite_db) as store:
        floor(store, FixedClock(T0 - timedelta(days=1)), "g/a", FLOOR)
    return sqlite_db


def _admit(db: str, turn: str) -> tuple[int, dict[str, object]]:
    done = run_cli("admit", "--goal", "g", "--agent", "a", "--automation", "x", "--turn", turn, "--json", db=db)
    return done.returncode, json.loads(done.stdout)


@pytest.mark.parametrize(
    ("second_at", "code", "admitted"),
    [
        pytest.param(JUST_BEFORE, 3, False, id="one-microsecond-before-the-floor-denied"),
        pytest.param(T0 + FLOOR, 0, True, id="at-the-floor-admitted"),
    ],
)
def test_admit_with_the_system_clock(floored_db: str, second_at, code: int, admitted: bool) -> None:  # type: ignore[no-untyped-def]
    with freeze_time(T0):
        first_code, first = _admit(floored_db, "t1")
        assert first_code == 0 and first["admitted"]
        assert run_cli("confirm", "t1", db=floored_db).returncode == 0
    assert first["next_eligible_at"] == (T0 + FLOOR).isoformat().replace("+00:00", "Z")
    with freeze_time(second_at):
        second_code, second = _admit(floored_db, "t2")
    assert (second_code, second["admitted"]) == (code, admitted)


@pytest.mark.parametrize(
    ("second_at", "code"),
    [
        pytest.param(JUST_BEFORE, 2, id="one-microsecond-before-the-floor-blocks"),
        pytest.param(T0 + FLOOR, 0, id="at-the-floor-lets-the-prompt-through"),
    ],
)
def test_the_prompt_hook_with_the_system_clock(floored_db: str, second_at, code: int) -> None:  # type: ignore[no-untyped-def]
    with freeze_time(T0):
        first = run_cli("hook", "user-prompt-submit", *HOOK_LANE, db=floored_db, stdin=PAYLOAD)
    assert first.returncode == 0, first.stderr
    with freeze_time(second_at):
        second = run_cli("hook", "user-prompt-submit", *HOOK_LANE, db=floored_db, stdin=PAYLOAD)
    assert second.returncode == code, second.stderr
    if code == 2:
        assert "Traceback" not in second.stderr and second.stderr.strip()
