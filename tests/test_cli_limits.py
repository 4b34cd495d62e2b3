"""``policy set`` limit flags, ``policy show`` readback and ``policy price``: one grammar, one line,
exit 2, nothing written."""

from __future__ import annotations

import json

import pytest

from cli import run_cli


def history(db: str) -> list[dict]:  # type: ignore[type-arg]
    result = run_cli("policy", "history", "--json", db=db)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["history"]  # type: ignore[no-any-return]


def test_limit_flags_round_trip_through_policy_show(sqlite_db: str) -> None:
    done = run_cli(
        "policy", "set", "inbox", "--max-starts", "3", "--per", "day@Europe/Berlin", "--budget-tokens", "2M",
        "--budget-usd", "20", "--across", "agents", "--revision", "0", "--owner-ref", "alice", db=sqlite_db,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    run_cli("policy", "set", "inbox/triage", "--budget-tokens", "500k", "--per", "1d", "--estimate-tokens", "40k",
            "--revision", "0", "--owner-ref", "alice", db=sqlite_db)  # fmt: skip
    shown = json.loads(run_cli("policy", "show", "inbox/triage", "--json", db=sqlite_db).stdout)
    goal = next(r for r in shown["rules"] if r["scope"] == "inbox")
    assert goal["limits"] == {
        "max_starts": 3, "starts_window": "day@Europe/Berlin", "budget_tokens": 2_000_000, "budget_usd": "20",
        "budget_window": "day@Europe/Berlin", "estimate_tokens": None, "across_agents": True, "alert_at": None,
    }  # fmt: skip
    assert (goal["active"], goal["floor_active"]) == (True, False)  # limits only: in force, no floor
    binding = {(b["kind"], b["amount"], b["window"], b["scope"], b["across_agents"]) for b in shown["limits"]}
    assert binding == {
        ("starts", 3, "day@Europe/Berlin", "inbox", True),
        ("tokens", 2_000_000, "day@Europe/Berlin", "inbox", True),
        ("usd", "20", "day@Europe/Berlin", "inbox", True),
        ("tokens", 500_000, "1d", "inbox/triage", False),
    }
    text = run_cli("policy", "show", "inbox/triage", db=sqlite_db).stdout
    assert "3 starts per day@Europe/Berlin, 2M tokens and $20.00 per day@Europe/Berlin, across agents" in text
    assert "limit 500k tokens per 1d at inbox/triage: used 0 tokens, held 0 tokens, left 500000 tokens" in text
    # Dollars as the limit itself shows them (and as `usage` does), in the same line.
    assert "limit $20.00 per day@Europe/Berlin at inbox across agents: used $0.00, held $0.00, left $20.00" in text
    # The USD budget cannot be checked (no price): no wait frees it, and the sentence says so.
    assert "state: limit_wait, next eligible not by waiting (an owner must" in text and "at not by waiting" not in text
    usd = next(x for x in shown["limits"] if x["kind"] == "usd")
    assert usd["exhausted"] and "policy price" in usd["problem"]  # the lane has no model priced: fail closed, said so
    tokens = next(x for x in shown["limits"] if x["kind"] == "tokens" and x["scope"] == "inbox/triage")
    assert (tokens["used"], tokens["held"], tokens["left"], tokens["next_start_needs"], tokens["exhausted"]) == (
        0,
        0,
        500_000,
        40_000,
        False,
    )


BAD = [
    ("negative-usd", ["--budget-usd", "-3", "--per", "1d"], "--budget-usd"),
    ("seven-decimals", ["--budget-usd", "0.0000001", "--per", "1d"], "--budget-usd"),
    ("nan-usd", ["--budget-usd", "NaN", "--per", "1d"], "--budget-usd"),
    ("lowercase-m", ["--budget-tokens", "2m", "--per", "1d"], "--budget-tokens"),
    ("tokens-over-cap", ["--budget-tokens", "5000G", "--per", "1d"], "--budget-tokens"),
    ("count-not-a-number", ["--max-starts", "three", "--per", "1d"], "--max-starts"),
    ("count-negative", ["--max-starts", "-1", "--per", "1d"], "--max-starts"),
    ("count-without-window", ["--max-starts", "3"], "--per"),
    ("window-alone", ["--per", "1d"], "--per"),
    ("count-removed-with-window", ["--max-starts", "0", "--per", "1d"], "--max-starts"),
    ("budget-removed-with-window", ["--budget-usd", "0", "--per", "1d"], "--budget-usd"),
    ("unknown-period", ["--max-starts", "3", "--per", "fortnight@UTC"], "--per"),
    ("unknown-zone", ["--max-starts", "3", "--per", "day@Mars/Olympus"], "--per"),
    ("estimate-fraction", ["--estimate-tokens", "1.5"], "--estimate-tokens"),
    ("alert-zero", ["--max-starts", "3", "--per", "1d", "--alert-at", "0"], "--alert-at"),
    ("alert-over-100", ["--max-starts", "3", "--per", "1d", "--alert-at", "50,150"], "--alert-at"),
    ("alert-not-a-number", ["--max-starts", "3", "--per", "1d", "--alert-at", "abc"], "--alert-at"),
    ("alert-duplicate", ["--max-starts", "3", "--per", "1d", "--alert-at", "50,80,50"], "--alert-at"),
    ("alert-empty", ["--max-starts", "3", "--per", "1d", "--alert-at", ""], "--alert-at"),
    # Only ASCII digits: a superscript count was a traceback (exit 1), other scripts' digits were taken as numbers.
    ("count-superscript", ["--max-starts", "\u00b3", "--per", "1d"], "--max-starts"),
    ("count-arabic-indic", ["--max-starts", "\u0663", "--per", "1d"], "--max-starts"),
    ("tokens-arabic-indic", ["--budget-tokens", "\u0663k", "--per", "1d"], "--budget-tokens"),
    ("usd-arabic-indic", ["--budget-usd", "\u0663", "--per", "1d"], "--budget-usd"),
    ("estimate-arabic-indic", ["--estimate-tokens", "\u0663\u0660k"], "--estimate-tokens"),
    ("window-arabic-indic", ["--max-starts", "3", "--per", "\u0663h"], "--per"),
    ("floor-arabic-indic", ["--min-interval", "\u0663h"], "--min-interval"),
]


def test_alert_percentages_are_stored_shown_and_kept_in_history(sqlite_db: str) -> None:
    done = run_cli(
        "policy", "set", "inbox", "--budget-tokens", "2M", "--per", "1d", "--alert-at", "90,25",
        "--revision", "0", "--owner-ref", "alice", db=sqlite_db,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    shown = json.loads(run_cli("policy", "show", "inbox", "--json", db=sqlite_db).stdout)
    assert shown["rules"][0]["limits"]["alert_at"] == [25, 90]
    assert "alerts at 25%,90%" in run_cli("policy", "show", "inbox", db=sqlite_db).stdout
    (entry,) = history(sqlite_db)
    assert entry["limits_before"] is None and entry["limits_after"]["alert_at"] == [25, 90]
    run_cli("policy", "set", "inbox", "--alert-at", "50,80,100", "--revision", "1", "--owner-ref", "alice", db=sqlite_db)
    [latest, _] = history(sqlite_db)
    assert latest["limits_before"]["alert_at"] == [25, 90] and latest["limits_after"]["alert_at"] is None  # the default


@pytest.mark.parametrize("flags,field", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_limit_input_is_one_line_exit_2_nothing_written(sqlite_db: str, flags: list[str], field: str) -> None:
    result = run_cli("policy", "set", "inbox", *flags, "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"floorgate: error: {field}: ") and "Traceback" not in result.stderr
    assert history(sqlite_db) == []


def test_a_bad_count_says_that_0_removes_it(sqlite_db: str) -> None:
    """``--max-starts`` takes 1..1000000, and 0 as a word of its own (a removal): its error says both."""
    result = run_cli("policy", "set", "inbox", "--max-starts", "-1", "--per", "1d", "--revision", "0", "--owner-ref", "a", db=sqlite_db)
    assert result.returncode == 2 and "in 1..1000000, or 0 to remove the count" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["policy", "set", "inbox", "--max-starts", "3", "--per", "1d"], ["policy", "price", "m", "--usd-per-mtok", "2"]],
    ids=["set", "price"],
)
def test_a_negative_revision_names_the_flag(sqlite_db: str, command: list[str]) -> None:
    result = run_cli(*command, "--revision=-1", "--owner-ref", "alice", db=sqlite_db)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "--revision" in lines[0] and "expected_revision" not in lines[0]
    assert history(sqlite_db) == []


def test_a_goal_scopes_show_says_where_its_limits_use_is_read(sqlite_db: str) -> None:
    flags = ["--max-starts", "3", "--per", "1h", "--across", "agents", "--revision", "0", "--owner-ref", "alice"]
    assert run_cli("policy", "set", "shared", *flags, db=sqlite_db).returncode == 0
    shown = run_cli("policy", "show", "shared", db=sqlite_db)
    assert shown.returncode == 0 and "policy show shared/AGENT" in shown.stdout.splitlines()[-1]


def test_across_agents_only_on_a_goal(sqlite_db: str) -> None:
    result = run_cli("policy", "set", "inbox/triage", "--across", "agents", "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert result.returncode == 2 and "--across" in result.stderr and history(sqlite_db) == []


def test_loosening_a_limit_is_refused_without_authorization(sqlite_db: str) -> None:
    run_cli("policy", "set", "inbox", "--max-starts", "3", "--per", "1d", "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    refused = run_cli("policy", "set", "inbox", "--max-starts", "0", "--revision", "1", "--owner-ref", "alice", db=sqlite_db)
    assert refused.returncode != 0 and "--max-starts 3 -> none" in refused.stderr and len(history(sqlite_db)) == 1
    done = run_cli(
        "policy", "set", "inbox", "--max-starts", "0", "--revision", "1", "--owner-ref", "alice", "--allow-reduction", db=sqlite_db
    )
    assert done.returncode == 0, done.stderr
    [latest, _] = history(sqlite_db)
    assert latest["limits_before"]["max_starts"] == 3 and latest["limits_after"] is None and latest["reduction_authorized"]


# (id, the rule first written, the loosening write, what the refusal names): the CLI's flags and
# the amounts as an owner writes them, never the stored field names or micro-units.
LOOSER = [
    ("count", ["--max-starts", "3", "--per", "1d"], ["--max-starts", "5", "--per", "1d"], "(--max-starts 3 -> 5)"),
    ("count-window", ["--max-starts", "3", "--per", "1d"], ["--max-starts", "3", "--per", "12h"], "(--max-starts per 1d -> 12h)"),
    ("usd", ["--budget-usd", "20", "--per", "1d"], ["--budget-usd", "30.5", "--per", "1d"], "(--budget-usd $20.00 -> $30.50)"),
    ("tokens-removed", ["--budget-tokens", "2M", "--per", "1d"], ["--budget-tokens", "0"], "(--budget-tokens 2M -> none)"),
    ("estimate", ["--estimate-tokens", "40k"], ["--estimate-tokens", "10k"], "(--estimate-tokens 40k -> 10k)"),
    ("across", ["--max-starts", "3", "--per", "1d", "--across", "agents"], ["--across", "none"], "(--across agents -> none)"),
    ("floor", ["--min-interval", "1h"], ["--min-interval", "30m"], "lowering the floor on g from 1h to 30m"),
]


@pytest.mark.parametrize(("first", "looser", "named"), [x[1:] for x in LOOSER], ids=[x[0] for x in LOOSER])
def test_a_refused_loosening_names_the_cli_flags_and_the_fix(db_url: str, first: list[str], looser: list[str], named: str) -> None:
    done = run_cli("policy", "set", "g", *first, "--revision", "0", "--owner-ref", "alice", db=db_url)
    assert done.returncode == 0, done.stderr
    refused = run_cli("policy", "set", "g", *looser, "--revision", "1", "--owner-ref", "alice", db=db_url)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert named in refused.stderr and refused.stderr.rstrip().endswith("pass --allow-reduction to apply it"), refused.stderr
    for internal in ("allow_reduction", "max_starts", "starts_window", "budget_", "estimate_tokens", "USD"):
        assert internal not in refused.stderr, refused.stderr
    assert len(history(db_url)) == 1  # nothing written


def test_prices_are_set_shown_and_lowering_needs_authorization(sqlite_db: str) -> None:
    done = run_cli("policy", "price", "claude-sonnet-4-5", "--usd-per-mtok", "6.5", "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert done.returncode == 0, done.stderr
    lower = run_cli("policy", "price", "claude-sonnet-4-5", "--usd-per-mtok", "3", "--revision", "1", "--owner-ref", "alice", db=sqlite_db)
    assert lower.returncode != 0 and "($6.50 -> $3.00)" in lower.stderr and "pass --allow-reduction" in lower.stderr
    assert "allow_reduction" not in lower.stderr  # the CLI's flag, not the Python API's argument
    bad = run_cli("policy", "price", "m", "--usd-per-mtok", "-1", "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert bad.returncode == 2 and "--usd-per-mtok" in bad.stderr
    # Removing a price that was never set is refused: no revision records a change that is none.
    nothing = run_cli("policy", "price", "m", "--usd-per-mtok", "0", "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert nothing.returncode == 2 and nothing.stderr.startswith("floorgate: error: --usd-per-mtok: m has no price to remove")
    shown = json.loads(run_cli("policy", "prices", "--json", db=sqlite_db).stdout)["prices"]
    assert [(p["model"], p["usd_per_mtok"], p["revision"]) for p in shown] == [("claude-sonnet-4-5", "6.500000", 1)]
    assert "$6.50" in run_cli("policy", "prices", db=sqlite_db).stdout


def test_one_window_a_write(sqlite_db: str) -> None:
    result = run_cli(
        "policy", "set", "inbox", "--max-starts", "3", "--per", "1h", "--budget-usd", "2", "--per", "1d",
        "--revision", "0", "--owner-ref", "alice", db=sqlite_db,
    )  # fmt: skip
    assert result.returncode == 2 and "one --per a write" in result.stderr and history(sqlite_db) == []


def test_history_shows_the_limits_before_and_after_each_change(sqlite_db: str) -> None:
    first = run_cli("policy", "set", "inbox", "--max-starts", "3", "--per", "1d", "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert first.returncode == 0, first.stderr
    raised = run_cli(
        "policy", "set", "inbox", "--max-starts", "5", "--per", "1d", "--allow-reduction", "--revision", "1", "--owner-ref", "alice",
        db=sqlite_db,
    )  # fmt: skip
    assert raised.returncode == 0, raised.stderr
    text = run_cli("policy", "history", db=sqlite_db).stdout
    header, *rows = text.splitlines()
    assert "LIMITS_BEFORE" in header and "LIMITS_AFTER" in header
    three, five = '{"max_starts": 3, "starts_window": "1d"}', '{"max_starts": 5, "starts_window": "1d"}'
    newest = next(r for r in rows if five in r)
    assert newest.index(three) < newest.index(five)  # before, then after, on the raising write's row
    oldest = next(r for r in rows if r is not newest and three in r)
    assert five not in oldest
    assert [(c["limits_before_text"], c["limits_after_text"]) for c in history(sqlite_db)][:1] == [(three, five)]


def test_a_hook_denied_by_a_budget_it_cannot_check_says_what_to_set(sqlite_db: str) -> None:
    done = run_cli("policy", "set", "g/a", "--budget-tokens", "1000", "--per", "1d", "--revision", "0", "--owner-ref", "o", db=sqlite_db)
    assert done.returncode == 0, done.stderr
    hook = ("hook", "user-prompt-submit", "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic")
    denied = run_cli(*hook, db=sqlite_db, stdin=json.dumps({"session_id": "s1", "prompt": "go"}))
    assert denied.returncode == 2 and "budget_exhausted" in denied.stderr and "--estimate-tokens" in denied.stderr
    assert "state unavailable" not in denied.stderr and "before an owner changes a limit" in denied.stderr


def test_admit_reports_the_next_start_the_count_allows_not_only_the_floor(sqlite_db: str) -> None:
    """The admission that uses up a count says the next start waits for the window, as the readback
    (and the next admit's denial) does; the ones before it, that a start may follow at once."""
    done = run_cli("policy", "set", "g/a", "--max-starts", "2", "--per", "1d", "--revision", "0", "--owner-ref", "o", db=sqlite_db)
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(run_cli("--json", "admit", "--goal", "g", "--agent", "a", db=sqlite_db).stdout) for _ in range(2))
    denied = json.loads(run_cli("--json", "admit", "--goal", "g", "--agent", "a", db=sqlite_db).stdout)
    assert (first["admitted"], second["admitted"], denied["admitted"]) == (True, True, False)
    assert first["next_eligible_at"] <= second["decided_at"]  # one start of two: the next may follow at once
    assert second["next_eligible_at"] == denied["next_eligible_at"]  # the window frees the first start a day on
    text = run_cli("admit", "--goal", "g", "--agent", "b", db=sqlite_db).stdout  # no rule: nothing to wait for
    assert "next automatic start" not in text and "no floor applies" in text


UNADMITTABLE = [
    pytest.param(
        (), ("g/a", "--budget-tokens", "1.5k", "--per", "1d"), "g/a: 1.5k tokens per 1d", "cannot admit: no estimate", id="no-estimate"
    ),
    pytest.param(
        (),
        ("g/a", "--budget-tokens", "1k", "--per", "1d", "--estimate-tokens", "2k"),
        "g/a: 1k tokens per 1d",
        "exhausted until the owner raises it",
        id="estimate-above-budget",
    ),
    pytest.param(
        (("automation", "add", "rep", "--goal", "g", "--agent", "ed", "--schedule", "every 15m", "--model", "m1", "--", "true"),),
        ("g", "--budget-usd", "20", "--per", "1d", "--estimate-tokens", "10k"),
        "g/ed/rep: $20.00 per 1d",
        "no price",
        id="usd-without-price",
    ),
]


@pytest.mark.parametrize(("setup", "argv", "lane", "why"), UNADMITTABLE)
def test_a_limit_no_start_can_pass_is_warned_of_when_written(
    sqlite_db: str, setup: tuple[tuple[str, ...], ...], argv: tuple[str, ...], lane: str, why: str
) -> None:
    for step in setup:
        assert run_cli(*step, db=sqlite_db).returncode == 0
    done = run_cli("policy", "set", *argv, "--revision", "0", "--owner-ref", "alice", db=sqlite_db)
    assert done.returncode == 0, done.stderr  # written: the owner may mean to set the rest next
    warnings = [line for line in done.stderr.splitlines() if line.startswith("floorgate: warning: ")]
    assert len(warnings) == 1 and lane in warnings[0] and why in warnings[0], done.stderr


def test_a_limit_starts_can_pass_writes_without_a_warning(sqlite_db: str) -> None:
    done = run_cli(
        "policy", "set", "g/a", "--budget-tokens", "1M", "--per", "1d", "--estimate-tokens", "10k", "--max-starts", "3",
        "--revision", "0", "--owner-ref", "alice", db=sqlite_db,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr


def test_preview_says_which_limit_holds_the_lane_and_why(sqlite_db: str) -> None:
    add = ("automation", "add", "ci", "--goal", "g", "--agent", "ed", "--schedule", "every 15m", "--model", "m1", "--", "true")
    assert run_cli(*add, db=sqlite_db).returncode == 0
    assert (
        run_cli("policy", "set", "g", "--budget-usd", "20", "--per", "1d", "--revision", "0", "--owner-ref", "a", db=sqlite_db).returncode
        == 0
    )
    text = run_cli("automation", "preview", "ci", "--next", "2", db=sqlite_db)
    assert text.returncode == 0, text.stderr
    [held] = [line for line in text.stdout.splitlines() if line.startswith("HELD BY A LIMIT: ")]
    assert "$20.00 per 1d" in held and "cannot be checked: no estimate" in held, held
    doc = json.loads(run_cli("automation", "preview", "ci", "--next", "2", "--json", db=sqlite_db).stdout)
    assert doc["held_by"] == held.removeprefix("HELD BY A LIMIT: ")
    assert [f["denied_by"] for f in doc["fires"]] == ["budget_exhausted", "budget_exhausted"]
    # With an estimate the lane may start: nothing holds it, and the preview says nothing of limits.
    run_cli("policy", "set", "g", "--estimate-tokens", "10k", "--revision", "1", "--owner-ref", "a", db=sqlite_db)
    run_cli("policy", "price", "m1", "--usd-per-mtok", "3", "--revision", "0", "--owner-ref", "a", db=sqlite_db)
    free = json.loads(run_cli("automation", "preview", "ci", "--next", "2", "--json", db=sqlite_db).stdout)
    assert free["held_by"] is None and all(f["admitted"] for f in free["fires"]), free


CARRIED = [
    pytest.param(
        ("--budget-usd", "20", "--per", "1d"),
        ("--budget-tokens", "500k", "--per", "2d"),
        "the USD budget now counts per 2d too",
        id="tokens-move-usd",
    ),
    pytest.param(
        ("--budget-tokens", "1M", "--per", "1d"),
        ("--budget-usd", "5", "--per", "day@UTC"),
        "the token budget now counts per day@UTC",
        id="usd-moves-tokens",
    ),
    pytest.param(("--budget-usd", "20", "--per", "1d"), ("--budget-tokens", "500k", "--per", "1d"), None, id="same-window"),
    pytest.param(("--budget-usd", "20", "--per", "1d"), ("--budget-usd", "30", "--per", "2d"), None, id="the-budget-named"),
    pytest.param(("--max-starts", "3", "--per", "1d"), ("--budget-tokens", "1M", "--per", "2d"), None, id="a-count-has-its-own"),
]


@pytest.mark.parametrize(("first", "then", "said"), CARRIED)
def test_a_budget_whose_shared_window_a_write_moves_is_named(
    sqlite_db: str, first: tuple[str, ...], then: tuple[str, ...], said: str | None
) -> None:
    est = ("--estimate-tokens", "10k")
    assert run_cli("policy", "set", "g/a", *first, *est, "--revision", "0", "--owner-ref", "a", db=sqlite_db).returncode == 0
    done = run_cli("policy", "set", "g/a", *then, "--revision", "1", "--owner-ref", "a", "--allow-reduction", db=sqlite_db)
    assert done.returncode == 0, done.stderr
    moved = [line for line in done.stderr.splitlines() if "share one window" in line]
    if said is None:
        assert moved == [], done.stderr
    else:
        assert len(moved) == 1 and moved[0].startswith(f"floorgate: warning: g/a: {said}"), done.stderr


def test_a_goal_shows_where_its_use_is_read_only_when_it_has_a_count_or_budget(sqlite_db: str) -> None:
    floor = ("policy", "set", "g", "--min-interval", "15m", "--across", "agents", "--revision", "0", "--owner-ref", "a")
    assert run_cli(*floor, db=sqlite_db).returncode == 0
    assert "read per lane" not in run_cli("policy", "show", "g", db=sqlite_db).stdout  # a floor across agents uses nothing up
    count = ("policy", "set", "g", "--max-starts", "10", "--per", "1h", "--revision", "1", "--owner-ref", "a")
    assert run_cli(*count, db=sqlite_db).returncode == 0
    assert "used, held and left are read per lane: policy show g/AGENT" in run_cli("policy", "show", "g", db=sqlite_db).stdout


def test_alerts_on_a_rule_without_a_count_or_budget_are_warned_of(sqlite_db: str) -> None:
    done = run_cli("policy", "set", "g/a", "--alert-at", "50", "--revision", "0", "--owner-ref", "a", db=sqlite_db)
    assert done.returncode == 0 and "alerts are raised by this rule's counts and budgets, and it has none yet" in done.stderr
    then = run_cli(
        "policy", "set", "g/a", "--max-starts", "3", "--per", "1d", "--alert-at", "50", "--revision", "1", "--owner-ref", "a", db=sqlite_db
    )
    assert then.returncode == 0 and then.stderr == "", then.stderr


def test_status_notes_are_one_block_under_the_table(sqlite_db: str) -> None:
    add = ("automation", "add", "rep", "--goal", "r", "--agent", "w", "--schedule", "every 1h", "--", "true")
    assert run_cli(*add, db=sqlite_db).returncode == 0
    limits = ("--max-starts", "1", "--budget-tokens", "1k", "--estimate-tokens", "100", "--per", "1d")
    assert run_cli("policy", "set", "r/w", *limits, "--revision", "0", "--owner-ref", "a", db=sqlite_db).returncode == 0
    lines = run_cli("status", db=sqlite_db).stdout.splitlines()
    notes = [i for i, line in enumerate(lines) if line.startswith("  rep: ")]
    assert len(notes) >= 3, lines  # why it waits (no host), then a line per limit
    assert notes == list(range(notes[0], notes[0] + len(notes))), lines  # no blank line between them


def test_a_bare_admits_turn_reports_its_usage_once_and_frees_its_estimate(db_url: str) -> None:
    """A host that launches its own turns (admit, confirm, run, report) reconciles the estimate its
    admission held; before 'report' existed it stayed held for the whole window."""
    set_ = run_cli("policy", "set", "r/w", "--budget-tokens", "100k", "--per", "1d", "--estimate-tokens", "40k",
                   "--revision", "0", "--owner-ref", "alice", db=db_url)  # fmt: skip
    assert set_.returncode == 0, set_.stderr
    assert run_cli("admit", "--goal", "r", "--agent", "w", "--turn", "t1", db=db_url).returncode == 0
    assert run_cli("confirm", "t1", db=db_url).returncode == 0

    def used() -> tuple[int, int]:
        shown = json.loads(run_cli("policy", "show", "r/w", "--json", db=db_url).stdout)
        [tokens] = [x for x in shown["limits"] if x["kind"] == "tokens"]
        return tokens["used"], tokens["held"]

    assert used() == (0, 40_000)
    done = run_cli("report", "t1", "--tokens", "1.2k", "--model", "m1", "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changed"] is True and used() == (1_200, 0)
    again = run_cli("report", "t1", "--tokens", "1200", db=db_url)
    assert again.returncode == 0 and "nothing changed" in again.stdout
    other = run_cli("report", "t1", "--tokens", "1300", db=db_url)
    assert other.returncode == 2 and "reconciled once" in other.stderr and used() == (1_200, 0)
    assert run_cli("report", "nope", "--tokens", "1", db=db_url).returncode == 2
    floor = run_cli("policy", "set", "free/w", "--min-interval", "1h", "--revision", "0", "--owner-ref", "alice", db=db_url)
    assert floor.returncode == 0, floor.stderr
    assert run_cli("admit", "--goal", "free", "--agent", "w", "--turn", "t2", db=db_url).returncode == 0  # a floor, no budget
    unheld = run_cli("report", "t2", "--tokens", "5", "--json", db=db_url)
    assert unheld.returncode == 0 and json.loads(unheld.stdout)["recorded"] is False, unheld.stdout + unheld.stderr
    bad = run_cli("report", "t1", "--tokens", "-4", db=db_url)
    assert bad.returncode == 2 and bad.stderr.startswith("floorgate: error: --tokens:") and used() == (1_200, 0)
