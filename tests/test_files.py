"""Files floorgate creates: owner-only, never through a planted link, a plain path taken literally,
and a turn log that cannot be written never stops the host's output from being drained."""

from __future__ import annotations

import os
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from basics import T0

from floorgate.admission import FixedClock, open_store
from floorgate.scheduler.runtime._process import pump
from floorgate.scheduler.runtime.executor import TurnExecutor

from cli import run_cli
from helpers import add_automation


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_state_dir_and_logs_are_owner_only(tmp_path: Path) -> None:
    db = tmp_path / "fg.db"
    with open_store(str(db)) as store:
        clock = FixedClock(T0)
        add_automation(store, clock, schedule="DTSTART:20261201T090000Z RRULE:FREQ=HOURLY", script="print('secret output')")
        from floorgate.admission import Automations

        outcome = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock).run(Automations(store, clock).get("x"))
    assert outcome.verdict.status == "succeeded"
    assert mode(db) == 0o600
    assert all(mode(p) == 0o600 for p in tmp_path.glob("fg.db-*"))
    for directory in (tmp_path / "state", tmp_path / "state" / "logs", tmp_path / "state" / "logs" / "x"):
        assert mode(directory) == 0o700, directory
    (log,) = (tmp_path / "state" / "logs" / "x").iterdir()
    assert mode(log) == 0o600 and "secret output" in log.read_text()


def test_a_symlink_planted_as_a_turn_log_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "fg.db"
    target = tmp_path / "elsewhere.txt"
    target.write_text("kept\n")
    with open_store(str(db)) as store:
        clock = FixedClock(T0)
        add_automation(store, clock, schedule="DTSTART:20261201T090000Z RRULE:FREQ=HOURLY", script="print('redirected?')")
        from floorgate.admission import Automations

        ex = TurnExecutor(store, state_dir=tmp_path / "state", clock=clock)
        turn = "x-planted"
        log_dir = tmp_path / "state" / "logs" / "x"
        log_dir.mkdir(parents=True)
        (log_dir / f"{turn}.log").symlink_to(target)
        outcome = ex.run(Automations(store, clock).get("x"), turn_id=turn)
    assert outcome.verdict.status != "succeeded"
    assert target.read_text() == "kept\n"  # nothing was written through the link


def test_a_full_disk_log_keeps_draining_and_says_the_log_is_incomplete() -> None:
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    read_end, write_end = os.pipe()
    tapped: list[str] = []
    with os.fdopen(read_end, "rb") as stream:
        thread = pump(stream, Path("/dev/full"), cap=10_000_000, tapped=tapped)

        def produce() -> None:
            with os.fdopen(write_end, "wb") as out:
                for _ in range(400):  # 4 MB: far more than a pipe holds, so a stopped pump would block this
                    out.write(b"x" * 9_999 + b"\n")
                out.write(b'{"type": "result", "usage": {"output_tokens": 7}}\n')

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        producer.join(timeout=60)
        thread.join(timeout=60)
    assert not producer.is_alive() and not thread.is_alive()  # everything drained
    assert thread.problem is not None and "incomplete" in thread.problem
    assert any('"result"' in line for line in tapped)  # the meter still sees the usage


def test_a_plain_path_is_a_path_not_a_url(tmp_path: Path) -> None:
    literal = tmp_path / "pct%41dir"
    literal.mkdir()
    db = literal / "fg.db"
    done = run_cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", db=str(db))
    assert done.returncode == 0, done.stderr
    assert db.exists() and not (tmp_path / "pctAdir").exists()
    shown = subprocess.run(["ls", str(literal)], capture_output=True, text=True)
    assert "fg.db" in shown.stdout
