"""The CLI as a user runs it: exit codes, JSON, one-line errors.

Commands run in-process through the CLI's entry function (``cli.run_cli``); one smoke test runs the
installed console script as a real process.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from basics import store_made

from cli import Result, run_cli

cli = run_cli  # the name the CLI tests (and test_cli_automation) call


def one_line_error(result: Result | subprocess.CompletedProcess[str]) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def db(sqlite_db: str) -> str:
    return sqlite_db


def test_the_in_process_runner_captures_every_stream_and_restores_the_process(tmp_path: Path) -> None:
    cwd, env = os.getcwd(), dict(os.environ)
    r = cli("--help", cwd=tmp_path, env={"FLOORGATE_DB": str(tmp_path / "x.db")})
    assert r.returncode == 0 and r.stdout.startswith("usage: floorgate") and r.stderr == ""
    bad = cli("no-such-command", cwd=tmp_path)
    assert bad.returncode == 2 and "no-such-command" in one_line_error(bad) and bad.stdout == ""
    assert os.getcwd() == cwd and dict(os.environ) == env


def test_policy_admit_confirm_status_round_trip(db: str) -> None:
    r = cli("policy", "set", "inbox/triage", "--min-interval", "24h", "--revision", "0", "--owner-ref", "alice", "--json", db=db)
    assert r.returncode == 0 and json.loads(r.stdout)["revision"] == 1
    r = cli("admit", "--goal", "inbox", "--agent", "triage", "--automation", "am", "--turn", "t1", "--json", db=db)
    first = json.loads(r.stdout)
    assert r.returncode == 0 and first["admitted"] and first["reason"] == "eligible"
    r = cli("confirm", "t1", "--json", db=db)
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "confirmed"
    r = cli("confirm", "no-such-turn", db=db)
    assert r.returncode == 2 and "no reservation to confirm" in one_line_error(r) and r.stdout == ""
    r = cli("admit", "--goal", "inbox", "--agent", "triage", "--automation", "am", "--turn", "t2", "--json", db=db)
    denied = json.loads(r.stdout)
    assert r.returncode == 3 and denied["reason"] == "interval_wait"
    assert denied["next_eligible_at"] == first["next_eligible_at"]
    r = cli("status", "--goal", "inbox", "--agent", "triage", "--automation", "am", "--json", db=db)
    lane = json.loads(r.stdout)["lanes"][0]
    assert lane["status"] == "interval_wait" and lane["next_eligible_at"] == first["next_eligible_at"]
    assert lane["effective_floor"]["rules"] == [{"scope": "inbox/triage", "scope_kind": "agent", "min_interval": "1d", "revision": 1}]
    r = cli("starts", "--json", db=db)
    assert [s["turn_id"] for s in json.loads(r.stdout)["starts"]] == ["t1"]
    r = cli("policy", "history", "--json", db=db)
    assert json.loads(r.stdout)["history"][0]["after"] == "1d"
    table = cli("status", db=db)
    assert table.returncode == 0 and "inbox/triage/am" in table.stdout and "interval_wait" in table.stdout


def test_a_cli_note_is_kept_in_policy_history_and_a_bad_one_writes_nothing(db: str) -> None:
    bad = cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "al", "--note", "x" * 5000, db=db)
    assert bad.returncode == 2 and "note" in one_line_error(bad)
    assert json.loads(cli("policy", "history", "--json", db=db).stdout)["history"] == []
    ok = cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "al", "--note", "quiet nights", db=db)
    assert ok.returncode == 0
    assert json.loads(cli("policy", "history", "--json", db=db).stdout)["history"][0]["note"] == "quiet nights"
    shown = cli("policy", "history", db=db).stdout.splitlines()  # the text table shows it too
    assert shown[0].split()[-1] == "NOTE" and shown[1].endswith("quiet nights")


def test_exit_codes_and_one_line_errors(db: str) -> None:
    base = ["policy", "set", "g/a", "--owner-ref", "alice"]
    bad = cli(*base, "--min-interval", "5x", "--revision", "0", db=db)
    assert bad.returncode == 2 and "--min-interval" in one_line_error(bad)
    assert cli(*base, "--min-interval", "1d", "--revision", "0", db=db).returncode == 0
    conflict = cli(*base, "--min-interval", "2d", "--revision", "0", db=db)
    assert conflict.returncode == 4 and "--revision 1" in one_line_error(conflict)
    lower = cli(*base, "--min-interval", "1h", "--revision", "1", db=db)
    assert lower.returncode == 2 and "--allow-reduction" in one_line_error(lower)
    assert cli(*base, "--min-interval", "0", "--revision", "1", "--allow-reduction", db=db).returncode == 0
    missing = cli("admit", "--goal", "g", db=db)
    assert missing.returncode == 2 and "--agent" in one_line_error(missing)
    bad_id = cli("admit", "--goal", "g h", "--agent", "a", db=db)
    assert bad_id.returncode == 2 and one_line_error(bad_id).startswith("floorgate: error: --goal:")
    naive = cli("admit", "--goal", "g", "--agent", "a", "--trigger-time", "2026-12-01T09:00:00", db=db)
    assert naive.returncode == 2 and "--trigger-time" in one_line_error(naive)


def test_newer_schema_is_a_one_line_store_error(db: str) -> None:
    assert cli("status", db=db).returncode == 0
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE fg_alembic_version SET version_num = '0099'")
    r = cli("status", db=db)
    assert r.returncode == 1 and "newer than this floorgate" in one_line_error(r)


def test_demo_runs_from_an_empty_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A real process: the demo's nested run() calls write to the process's own stdout.
    r = subprocess.run([sys.executable, "-m", "floorgate", "demo"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "(exit 3)" in r.stdout and "eligible at" in r.stdout
    assert (tmp_path / "floorgate-demo.db").exists()


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("automations", id="a-store-with-an-automation"),
        pytest.param("owners", id="a-store-with-an-owner"),
        pytest.param("floors", id="a-store-with-another-floor"),
        pytest.param("text", id="a-text-file"),
    ],
)
def test_demo_refuses_to_delete_a_file_that_is_not_a_demo_store(db: str, kind: str) -> None:
    if kind == "automations":
        assert cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "true", db=db).returncode == 0
    elif kind == "owners":
        assert cli("owner", "add", "alice", "--role", "owner", db=db).returncode == 0
    elif kind == "floors":
        assert cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", db=db).returncode == 0
    else:
        Path(db).write_text("my notes\n")
    r = cli("demo", "--demo-db", db, cwd=Path(db).parent)
    line = one_line_error(r)
    assert r.returncode == 2 and line.startswith("floorgate: error: --demo-db:") and "another --demo-db" in line
    kept = {
        "automations": ["automation", "show", "x"],
        "owners": ["owner", "list"],
        "floors": ["policy", "show", "g/a"],
    }
    if kind == "text":
        assert Path(db).read_text() == "my notes\n"
    else:
        shown = cli(*kept[kind], db=db)
        assert shown.returncode == 0 and ("alice" in shown.stdout if kind == "owners" else True), shown.stderr


def test_demo_refuses_db_it_would_ignore(tmp_path: Path) -> None:
    for argv in (["demo", "--db", str(tmp_path / "mine.db")], ["--db", str(tmp_path / "mine.db"), "demo"]):
        r = cli(*argv, cwd=tmp_path)
        line = one_line_error(r)
        assert r.returncode == 2 and "--db" in line and "--demo-db" in line
    assert list(tmp_path.iterdir()) == []  # neither the named store nor the demo's file


def test_demo_recreates_its_own_store_and_says_so(tmp_path: Path) -> None:
    first = cli("demo", cwd=tmp_path)
    assert first.returncode == 0 and "recreating" not in first.stdout
    again = cli("demo", cwd=tmp_path)
    assert again.returncode == 0 and "recreating the earlier demo's store" in again.stdout and "(exit 3)" in again.stdout


def test_serve_on_a_port_in_use_is_one_line_and_exit_2(db: str, tmp_path: Path) -> None:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        argv = [sys.executable, "-m", "floorgate", "serve", "--db", db, "--port", str(port), "--deliver-every", "0"]
        r = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert one_line_error(r) == f"floorgate: error: --port: {port} is in use on 127.0.0.1; pick another"  # no 'console on' first


def test_the_console_script_exits_with_the_command_code(tmp_path: Path) -> None:
    """The installed ``floorgate`` entry point as a real process: main() makes run()'s code the exit status."""
    script = shutil.which("floorgate", path=str(Path(sys.executable).parent))
    if script is None:
        if os.environ.get("CI"):
            pytest.fail("the floorgate console script is not installed beside the interpreter")
        pytest.skip("floorgate console script not installed (pip install -e '.[test]')")
    db = str(tmp_path / "cli.db")
    none = subprocess.run([script, "--db", db, "status", "--json"], capture_output=True, text=True, timeout=120)
    assert none.returncode == 1 and "no floorgate store" in one_line_error(none)  # a read creates nothing
    argv = [script, "--db", db, "policy", "set", "g/a", "--min-interval", "5x", "--revision", "0", "--owner-ref", "o"]
    bad = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--min-interval" in one_line_error(bad)
    assert subprocess.run([*argv[:7], "1h", *argv[8:]], capture_output=True, timeout=120).returncode == 0
    ok = subprocess.run([script, "--db", db, "status", "--json"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and len(json.loads(ok.stdout)["lanes"]) == 1, ok.stderr


def test_version_and_help_without_arguments() -> None:
    from floorgate.scheduler._version import floorgate_version

    version = run_cli("--version")
    assert version.returncode == 0 and version.stdout.strip() == f"floorgate {floorgate_version()}" != "floorgate unknown"
    bare = run_cli()
    assert bare.returncode == 0 and "usage: floorgate" in bare.stdout and "COMMAND" in bare.stdout and bare.stderr == ""


@pytest.mark.parametrize(
    "argv, field",
    [
        pytest.param(
            ["policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o", "--allow"], "--allow", id="allow"
        ),
        pytest.param(["status", "--auto", "x"], "--auto", id="auto"),
        pytest.param(["automation", "preview", "x", "--goal", "g", "--agent", "a", "--sched", "every 1h"], "--sched", id="sched"),
    ],
)
def test_option_abbreviations_are_refused(db: str, argv: list[str], field: str) -> None:
    result = run_cli(*argv, db=db)
    assert result.returncode == 2 and f"has no option {field}; did you mean {field}" in one_line_error(result)


@pytest.mark.parametrize(
    "argv, field",
    [
        pytest.param(["--timeout", "600"], "--timeout", id="bare-number-timeout"),
        pytest.param(["--timeout", "99999999999d"], "--timeout", id="huge-timeout"),
    ],
)
def test_durations_take_one_grammar(db: str, argv: list[str], field: str) -> None:
    base = ["automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h"]
    result = run_cli(*base, *argv, "--", "/bin/true", db=db)
    assert result.returncode == 2 and field in one_line_error(result)
    ok = run_cli(*base, "--timeout", "10m", "--", "/bin/true", db=db)
    assert ok.returncode == 0, ok.stderr
    shown = json.loads(run_cli("automation", "show", "x", "--json", db=db).stdout)
    assert shown["spec"]["host"]["timeout_seconds"] == 600


def test_huge_intervals_are_one_line(db: str) -> None:
    assert (
        run_cli("automation", "add", "x", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", "/bin/true", db=db).returncode == 0
    )
    for argv in (
        ["policy", "set", "g/a", "--min-interval", "99999999999d", "--revision", "0", "--owner-ref", "o"],
        ["turn", "run", "x", "--wait-eligible", "99999999999d"],
    ):
        result = run_cli(*argv, db=db)
        assert result.returncode == 2 and "cap" in one_line_error(result), argv


def test_a_closed_output_pipe_is_not_a_traceback(tmp_path: Path) -> None:
    shell = f"{shlex.quote(sys.executable)} -m floorgate demo | head -1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr


def test_demo_speaks_json(tmp_path: Path) -> None:
    result = run_cli("demo", "--json", cwd=tmp_path)
    doc = json.loads(result.stdout)
    assert result.returncode == 0 and [s["exit"] for s in doc["steps"]] == [0, 0, 0, 3, 0, 0]
    assert doc["steps"][3]["output"]["reason"] == "interval_wait"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["status"], id="status"),
        pytest.param(["policy", "show", "g/a"], id="policy-show"),
        pytest.param(["policy", "history", "g/a"], id="policy-history"),
        pytest.param(["starts", "--goal", "g"], id="starts"),
        pytest.param(["automation", "list"], id="automation-list"),
        pytest.param(["automation", "show", "x"], id="automation-show"),
        pytest.param(["mission", "list"], id="mission-list"),
        pytest.param(["settings", "show"], id="settings-show"),
        pytest.param(["turn", "show", "t"], id="turn-show"),
    ],
)
def test_read_commands_never_create_a_store(tmp_path: Path, argv: list[str]) -> None:
    result = run_cli(*argv, cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    assert result.returncode == 1 and "no floorgate store at" in one_line_error(result) and "--db" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing created


def test_a_host_never_creates_the_store_it_runs(db_url: str, tmp_path: Path) -> None:
    # `floorgate run --db /tmp/typo.db` used to create an empty store and run 0 timers, quietly.
    argv = [sys.executable, "-m", "floorgate", "run", "--db", db_url, "--state-dir", str(tmp_path / "state")]
    result = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, timeout=60, env={"PATH": os.environ["PATH"]})
    line = one_line_error(result)
    assert result.returncode == 1 and "no floorgate store at" in line and "floorgate init --db" in line, result.stderr
    assert not store_made(db_url)
    assert not (tmp_path / "state").exists()


