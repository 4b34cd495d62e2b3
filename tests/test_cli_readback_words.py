"""What an owner reads on a first day with limits: every surface words the same fact the same way.
A lane no wait frees is never shown eligible "now" (nor "at now"), an unreadable one says it is
unknown (fail closed), a lane without a floor says "none", and recorded times are shown to the second."""

from __future__ import annotations

import json
import re
import sqlite3

from cli import run_cli

SET = ("--revision", "0", "--owner-ref", "alice")


def ok(*args: str, db: str) -> str:
    result = run_cli(*args, db=db)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_a_lane_no_wait_frees_is_not_by_waiting_in_status_and_automation_show(sqlite_db: str) -> None:
    # A token budget without an estimate cannot be checked: denied until the owner sets one.
    ok("policy", "set", "g/a", "--budget-tokens", "1000", "--per", "1d", *SET, db=sqlite_db)
    ok("policy", "set", "g/b", "--budget-tokens", "1000", "--per", "1d", *SET, db=sqlite_db)
    ok("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "true", db=sqlite_db)
    status = ok("status", db=sqlite_db)
    row = next(line for line in status.splitlines() if line.startswith("x "))
    assert "limit_wait" in row and "not by waiting" in row, status
    lane = next(line for line in status.splitlines() if line.startswith("g/b "))
    assert lane.split()[1] == "limit_wait" and lane.rstrip().endswith("not by waiting"), status
    shown = ok("automation", "show", "x", db=sqlite_db)
    assert "  next eligible:  not by waiting (an owner must change a limit" in shown
    assert "  floor:          none\n" in shown  # no rule sets a floor: not "0 (a fire inside it: wait)"
    assert json.loads(ok("status", "--json", db=sqlite_db))["automations"][0]["next_eligible_at"] is None


def test_an_unreadable_lane_is_unknown_never_now(sqlite_db: str) -> None:
    ok("policy", "set", "g/a", "--min-interval", "1h", *SET, db=sqlite_db)
    ok("admit", "--goal", "g", "--agent", "a", "--turn", "t1", db=sqlite_db)
    conn = sqlite3.connect(sqlite_db)
    try:
        with conn:  # a hand edit: the start's anchor is no time at all
            conn.execute("UPDATE fg_starts SET anchor_us = 'garbage'")
    finally:
        conn.close()
    shown = ok("policy", "show", "g/a", db=sqlite_db)
    assert "state: unavailable, next eligible unknown (fail closed) (" in shown and not re.search(r"\bnow\b", shown), shown
    lane = next(line for line in ok("status", db=sqlite_db).splitlines() if line.startswith("g/a "))
    assert lane.split()[1] == "unavailable" and lane.rstrip().endswith("unknown (fail closed)"), lane


def test_an_eligible_lane_reads_next_eligible_now_not_at_now(sqlite_db: str) -> None:
    ok("policy", "set", "g/a", "--max-starts", "3", "--per", "1d", *SET, db=sqlite_db)
    shown = ok("policy", "show", "g/a", db=sqlite_db)
    assert "state: eligible, next eligible now (" in shown and "at now" not in shown, shown


_RECORDED = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")


def test_policy_history_and_starts_show_recorded_times_to_the_second(sqlite_db: str) -> None:
    ok("policy", "set", "g/a", "--min-interval", "1h", *SET, db=sqlite_db)
    ok("admit", "--goal", "g", "--agent", "a", "--turn", "t1", db=sqlite_db)
    for command, column in ((("policy", "history"), "CHANGED_AT"), (("starts",), "ANCHOR_AT")):
        header, row = ok(*command, db=sqlite_db).splitlines()
        cell = row[header.index(column) :]
        assert _RECORDED.match(cell), (command, row)
        assert not re.search(r"\d\d:\d\d:\d\d\.\d", row), (command, row)  # no fraction of a second
    # --json keeps the exact instant.
    [entry] = json.loads(ok("policy", "history", "--json", db=sqlite_db))["history"]
    assert entry["changed_at"].endswith("Z") and "T" in entry["changed_at"]


def test_policy_help_names_limits_where_it_used_to_say_floor_only(sqlite_db: str) -> None:
    text = run_cli("policy", "set", "--help", db=sqlite_db).stdout
    flat = " ".join(text.split())
    assert "--allow-reduction authorize a loosening: a lower or disabled floor, a looser compute bound or limit" in flat, flat
    assert "limits" in run_cli("policy", "--help", db=sqlite_db).stdout


def test_a_bad_limit_on_the_listing_commands_names_the_flag(sqlite_db: str) -> None:
    for command in (("policy", "history"), ("starts",), ("notify", "events")):
        for bad in ("0", "10001", "\u0663"):
            result = run_cli(*command, "--limit", bad, db=sqlite_db)
            lines = result.stderr.strip().splitlines()
            assert result.returncode == 2 and len(lines) == 1, (command, bad, result.stderr)
            assert lines[0].startswith("floorgate: error: argument --limit: "), (command, bad, lines)
