"""The list commands' answers: a JSON list with --json, else a table, or one line naming what to
add when there is nothing (``Context.emit_table``), on both backends."""

from __future__ import annotations

import json

import pytest

from floorgate.admission import Store

from cli import run_cli


@pytest.mark.parametrize(
    ("argv", "key", "empty"),
    [
        pytest.param(("mission", "list"), "missions", "no missions", id="missions"),
        pytest.param(
            ("notify", "list"),
            "webhooks",
            "no webhooks (add one: floorgate notify add URL --events ask_pending,automation_held)",
            id="webhooks",
        ),
        pytest.param(("owner", "list"), "principals", "no principals (add one: floorgate owner add NAME)", id="principals"),
    ],
)
def test_an_empty_list_is_one_line_naming_what_to_add_and_an_empty_json_list(
    store: Store, argv: tuple[str, ...], key: str, empty: str
) -> None:
    text = run_cli(*argv, db=store.url)
    assert (text.returncode, text.stdout) == (0, empty + "\n"), text.stderr
    doc = run_cli(*argv, "--json", db=store.url)
    assert doc.returncode == 0 and json.loads(doc.stdout) == {key: []}


def test_a_list_is_a_table_with_a_row_per_item_and_the_same_items_in_json(store: Store) -> None:
    for name in ("ops-lead", "auditor"):
        assert run_cli("owner", "add", name, "--role", "viewer", db=store.url).returncode == 0
    lines = run_cli("owner", "list", db=store.url).stdout.splitlines()
    assert lines[0].split() == ["NAME", "ROLE", "CREATED", "REVOKED"]
    assert sorted(line.split()[:2] for line in lines[1:]) == [["auditor", "viewer"], ["ops-lead", "viewer"]]
    doc = json.loads(run_cli("owner", "list", "--json", db=store.url).stdout)
    assert sorted(p["name"] for p in doc["principals"]) == ["auditor", "ops-lead"]
