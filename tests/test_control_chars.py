"""A control character in an id or free text is invalid input, never a store failure or a raw
terminal escape.

PostgreSQL refuses a NUL in text (the read or write failed as "store unavailable", exit 1), and a
pause note or manual reason holding ESC [ ... reached the terminal raw through ``status``. Every
id and free-text field is checked in the admission domain: the CLI exits 2 with one line naming
the field, the console API answers 422 naming it; a value stored before these checks (or by a
hand edit) is shown escaped.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from basics import T0, raw_sql

from floorgate.admission import Admission, Approvals, Automations, FixedClock, InvalidInput, Journal, Missions, Principals, Store

from cli import run_cli
from console_kit import Console, console
from helpers import add_automation, floor

CONTROLS = [
    pytest.param("a\x00b", id="NUL"),
    pytest.param("a\x1b[2Jb", id="ESC-clear-screen"),
    pytest.param("a\x1b]0;pwned\x07b", id="OSC-title"),
    pytest.param("a\x9b31mb", id="C1-CSI"),
    pytest.param("a\x7fb", id="DEL"),
    pytest.param("a\nforged line", id="newline"),
    pytest.param("a\u202eb", id="bidi-override"),
]


@dataclass(frozen=True)
class Entry:
    id: str
    field: str
    call: Callable[[Store, str], Any]


ENTRIES = [
    Entry("pause note", "note", lambda s, v: Automations(s, FixedClock(T0)).set_state("x", "paused", f"away {v}")),
    Entry(
        "manual reason",
        "manual_reason",
        lambda s, v: Admission(s, FixedClock(T0)).reserve(
            goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=T0, manual_reason=f"why {v}"
        ),
    ),
    Entry("turn id", "turn_id", lambda s, v: Journal(s).get(v)),
    Entry("mission id", "mission_id", lambda s, v: Missions(s).get(v)),
    Entry("mission's automation", "automation", lambda s, v: Missions(s).current(v)),
    Entry("approval id", "approval_id", lambda s, v: Approvals(s).get(f"auth-{v}")),
    Entry("approval decided", "approval_id", lambda s, v: Approvals(s).decide(f"auth-{v}", True)),
    Entry("principal name", "name", lambda s, v: Principals(s).get(v)),
    Entry("principal revoked", "name", lambda s, v: Principals(s).revoke(v)),
    Entry("principal added", "owner_ref", lambda s, v: Principals(s).add(v, "owner")),
    Entry("goal id", "goal", lambda s, v: Admission(s).eligibility(v, "a")),
    Entry("automation id", "automation", lambda s, v: Automations(s).get(v)),
]


@pytest.mark.parametrize("value", CONTROLS)
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.id for e in ENTRIES])
def test_a_control_character_is_invalid_input_naming_its_field(store: Store, entry: Entry, value: str) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock)
    floor(store, clock, "g/a", timedelta(hours=1))
    with pytest.raises(InvalidInput) as raised:
        entry.call(store, value)
    assert raised.value.field == entry.field
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]
    assert raw_sql(store, "SELECT state FROM fg_automations") == [("active",)]


CLI_CASES = [
    pytest.param(("automation", "pause", "x", "--note", "away \x1b[2J"), "note", id="pause-note-ESC"),
    pytest.param(("automation", "pause", "x", "--note", "away \x9b31m"), "note", id="pause-note-C1"),
    pytest.param(("turn", "run", "x", "--manual-reason", "why \x1b]0;t\x07"), "--manual-reason", id="turn-run-reason-OSC"),
    pytest.param(("admit", "--goal", "g", "--agent", "a", "--manual-reason", "why \x07"), "--manual-reason", id="admit-reason-BEL"),
    pytest.param(("turn", "show", "t\x1b[1m"), "turn_id", id="turn-show-id"),
    pytest.param(("approve", "auth-\x1b[1m"), "approval_id", id="approve-id"),
]


@pytest.mark.parametrize(("argv", "field"), CLI_CASES)
def test_the_cli_exits_2_with_one_line_naming_the_field(store: Store, db_url: str, argv: tuple[str, ...], field: str) -> None:
    clock = FixedClock(T0)
    add_automation(store, clock)
    floor(store, clock, "g/a", timedelta(hours=1))
    result = run_cli(*argv, db=db_url)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and field in lines[0] and "\x1b" not in result.stderr and "\x9b" not in result.stderr, lines
    assert "Traceback" not in result.stderr
    assert raw_sql(store, "SELECT COUNT(*) FROM fg_starts") == [(0,)]
    assert raw_sql(store, "SELECT state FROM fg_automations") == [("active",)]


API_CASES = [
    pytest.param("/api/automations/x/pause", {"note": "away \x00 now"}, "note", id="pause-note-NUL"),
    pytest.param("/api/automations/x/pause", {"note": "away \x1b[2J"}, "note", id="pause-note-ESC"),
    pytest.param("/api/automations/x/run", {"reason": "why \x00"}, "manual_reason", id="run-reason-NUL"),
    pytest.param("/api/asks/auth-a%00b/approve", {}, "approval_id", id="approve-id-NUL"),
    pytest.param("/api/asks/auth-a%1Bb/deny", {}, "approval_id", id="deny-id-ESC"),
]


@pytest.mark.parametrize(("path", "body", "field"), API_CASES)
def test_the_console_api_answers_422_naming_the_field(store: Store, path: str, body: dict[str, str], field: str) -> None:
    clock = FixedClock(T0)
    c: Console = console(store, clock)
    add_automation(store, clock)
    r = c.post(path, body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["kind"] == "invalid_input" and error["field"] == field, error
    assert raw_sql(store, "SELECT state FROM fg_automations") == [("active",)]


@pytest.mark.parametrize("path", ["/api/turns/t%00x", "/api/missions/m%00x", "/api/turns/t%1B%5B2Jx"])
def test_the_console_api_reads_by_an_id_holding_a_nul_are_422(store: Store, path: str) -> None:
    c = console(store, FixedClock(T0))
    r = c.get(path)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["kind"] == "invalid_input"


def test_status_shows_a_stored_escape_sequence_escaped(store: Store, db_url: str) -> None:
    """A pause note stored before notes were checked (here: written straight into the store)."""
    clock = FixedClock(T0)
    add_automation(store, clock)
    Automations(store, clock).set_state("x", "paused", "away")
    raw_sql(store, "UPDATE fg_automations SET state_note = :n", {"n": "away \x1b[2J\x1b]0;pwned\x07 \x9b31m\nforged: eligible"})
    for argv in (("status",), ("automation", "show", "x"), ("automation", "list")):
        result = run_cli(*argv, db=db_url)
        assert result.returncode == 0, (argv, result.stderr)
        shown = result.stdout
        assert not any(c in shown for c in "\x1b\x07\x9b"), (argv, shown)
        if argv != ("automation", "list"):
            assert "away \\x1b[2J\\x1b]0;pwned\\x07 \\x9b31m\\nforged: eligible" in shown, (argv, shown)
