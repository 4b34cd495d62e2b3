"""The prompt hook's bounded wait: an agent app's own timer fires on the floor, not just after it."""

from __future__ import annotations

from datetime import timedelta
from itertools import pairwise

from admission import Admission, FixedClock, Store
from scheduler.hooks import HookService

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
