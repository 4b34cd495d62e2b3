"""A hook that gets no answer from its store blocks on its own before the agent app's timeout
(an app that kills a hook at its timeout lets the prompt through)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

LANE = ("--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")


@pytest.fixture
def silent_postgres() -> Iterator[str]:
    """A PostgreSQL URL whose host accepts the connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)  # kept open, never read from nor written to

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"postgresql+psycopg://fg@127.0.0.1:{listener.getsockname()[1]}/fg"
    finally:
        stop.set()
        listener.close()
        for conn in held:
            conn.close()


@pytest.mark.parametrize(
    "event, extra",
    [
        pytest.param("user-prompt-submit", (*LANE, "--wait-eligible", "0s"), id="prompt"),
        pytest.param("pre-tool-use", ("--mission", "m1"), id="tool-call"),
    ],
)
def test_a_store_that_never_answers_is_a_block_before_the_app_timeout(silent_postgres: str, event: str, extra: tuple[str, ...]) -> None:
    hook = [sys.executable, "-m", "scheduler", "--db", silent_postgres, "hook", event, *extra, "--hook-timeout", "4s"]
    # The subprocess timeout only keeps a broken test from hanging: without the deadline this hangs.
    ran = subprocess.run(hook, input='{"session_id": "s", "tool_name": "Bash"}', capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2, ran.stderr
    assert "no answer after 3s, just inside the app's 4s hook timeout" in ran.stderr and ran.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["soon", "1s"])
def test_an_unusable_hook_timeout_blocks_and_names_the_flag(value: str) -> None:
    hook = [sys.executable, "-m", "scheduler", "--db", "/nonexistent/fg.db", "hook", "user-prompt-submit", *LANE, "--hook-timeout", value]
    ran = subprocess.run(hook, input="{}", capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "--hook-timeout" in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr


def test_a_wait_that_outlasts_the_deadline_is_refused() -> None:
    hook = [sys.executable, "-m", "scheduler", "--db", "/nonexistent/fg.db", "hook", "user-prompt-submit", *LANE]
    ran = subprocess.run([*hook, "--wait-eligible", "20s", "--hook-timeout", "20s"], input="{}", capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "--wait-eligible: must end before the hook's own deadline" in ran.stderr, ran.stderr
