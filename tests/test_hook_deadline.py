"""A hook that gets no answer from its store blocks on its own before the agent app's timeout
(an app that kills a hook at its timeout lets the prompt through)."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

from floorgate.scheduler.runtime._proc_start import process_age

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
    hook = [sys.executable, "-m", "floorgate", "--db", silent_postgres, "hook", event, *extra, "--hook-timeout", "4s"]
    # The subprocess timeout only keeps a broken test from hanging: without the deadline this hangs.
    ran = subprocess.run(hook, input='{"session_id": "s", "tool_name": "Bash"}', capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2, ran.stderr
    assert "no answer after 3s, just inside the app's 4s hook timeout" in ran.stderr and ran.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["soon", "1s"])
def test_an_unusable_hook_timeout_blocks_and_names_the_flag(value: str) -> None:
    hook = [sys.executable, "-m", "floorgate", "--db", "/nonexistent/fg.db", "hook", "user-prompt-submit", *LANE, "--hook-timeout", value]
    ran = subprocess.run(hook, input="{}", capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "--hook-timeout" in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr


STOP = ("--goal", "g", "--agent", "a", "--automation", "x")


def test_the_stop_hook_gives_up_before_the_app_timeout_and_never_blocks(silent_postgres: str) -> None:
    hook = [sys.executable, "-m", "floorgate", "--db", silent_postgres, "hook", "stop", *STOP, "--hook-timeout", "4s"]
    ran = subprocess.run(hook, input='{"session_id": "s"}', capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1, ran.stderr  # not recorded; never 2 (Claude Code would go on)
    assert "turn usage not recorded: no answer after 3s, just inside the app's 4s hook timeout" in ran.stderr
    assert ran.stderr.count("\n") == 1


@pytest.mark.parametrize("value", ["soon", "1s"])
def test_the_stop_hook_names_an_unusable_hook_timeout_and_never_blocks(value: str) -> None:
    hook = [sys.executable, "-m", "floorgate", "--db", "/nonexistent/fg.db", "hook", "stop", *STOP, "--hook-timeout", value]
    ran = subprocess.run(hook, input="{}", capture_output=True, text=True, timeout=60)
    assert ran.returncode == 1 and "--hook-timeout" in ran.stderr and ran.stderr.count("\n") == 1, ran.stderr


def test_a_wait_that_outlasts_the_deadline_is_refused() -> None:
    hook = [sys.executable, "-m", "floorgate", "--db", "/nonexistent/fg.db", "hook", "user-prompt-submit", *LANE]
    ran = subprocess.run([*hook, "--wait-eligible", "20s", "--hook-timeout", "20s"], input="{}", capture_output=True, text=True, timeout=60)
    assert ran.returncode == 2 and "--wait-eligible: must end before the hook's own deadline" in ran.stderr, ran.stderr


# -- the deadline counts from the process's start ------------------------------------------------
STAT = "4242 (floor gate (hook)) S 1 4242 4242 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 {start} 1 1"


@pytest.mark.parametrize(
    "start_ticks, since_boot, hz, age",
    [
        pytest.param(10_000, 100.0, 100, 0.0, id="just-started"),
        pytest.param(10_000, 127.5, 100, 27.5, id="started-27.5s-ago"),
        pytest.param(250_000, 1_011.0, 250, 11.0, id="another-tick-rate"),
    ],
)
def test_process_age_is_the_boot_clock_less_the_start_field(start_ticks: int, since_boot: float, hz: int, age: float) -> None:
    # The command name (field 2) holds spaces and parentheses: the fields are counted after its last ')'.
    got = process_age(STAT.format(start=start_ticks), since_boot, hz)
    assert got == timedelta(seconds=age)


def test_process_age_reads_this_process() -> None:
    age = process_age()
    assert timedelta(0) <= age < timedelta(hours=24)  # a test process started a moment ago, not at boot


def test_an_unreadable_start_falls_back_to_when_floorgate_began() -> None:
    assert timedelta(0) <= process_age("garbage without a parenthesis") < timedelta(hours=24)


@pytest.mark.parametrize(
    "timeout, age, blocks",
    [
        pytest.param("600s", "0s", False, id="a-fresh-process-keeps-its-whole-deadline"),
        pytest.param("600s", "595s", True, id="a-process-595s-old-has-spent-its-deadline"),
    ],
)
def test_the_hook_deadline_subtracts_the_time_since_the_process_started(timeout: str, age: str, blocks: bool) -> None:
    # A child arms the deadline with an injected process age and waits on stdin; the parent never
    # writes, so only the deadline ends it: at once when the age has used up the deadline.
    script = (
        "import sys\n"
        "from floorgate.admission.intervals import parse_interval\n"
        "from floorgate.scheduler.cli.commands.hook import _deadline\n"
        f"with _deadline(parse_interval({timeout!r}, 't'), 'prompt blocked (fail closed)', age=lambda: parse_interval({age!r}, 'a')):\n"
        "    print('armed', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        if blocks:  # it may exit before it says it is armed
            code = child.wait(timeout=60)  # bounds a broken test only: without the age it waits 595 s
            assert code == 2
            assert child.stderr is not None and "prompt blocked (fail closed): no answer after 9m55s" in child.stderr.read()
        else:
            assert child.stdout is not None and child.stdout.readline() == "armed\n"
            assert child.poll() is None  # still waiting for its answer
            child.stdin.write("\n")  # type: ignore[union-attr]
            child.stdin.flush()  # type: ignore[union-attr]
            assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_a_command_run_inside_another_program_does_not_count_that_program_s_age() -> None:
    # A test runner or library calling the CLI's run(): its age is not the hook's (only floorgate's
    # own process, through its entry point, is).
    script = "from floorgate.scheduler.runtime._proc_start import hook_age, mark_own, process_age\nprint(hook_age().total_seconds())\nmark_own()\nprint(hook_age().total_seconds() > 0)"
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert ran.stdout.split() == ["0.0", "True"], ran.stderr