def test_no_store_in_a_missing_directory_names_a_command_that_creates_it(tmp_path: Path) -> None:
    """``init`` makes no directory: the advice for a store whose directory is missing makes it first,
    and works as printed (here with a space in the path)."""
    db = tmp_path / "new dir" / "fg.db"
    result = run_cli("status", db=str(db), cwd=tmp_path)
    assert result.returncode == 1 and "(its directory does not exist)" in result.stderr, result.stderr
    command = result.stderr.split("create it with '", 1)[1].split("' (only", 1)[0]
    assert command.startswith("mkdir -p "), command
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["sh", "-c", command], check=True, capture_output=True, env=env, timeout=120)
    assert run_cli("status", db=str(db)).returncode == 0


@pytest.mark.parametrize("poll", ["0", "0s", "PT0S"])
def test_run_poll_of_zero_names_the_rule(db: str, poll: str) -> None:
    r = cli("run", "--poll", poll, db=db)
    assert r.returncode == 2 and f"--poll: {poll!r} is no time at all; give a duration above 0" in one_line_error(r)
    assert "0 to disable" not in r.stderr


@pytest.mark.parametrize("what", ["a-directory", "a-text-file"])
@pytest.mark.parametrize(
    "argv", [["status"], ["policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "o"]], ids=["read", "write"]
)
def test_db_that_is_no_store_file_names_db_and_the_fix(tmp_path: Path, what: str, argv: list[str]) -> None:
    target = tmp_path / "notes.txt"
    if what == "a-text-file":
        target.write_text("my notes\n")
    else:
        target = tmp_path
    r = cli(*argv, db=str(target), cwd=tmp_path)
    line = one_line_error(r)
    assert r.returncode == 2 and line.startswith("floorgate: error: --db: ")
    assert ("is a directory" in line and "floorgate.db" in line) if what == "a-directory" else "is not a SQLite database" in line
    if what == "a-text-file":
        assert target.read_text() == "my notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == (["notes.txt"] if what == "a-text-file" else [])


def test_a_hook_never_creates_a_store_it_blocks(tmp_path: Path) -> None:
    payload = json.dumps({"session_id": "s", "prompt": "p"})
    args = ["hook", "user-prompt-submit", "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic"]
    result = run_cli(*args, "--db", str(tmp_path / "absent.db"), cwd=tmp_path, stdin=payload)
    assert result.returncode == 2 and "no floorgate store at" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["stauts"], "'stauts' is not a command; did you mean 'status'?"),
        (["policy", "sett", "g"], "'sett' is not an action; did you mean 'set'?"),
        (
            ["policy", "set", "g", "--revison", "1", "--min-interval", "1d"],
            "floorgate policy set has no option --revison; did you mean --revision?",
        ),
        (["status", "--jsn"], "floorgate status has no option --jsn; did you mean --json?"),
        (["policy", "set", "g", "--revision", "1", "--owner-ref", "o", "--min-interval", "-5m"], "written --min-interval=VALUE"),
    ],
    ids=["command-typo", "action-typo", "option-typo-before-required", "option-typo", "negative-looking-value"],
)
def test_a_typo_is_one_line_naming_the_nearest_right_word(db: str, argv: list[str], said: str) -> None:
    r = cli(*argv, "--db", db)
    assert r.returncode == 2 and said in one_line_error(r) and r.stdout == "", r


def test_a_value_that_starts_with_dashes_is_a_value_not_a_typo(db: str) -> None:
    r = cli("admit", "--goal", "g", "--agent", "a", "--manual-reason", "--urgent fix", "--json", "--db", db)
    assert r.returncode == 0 and json.loads(r.stdout)["admitted"] is True, r
    version = cli("--version", "status")
    assert version.returncode == 0 and version.stdout.startswith("floorgate "), version


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        pytest.param(["admit", "--goal", "g", "--agent", "a", "--manual-reason", ""], "--manual-reason", id="manual-reason"),
        pytest.param(["admit", "--goal", "g", "--agent", "a", "--turn", "bad turn"], "--turn", id="turn-id-as---turn"),
        pytest.param(["admit", "--goal", "g h", "--agent", "a"], "--goal", id="goal"),
        pytest.param(["admit", "--goal", "g", "--agent=a b"], "--agent", id="an-equals-form"),
    ],
)
def test_a_refused_value_names_the_flag_it_was_given_by(sqlite_db: str, argv: list[str], flag: str) -> None:
    r = run_cli(*argv, db=sqlite_db)
    assert r.returncode == 2 and one_line_error(r).startswith(f"floorgate: error: {flag}: "), r.stderr
