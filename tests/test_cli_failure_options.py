"""The failure and missed-run options as a user types them: one grammar, one-line errors, exit 2,
nothing half written."""

from __future__ import annotations

import json
import sys

import pytest

from test_cli import cli, one_line_error


@pytest.fixture
def db(sqlite_db: str) -> str:
    return sqlite_db


def _add(db: str, *options: str):  # type: ignore[no-untyped-def]
    return cli(
        "automation",
        "add",
        "x",
        "--goal",
        "g",
        "--agent",
        "a",
        "--schedule",
        "every 1h",
        *options,
        "--",
        sys.executable,
        "-c",
        "pass",
        db=db,
    )


def test_the_options_are_stored_shown_and_kept_by_an_edit(db: str) -> None:
    added = _add(db, "--hold-after", "3", "--catch-up", "latest", "--catch-up-window", "2h", "--json")
    assert added.returncode == 0, added.stderr
    doc = json.loads(added.stdout)
    assert (doc["hold_after"], doc["catch_up"], doc["catch_up_window"]) == (3, "latest", "2h")
    edited = json.loads(cli("automation", "edit", "x", "--timeout", "30s", "--json", db=db).stdout)
    assert (edited["hold_after"], edited["catch_up"], edited["catch_up_window"]) == (3, "latest", "2h")
    edited = json.loads(cli("automation", "edit", "x", "--hold-after", "0", "--catch-up", "skip", "--json", db=db).stdout)
    assert (edited["hold_after"], edited["catch_up"]) == (0, "skip")


def test_the_default_hold_is_after_five_failures(db: str) -> None:
    assert json.loads(_add(db, "--json").stdout)["hold_after"] == 5


@pytest.mark.parametrize(
    ("options", "field"),
    [
        pytest.param(("--hold-after", "-1"), "--hold-after", id="negative"),
        pytest.param(("--hold-after", "five"), "--hold-after", id="word"),
        pytest.param(("--hold-after", "1001"), "--hold-after", id="too-many"),
        pytest.param(("--catch-up-window", "8d"), "--catch-up-window", id="window-too-long"),
        pytest.param(("--catch-up-window", "soon"), "--catch-up-window", id="window-garbage"),
        pytest.param(("--catch-up", "latest", "--catch-up-window", "0"), "--catch-up-window", id="latest-without-window"),
        pytest.param(("--catch-up", "sometimes"), "--catch-up", id="catch-up-unknown"),
    ],
)
def test_bad_values_are_one_line_exit_2_and_nothing_is_written(db: str, options: tuple[str, ...], field: str) -> None:
    bad = _add(db, *options)
    assert bad.returncode == 2 and field in one_line_error(bad), bad.stderr
    assert json.loads(cli("automation", "list", "--json", db=db).stdout)["automations"] == []
    assert _add(db).returncode == 0
    before = cli("automation", "show", "x", "--json", db=db).stdout
    again = cli("automation", "edit", "x", *options, db=db)
    assert again.returncode == 2 and field in one_line_error(again)
    assert json.loads(cli("automation", "show", "x", "--json", db=db).stdout)["spec"] == json.loads(before)["spec"]
