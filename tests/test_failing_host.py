"""A real ``floorgate run``: a failing command slows down, is held after N failures, and its
events reach a real HTTP receiver, signed."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from test_events import Receiver, receiver  # noqa: F401 (the fixture)

from floorgate.admission import AutomationSpec, Automations, Events, HostPolicies, HostPolicy, SystemClock, open_store
from floorgate.admission.events import SIGNATURE_HEADER, verify
from floorgate.hosts import Schedule

from helpers import command, start_host, stop, wait_for

pytestmark = pytest.mark.slow

SECOND = timedelta(seconds=1)


def test_a_failing_command_slows_down_holds_after_n_and_alerts_a_real_receiver(db_url: str, tmp_path: Path, receiver: Receiver) -> None:  # noqa: F811
    clock = SystemClock()
    stamps = tmp_path / "launches"
    script = f"import sys, time; open({str(stamps)!r}, 'a').write(f'{{time.time()}}\\n'); sys.exit(7)"
    with open_store(db_url) as store:
        HostPolicies(store, clock).set(HostPolicy(backoff_initial=SECOND, backoff_cap=4 * SECOND), expected_revision=0, owner_ref="owner")
        _, secret = Events(store, clock).add_webhook(receiver.url, "turn_failed,turn_timed_out,automation_failing,automation_held")
        spec = AutomationSpec(
            goal_id="g", agent_id="a", schedule=Schedule.parse("every 1s", now=clock.now()).canonical(), host=command(script), hold_after=4
        )
        Automations(store, clock).add("x", spec)
    host = start_host(db_url, tmp_path / "state")
    try:
        wait_for(lambda: len(receiver.got) >= 6, timeout=60, what="the events")
        time.sleep(3)  # a held automation launches nothing more
    finally:
        code, log = stop(host)
    assert code == 0, log[-3000:]
    launched = [float(line) for line in stamps.read_text().split()]
    assert len(launched) == 4, launched  # held after the fourth failure of a command due every second
    gaps = [b - a for a, b in itertools.pairwise(launched)]
    # After the second failure each start waits initial x 2^(k-1): 2 s, then 4 s (the cap).
    assert gaps[1] >= 2.0 and gaps[2] >= 4.0, gaps
    kinds = sorted(d["kind"] for d in receiver.docs())
    assert kinds == ["automation_failing", "automation_held", *["turn_failed"] * 4], kinds
    assert all(verify(secret, body, headers[SIGNATURE_HEADER]) for headers, body in receiver.got)
    held = next(d for d in receiver.docs() if d["kind"] == "automation_held")
    assert held["data"]["hold_kind"] == "failing" and "automation resume x" in held["data"]["note"]
    with open_store(db_url) as store:
        automation = Automations(store, clock).get("x")
        assert automation.state.value == "held" and automation.hold_kind is not None and automation.hold_kind.value == "failing"
    argv = [sys.executable, "-m", "floorgate", "--db", db_url, "automation", "show", "x", "--json"]
    shown = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout)
    assert (shown["state"], shown["hold"], shown["failures"]) == ("held", "failing", 4), shown
