"""Creating and editing an automation from the console, on both backends: the form's document is
the API's (same checks, one-line errors naming the field, nothing written on a refusal), an edit
is a compare-and-set at the revision the form read, and the live preview is the CLI's."""

from __future__ import annotations

import re
import sys

from basics import DAY, raw_sql

from floorgate.admission import FixedClock, Store

from console_kit import console, post_form, sign_in
from helpers import add_automation, floor

COMMAND = f"{sys.executable}\n-c\nprint('hi')"


def _new(csrf: str, **changes: str) -> dict[str, str]:
    form = {"csrf": csrf, "automation": "morning", "goal": "g", "agent": "a", "schedule": "daily at 09:00 UTC", "command": COMMAND}
    form.update(changes)
    return form


def test_create_from_the_form_stores_the_document_and_redirects_to_its_page(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    csrf = sign_in(c)
    assert 'id="automation-form"' in c.client.get("/new-automation").text
    first, page = post_form(c, "/new-automation", _new(csrf, timeout="5m"))
    assert first.headers["location"] == "/automations/morning"
    assert "created morning" in page.text and 'data-testid="state"' in page.text
    [spec] = [a for a in c.get("/api/automations").json()["automations"] if a["automation"] == "morning"]
    assert spec["host"]["argv"] == [sys.executable, "-c", "print('hi')"] and spec["host"]["timeout_seconds"] == 300
    assert "FREQ=DAILY" in spec["schedule"]


def test_a_refused_create_names_the_field_keeps_the_draft_and_writes_nothing(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    csrf = sign_in(c)
    first, page = post_form(c, "/new-automation", _new(csrf, schedule="every blue moon"))
    assert first.headers["location"] == "/new-automation"
    assert 'id="form-error"' in page.text and "schedule" in page.text and 'data-status="422"' in page.text
    assert 'value="every blue moon"' in page.text, "what the owner typed is kept"
    assert raw_sql(store, "SELECT count(*) FROM fg_automations") == [(0,)]
    _, page = post_form(c, "/new-automation", _new(csrf, command=""))
    assert "command" in re.search(r'id="form-error"[^>]*>([^<]*)<', page.text).group(1)  # type: ignore[union-attr]
    assert raw_sql(store, "SELECT count(*) FROM fg_automations") == [(0,)]


def test_an_edit_is_a_compare_and_set_at_the_revision_the_form_read(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    csrf = sign_in(c)
    page = c.client.get("/automations/x/edit").text
    revision = re.search(r'name="revision" value="(\d+)"', page).group(1)  # type: ignore[union-attr]
    command = re.search(r'id="f-command"[^>]*>([^<]*)</textarea>', page).group(1)  # type: ignore[union-attr]
    form = {
        "csrf": csrf,
        "revision": revision,
        "goal": "g",
        "agent": "a",
        "schedule": "daily at 10:00 UTC",
        "command": command,
        "timer": "apscheduler",
    }
    _, done = post_form(c, "/automations/x/edit", form)
    assert "saved x at revision" in done.text
    # The same form again (now stale): a conflict that asks for a refresh, nothing written.
    before = raw_sql(store, "SELECT revision, schedule FROM fg_automations")
    _, stale = post_form(c, "/automations/x/edit", {**form, "schedule": "daily at 11:00 UTC"})
    assert 'data-status="409"' in stale.text and 'id="refresh"' in stale.text
    assert raw_sql(store, "SELECT revision, schedule FROM fg_automations") == before
    # Saving what is stored writes nothing.
    page = c.client.get("/automations/x/edit").text
    revision = re.search(r'name="revision" value="(\d+)"', page).group(1)  # type: ignore[union-attr]
    _, same = post_form(c, "/automations/x/edit", {**form, "revision": revision})
    assert "x: nothing changed" in same.text and raw_sql(store, "SELECT revision, schedule FROM fg_automations") == before


def test_the_live_preview_is_the_clis_preview_with_the_floor_applied(store: Store, clock: FixedClock) -> None:
    from cli import run_cli

    c = console(store, clock)
    floor(store, clock, "g/a", DAY)
    sign_in(c)
    q = {"automation": "new", "goal": "g", "agent": "a", "schedule": "every 6h", "timer": "apscheduler"}
    doc = c.client.get("/automation-preview", params=q).json()
    admitted = [f["admitted"] for f in doc["fires"]]
    assert doc["floor_seconds"] == 86400 and admitted.count(True) < len(admitted), doc
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", f["shown"]) for f in doc["fires"])
    cli = run_cli(
        "automation", "preview", "new", "--goal", "g", "--agent", "a", "--schedule", "every 6h", "--next", "8", "--json", db=store.url
    )
    assert cli.returncode == 0, cli.stderr
    import json

    assert [f["admitted"] for f in json.loads(cli.stdout)["fires"]] == admitted
    bad = c.client.get("/automation-preview", params={**q, "schedule": "every blue moon"})
    assert bad.status_code == 422 and "schedule" in bad.json()["error"]["message"]


def test_a_viewer_cannot_create_or_edit(store: Store, clock: FixedClock) -> None:
    c = console(store, clock)
    add_automation(store, clock, "x")
    csrf = sign_in(c, c.viewer)
    assert 'id="read_only"' in c.client.get("/new-automation").text and 'id="save"' not in c.client.get("/automations/x/edit").text
    _, page = post_form(c, "/new-automation", _new(csrf))
    assert 'data-status="403"' in page.text and raw_sql(store, "SELECT count(*) FROM fg_automations") == [(1,)]
