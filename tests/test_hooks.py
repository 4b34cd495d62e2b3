"""The prompt hook's bounded wait: an agent app's own timer fires on the floor, not just after it."""

from __future__ import annotations

import json
import os
import signal
from datetime import timedelta
from itertools import pairwise

import pytest
from basics import T0

from floorgate.admission import Admission, FixedClock, Store, open_store
from floorgate.scheduler.agents.hooks import HookService

from cli import run_cli
from helpers import floor

HOUR = timedelta(hours=1)
LANE = {"goal": "g", "agent": "a", "automation": "x", "manual_reason": None, "session_id": "s"}


def app_timer_fires(store: Store, clock: FixedClock, wait: timedelta, fires: int) -> tuple[list[bool], list[float]]:
    """An app fires every hour by its own clock; its hook process gets to the store 8 or 3 ms
    after a fire (a process start is never the same twice). Returns which fires woke the model
    and what the hook slept."""
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock.advance(timedelta(seconds=seconds))

    hooks = HookService(store, clock, None, sleep=sleep)
    start = clock.now()
    admitted = []
    for n in range(fires):
        clock.set(start + n * HOUR + timedelta(milliseconds=8 if n % 2 == 0 else 3))
        admitted.append(hooks.admit_prompt(**LANE, wait=wait).decision.admitted)  # type: ignore[arg-type]
    return admitted, slept


def test_without_a_wait_an_app_timer_loses_every_other_fire(store: Store, clock: FixedClock) -> None:
    floor(store, clock, "g/a", HOUR)
    admitted, _ = app_timer_fires(store, clock, timedelta(0), 4)
    assert admitted == [True, False, True, False]


def test_a_fire_just_before_the_floor_waits_for_it_and_wakes_the_model(store: Store, clock: FixedClock) -> None:
    floor(store, clock, "g/a", HOUR)
    admitted, slept = app_timer_fires(store, clock, timedelta(seconds=20), 4)
    assert admitted == [True, True, True, True]
    assert len(slept) == 2 and max(slept) < 0.01  # the fires that came early waited 5 ms each
    anchors = sorted(s.anchor_at for s in Admission(store, clock).starts())
    assert len(anchors) == 4 and all(b - a >= HOUR for a, b in pairwise(anchors))  # never shortened


def test_a_floor_further_away_than_the_wait_blocks_without_sleeping(store: Store, clock: FixedClock) -> None:
    floor(store, clock, "g/a", HOUR)
    slept: list[float] = []
    hooks = HookService(store, clock, None, sleep=slept.append)
    assert hooks.admit_prompt(**LANE, wait=timedelta(seconds=20)).decision.admitted  # type: ignore[arg-type]
    clock.advance(HOUR - timedelta(seconds=21))
    denied = hooks.admit_prompt(**LANE, wait=timedelta(seconds=20)).decision  # type: ignore[arg-type]
    assert not denied.admitted and slept == []


def test_a_wait_beyond_what_the_agent_app_allows_is_refused(sqlite_db: str) -> None:
    lane = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    result = run_cli("hook", "user-prompt-submit", *lane, "--wait-eligible", "2m", db=sqlite_db, stdin='{"session_id": "s"}')
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "--wait-eligible: at most 25s" in result.stderr and "blocked" in result.stderr


# What Claude Code 2.1.332 sends a UserPromptSubmit hook in print mode (-p), ids shortened.
CLAUDE_PAYLOAD = {
    "session_id": "3e121210-0f61-48cb-8bf7-a8b6fbff908d",
    "transcript_path": "/home/u/.claude/projects/-srv-agent/3e121210-0f61-48cb-8bf7-a8b6fbff908d.jsonl",
    "cwd": "/srv/agent",
    "prompt_id": "95773e69-8dc3-4ec9-b27b-dbdd0b1b10f0",
    "permission_mode": "default",
    "hook_event_name": "UserPromptSubmit",
    "prompt": "triage the inbox",
}


def _interrupt(_seconds: float) -> None:
    raise KeyboardInterrupt


def _terminate(_seconds: float) -> None:
    os.kill(os.getpid(), signal.SIGTERM)  # what a supervisor sends a hook it gives up on


@pytest.mark.parametrize("stop", [_interrupt, _terminate], ids=["SIGINT", "SIGTERM"])
def test_a_hook_interrupted_while_waiting_for_its_floor_blocks(sqlite_db: str, monkeypatch, stop) -> None:  # type: ignore[no-untyped-def]
    import floorgate.scheduler.agents.hooks

    with open_store(sqlite_db) as store:
        floor(store, FixedClock(T0), "g/a", timedelta(seconds=10))
    lane = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    payload = json.dumps(CLAUDE_PAYLOAD)
    assert run_cli("hook", "user-prompt-submit", *lane, db=sqlite_db, stdin=payload).returncode == 0
    monkeypatch.setattr(floorgate.scheduler.agents.hooks.time, "sleep", stop)

    def escaped(signum: int, _frame: object) -> None:
        raise Escaped

    mine = signal.signal(signal.SIGTERM, escaped)  # a hook that left SIGTERM to its default would have died here
    try:
        result = run_cli("hook", "user-prompt-submit", *lane, db=sqlite_db, stdin=payload)
        assert signal.getsignal(signal.SIGTERM) is escaped  # the hook's handler does not outlive it
    except (KeyboardInterrupt, Escaped):
        pytest.fail("the interruption escaped the hook: it would exit 130/143, which lets the prompt through")
    finally:
        signal.signal(signal.SIGTERM, mine)
    assert result.returncode == 2 and "blocked (fail closed): interrupted" in result.stderr and "Traceback" not in result.stderr


class Escaped(Exception):
    pass


def test_the_prompt_of_a_managed_turn_is_that_turn_s_wake(store: Store, clock: FixedClock, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``turn run`` admitted the start; the host's own prompt hook (installed for the same lane)
    must not ask again and find the floor that start just took."""
    import sys

    from floorgate.admission import CommandHost
    from floorgate.scheduler.runtime.executor import TurnExecutor

    from helpers import add_automation

    floor(store, clock, "g/a", timedelta(days=3650))  # the CLI below reads the real clock, far past the fixed one
    hook = [sys.executable, "-m", "floorgate", "--db", store.url, "hook", "user-prompt-submit", "--goal", "g", "--agent", "a"]
    hook += ["--automation", "x", "--wake", "automatic"]
    host = f"import subprocess, sys; sys.exit(subprocess.run({hook!r}, input={json.dumps(CLAUDE_PAYLOAD)!r}, text=True).returncode)"
    auto = add_automation(store, clock)
    from floorgate.admission import Automations

    auto = Automations(store, clock).edit(
        "x", auto.spec.model_copy(update={"host": CommandHost(argv=(sys.executable, "-c", host), timeout_seconds=60)})
    )
    outcome = TurnExecutor(store, state_dir=tmp_path / "s", clock=clock).run(auto)
    assert outcome.verdict.status == "succeeded", outcome.verdict  # the hook let the turn's prompt through
    assert len(Admission(store, clock).starts()) == 1  # and took no second start
    other = run_cli("hook", "user-prompt-submit", "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic",
                    db=store.url, stdin=json.dumps(CLAUDE_PAYLOAD), env={"FLOORGATE_TURN_ID": outcome.turn_id, "PATH": "/usr/bin:/bin"})  # fmt: skip
    assert other.returncode == 2  # a settled turn's id lets nothing through
