"""``floorgate apply`` and ``export`` on both backends: a dry run prints the diff and writes nothing
(the whole store dumped before and after), apply makes the store match and re-running it changes
nothing, export round-trips, a reduction needs --allow-reduction, one bad object applies nothing
(every problem reported with its line), and each object's write is a compare-and-set."""

from __future__ import annotations

import json
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from basics import DAY, raw_sql
from hostile import STATE_TABLES

from floorgate.admission import AutomationConflict, CatchUp, FixedClock, InvalidInput, Provenance, Store, WhenDenied
from floorgate.admission.events import Events
from floorgate.scheduler.app import _fleet_toml as fleet_toml
from floorgate.scheduler.app.fleet import Action, FleetService
from floorgate.scheduler.app.root import Floorgate
from floorgate.scheduler.app.rule_writer import Writer

from cli import run_cli
from helpers import add_automation, floor

PY = sys.executable
FILE = f"""
[[automation]]
id = "nightly"
goal = "g"
agent = "a"
schedule = "DTSTART:20261201T090000Z RRULE:FREQ=DAILY"
command = ["{PY}", "-c", "pass"]
labels = {{ team = "search" }}
external_id = "fleet-1"

[[automation]]
id = "hourly"
goal = "g"
agent = "b"
schedule = "DTSTART:20261201T090000Z RRULE:FREQ=HOURLY"
command = ["{PY}", "-c", "pass"]
timeout = "2m"
when_denied = "skip"
hold_after = 3
catch_up = "latest"
catch_up_window = "2h"

[[floor]]
scope = "g/a"
min_interval = "2d"
compute = {{ max_turns = 40 }}

[[webhook]]
url = "http://127.0.0.1:9/hook"
events = ["ask_pending", "host_lost"]
"""


def dump(store: Store) -> dict[str, list[tuple]]:  # type: ignore[type-arg]
    """Every row of every table, in a stable order."""
    return {t.name: sorted(map(repr, raw_sql(store, f"SELECT * FROM {t.name}"))) for t in STATE_TABLES}  # type: ignore[misc]


def fleet(store: Store, clock: FixedClock) -> FleetService:
    return FleetService(Floorgate(store, clock=clock))


def _seed(store: Store, clock: FixedClock) -> None:
    add_automation(store, clock, "nightly")
    add_automation(store, clock, "gone", goal="g", agent="c")
    floor(store, clock, "g/a", DAY)
    Events(store, clock).add_webhook("http://127.0.0.1:9/old", "ask_pending")


def test_dry_run_prints_the_diff_and_writes_nothing(store: Store, db_url: str, tmp_path: Path, clock: FixedClock) -> None:
    _seed(store, clock)
    (tmp_path / "fleet.toml").write_text(FILE)
    before = dump(store)
    r = run_cli("apply", "-f", str(tmp_path / "fleet.toml"), "--dry-run", "--prune", "--json", db=db_url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    steps = {(s["kind"], s["name"]): s for s in json.loads(r.stdout)["steps"]}
    assert {k: s["action"] for k, s in steps.items()} == {
        ("automation", "nightly"): "change",
        ("automation", "hourly"): "create",
        ("automation", "gone"): "remove",
        ("floor", "g/a"): "change",
        ("webhook", "http://127.0.0.1:9/hook"): "create",
        ("webhook", "http://127.0.0.1:9/old"): "remove",
    }
    assert any(c.startswith("labels:") for c in steps[("automation", "nightly")]["changes"])
    assert steps[("floor", "g/a")]["line"] == 23
    assert dump(store) == before
    text = run_cli("apply", "-f", str(tmp_path / "fleet.toml"), "--dry-run", db=db_url, cwd=tmp_path)
    assert "+ automation hourly (create)" in text.stdout and "dry run: nothing written" in text.stdout
    assert dump(store) == before


def test_apply_makes_the_store_match_rerunning_changes_nothing_and_export_round_trips(
    store: Store, db_url: str, tmp_path: Path, clock: FixedClock
) -> None:
    _seed(store, clock)
    (tmp_path / "fleet.toml").write_text(FILE)
    r = run_cli("apply", "-f", "fleet.toml", "--prune", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "applied 6 change(s)" in r.stdout and "signing secret fgs_" in r.stdout
    fg = Floorgate(store, clock=clock)
    found, _ = fg.automations.repo.scan()
    assert sorted(found) == ["hourly", "nightly"]
    assert found["nightly"].spec.labels == (("team", "search"),) and found["nightly"].spec.external_id == "fleet-1"
    assert found["hourly"].spec.host is not None and found["hourly"].spec.host.timeout_seconds == 120
    assert found["hourly"].spec.when_denied is WhenDenied.SKIP and found["nightly"].spec.when_denied is WhenDenied.WAIT
    hourly = found["hourly"].spec  # the failure and missed-run policy, as the file set it
    assert (hourly.hold_after, hourly.catch_up, hourly.catch_up_window) == (3, CatchUp.LATEST, timedelta(hours=2))
    assert (found["nightly"].spec.hold_after, found["nightly"].spec.catch_up, found["nightly"].spec.catch_up_window) == (None, None, None)
    rule = fg.policies.list()[0]
    assert rule.min_interval == 2 * DAY and rule.compute is not None and rule.compute.doc() == {"max_turns": 40}
    assert [w.url for w in fg.notify.webhooks()] == ["http://127.0.0.1:9/hook"]
    shown = run_cli("automation", "show", "nightly", db=db_url, cwd=tmp_path)
    assert "fleet:          external id fleet-1; labels team=search" in shown.stdout, shown.stdout

    after = dump(store)
    again = run_cli("apply", "-f", "fleet.toml", "--prune", "--owner-ref", "alice", "--json", db=db_url, cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["applied"] == 0
    assert dump(store) == after  # re-running changes nothing

    exported = run_cli("export", "-o", "state.toml", db=db_url, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert (tmp_path / "state.toml").stat().st_mode & 0o077 == 0
    state = (tmp_path / "state.toml").read_text()
    assert "hold_after = 3" in state and 'catch_up = "latest"' in state and 'catch_up_window = "2h"' in state, state
    plan = run_cli("apply", "-f", "state.toml", "--dry-run", "--prune", "--json", db=db_url, cwd=tmp_path)
    assert {s["action"] for s in json.loads(plan.stdout)["steps"]} == {"unchanged"}, plan.stdout
    assert dump(store) == after


def test_a_reduction_in_the_file_needs_allow_reduction(store: Store, db_url: str, tmp_path: Path, clock: FixedClock) -> None:
    floor(store, clock, "g/a", 3 * DAY)
    (tmp_path / "f.toml").write_text('[[floor]]\nscope = "g/a"\nmin_interval = "1d"\n')
    before = dump(store)
    r = run_cli("apply", "-f", "f.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and "f.toml:3: floor g/a: min_interval: floor 3d -> 1d is a reduction; pass --allow-reduction" in r.stderr
    assert dump(store) == before
    ok = run_cli("apply", "-f", "f.toml", "--owner-ref", "alice", "--allow-reduction", db=db_url, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert Floorgate(store, clock=clock).policies.list()[0].min_interval == DAY


def test_one_bad_object_applies_nothing_and_every_problem_names_its_line(
    store: Store, db_url: str, tmp_path: Path, clock: FixedClock
) -> None:
    bad = FILE.replace('schedule = "DTSTART:20261201T090000Z RRULE:FREQ=HOURLY"', 'schedule = "whenever"')
    bad = bad.replace('min_interval = "2d"', 'min_interval = "soon"') + '\n[[webhook]]\nurl = "ftp://x"\nevents = ["ask_pending"]\n'
    (tmp_path / "bad.toml").write_text(bad)
    before = dump(store)
    r = run_cli("apply", "-f", "bad.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2
    errors = r.stderr.strip().splitlines()
    assert [e.split(": ")[2] for e in errors] == ["bad.toml:15", "bad.toml:25", "bad.toml:33"], r.stderr  # each field's line
    assert "automation hourly: schedule:" in errors[0] and "floor g/a: min_interval" in errors[1] and "webhook ftp://x: url" in errors[2]
    assert dump(store) == before


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        pytest.param("[[automation]\n", 1, "is not valid TOML", id="syntax"),
        pytest.param('x = 1\n[[budget]]\nscope = "g"\n', 1, "[[x]] is not a section", id="unknown-section"),
        pytest.param('[[automation]]\ngoal = "g"\n', 1, "id:", id="automation-without-id"),
        pytest.param('[[floor]]\nscope = "g"\nmin_intervl = "1d"\n', 3, "floor g: min_intervl: is not a field of a floor", id="floor-unknown-field"),
        pytest.param('[[floor]]\nmin_interval = "1d"\n', 1, "floor: scope: give a target", id="floor-without-scope"),
        pytest.param('[[webhook]]\nurl = "https://h.example"\nevent = []\n', 3, "webhook https://h.example: event: is not a field of a webhook",
                     id="webhook-unknown-field"),
        pytest.param('[[webhook]]\nurl = 3\n', 2, "webhook: url: give the URL", id="webhook-url-not-text"),
        pytest.param('[[floor]]\nscope = "g"\nmin_interval = "1d"\n\n[[floor]]\nscope = "g"\nmin_interval = "2d"\n', 5,
                     "also described at line 1", id="duplicate"),
    ],
)  # fmt: skip
def test_file_level_problems(store: Store, db_url: str, tmp_path: Path, text: str, line: int, words: str) -> None:
    (tmp_path / "f.toml").write_text(text)
    r = run_cli("apply", "-f", "f.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and f"f.toml:{line}: " in r.stderr and words in r.stderr, r.stderr


_KEYED = """# header comment
[[automation]]
id = "a"
"quoted key" = 1
host.argv = ["x"]

[automation.labels]
schedule = "not the table's own"

[[automation]]
id = "b"
schedule = "daily"
"""


@pytest.mark.parametrize(
    ("table", "field", "line"),
    [
        pytest.param(0, "id", 3, id="a-key"),
        pytest.param(0, "quoted key", 4, id="a-quoted-key"),
        pytest.param(0, "host.argv", 5, id="a-dotted-key-under-its-first-part"),
        pytest.param(0, "schedule", 2, id="a-sub-tables-key-is-not-the-tables-own"),
        pytest.param(1, "schedule", 12, id="the-second-tables-key"),
        pytest.param(1, "timeout", 10, id="a-missing-field-the-header"),
    ],
)
def test_a_problem_is_placed_on_its_fields_line(table: int, field: str, line: int) -> None:
    parsed = fleet_toml.read(_KEYED, ("automation",))
    assert parsed.tables["automation"][table].line_of(InvalidInput(field, "bad")) == line


def test_each_write_is_a_compare_and_set_on_what_the_plan_read(store: Store, tmp_path: Path, clock: FixedClock) -> None:
    add_automation(store, clock, "nightly")
    service = fleet(store, clock)
    plan = service.plan(FILE, base_dir=tmp_path)
    assert {(s.name, s.action) for s in plan.steps if s.kind == "automation"} == {("nightly", Action.CHANGE), ("hourly", Action.CREATE)}
    fg = Floorgate(store, clock=clock)
    current = fg.automations.get("nightly")
    fg.automations.repo.edit("nightly", current.spec.model_copy(update={"model": "someone-else"}))  # lands after the plan read
    with pytest.raises(AutomationConflict):
        service.apply(plan, Writer("alice", Provenance.ASSERTED, False))
    assert fg.automations.get("nightly").spec.model == "someone-else"  # the concurrent change stands


@pytest.mark.parametrize("name", ["API_KEY=secret", "1ST", "HAS SPACE", ""], ids=["with-a-value", "leading-digit", "space", "empty"])
def test_an_env_entry_that_is_not_a_variable_name_is_refused_naming_its_line(
    store: Store, db_url: str, tmp_path: Path, clock: FixedClock, name: str
) -> None:
    bad = FILE.replace('catch_up_window = "2h"', f'catch_up_window = "2h"\nenv = ["HOME", "{name}"]')
    (tmp_path / "env.toml").write_text(bad)
    before = dump(store)
    r = run_cli("apply", "-f", "env.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (error,) = r.stderr.strip().splitlines()
    assert "automation hourly: env:" in error and f"{name!r} is not an environment variable's name" in error, error
    assert dump(store) == before


def test_export_to_a_missing_directory_is_refused_and_makes_none(store: Store, db_url: str, tmp_path: Path) -> None:
    r = run_cli("export", "-o", "typo/state.toml", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (error,) = r.stderr.strip().splitlines()
    assert "--output" in error and f"{tmp_path / 'typo'} does not exist" in error, error
    assert not (tmp_path / "typo").exists()
    (tmp_path / "kept").mkdir()
    assert run_cli("export", "-o", "kept/state.toml", db=db_url, cwd=tmp_path).returncode == 0
    assert (tmp_path / "kept" / "state.toml").stat().st_mode & 0o777 == 0o600


def _states(store: Store, clock: FixedClock) -> dict[str, tuple[str, str | None]]:
    found, _ = Floorgate(store, clock=clock).automations.repo.scan()
    return {aid: (a.state.value, a.state_note) for aid, a in sorted(found.items())}


def test_a_pause_and_a_hold_travel_with_the_fleet_file_and_an_apply_never_resumes_unasked(
    store: Store, db_url: str, tmp_path: Path, clock: FixedClock
) -> None:
    from floorgate.admission import AutomationState, HoldKind

    for aid in ("quiet", "failing", "busy"):
        add_automation(store, clock, aid)
    fg = Floorgate(store, clock=clock)
    fg.automations.pause("quiet", "a quiet week")
    fg.automations.repo.set_state("failing", AutomationState.HELD, "3 turns failed", HoldKind.FAILING)
    assert run_cli("export", "-o", "state.toml", db=db_url, cwd=tmp_path).returncode == 0
    state = (tmp_path / "state.toml").read_text()
    assert 'pause_note = "a quiet week"' in state and 'pause_note = "held by floorgate (failing): 3 turns failed"' in state, state
    assert state.count("paused = true") == 2
    plan = run_cli("apply", "-f", "state.toml", "--dry-run", "--json", db=db_url, cwd=tmp_path)
    assert {s["action"] for s in json.loads(plan.stdout)["steps"]} == {"unchanged"}, plan.stdout  # a hold is a stop already

    for aid in ("quiet", "failing", "busy"):  # the file made into a store again: nothing it stopped starts
        fg.automations.remove(aid)
    applied = run_cli("apply", "-f", "state.toml", db=db_url, cwd=tmp_path)
    assert applied.returncode == 0, applied.stderr
    assert _states(store, clock) == {
        "busy": ("active", None),
        "failing": ("paused", "held by floorgate (failing): 3 turns failed"),
        "quiet": ("paused", "a quiet week"),
    }

    unsaid = state.replace("paused = true\n", "").replace('pause_note = "a quiet week"\n', "")
    (tmp_path / "unsaid.toml").write_text(unsaid.replace('pause_note = "held by floorgate (failing): 3 turns failed"\n', ""))
    plan = run_cli("apply", "-f", "unsaid.toml", "--dry-run", "--json", db=db_url, cwd=tmp_path)
    assert {s["action"] for s in json.loads(plan.stdout)["steps"]} == {"unchanged"}, plan.stdout  # not said: left paused

    (tmp_path / "resume.toml").write_text(state.replace('paused = true\npause_note = "a quiet week"', "paused = false"))
    resumed = run_cli("apply", "-f", "resume.toml", "--json", db=db_url, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    changed = [s for s in json.loads(resumed.stdout)["steps"] if s["action"] == "change"]
    assert [(s["name"], s["changes"]) for s in changed] == [("quiet", ["paused: true -> false"])]
    assert _states(store, clock)["quiet"] == ("active", None)


@pytest.mark.parametrize(
    ("fields", "named"),
    [('paused = "yes"', "paused"), ('pause_note = "why"', "pause_note"), ("paused = true\npause_note = 7", "pause_note")],
    ids=["paused-not-a-bool", "note-without-pause", "note-not-text"],
)
def test_a_bad_pause_field_is_a_problem_naming_it(store: Store, db_url: str, tmp_path: Path, fields: str, named: str) -> None:
    table = f'[[automation]]\nid = "x"\ngoal = "g"\nagent = "a"\nschedule = "hourly"\ncommand = ["{PY}", "-c", "pass"]\n{fields}\n'
    (tmp_path / "f.toml").write_text(table)
    r = run_cli("apply", "-f", "f.toml", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and named in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert Floorgate(store).automations.repo.scan()[0] == {}


@pytest.mark.parametrize("switch", ["pause", "resume"])
def test_a_pause_or_resume_at_a_revision_refuses_a_change_that_lands_before_its_write(
    store: Store, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, switch: str
) -> None:
    """What ``apply`` relies on for a pause it carries: the revision check and the write are one
    statement, so a change landing after the check (here, right after it) is a conflict, with
    nothing written (a resume's failure streak not cleared either)."""
    add_automation(store, clock, "nightly")
    service = Floorgate(store, clock=clock).automations
    if switch == "resume":
        service.pause("nightly", "by hand")
        streak = "INSERT INTO fg_wake_state (automation_id, backoff_step, failures, updated_at_us) VALUES ('nightly', 2, 3, 1)"
        raw_sql(store, streak)  # a failure streak with its backoff, which a resume ends
    revision = service.get("nightly").revision
    checked = service._at

    def then_someone_edits(automation_id: str, expected: int | None) -> object:
        found = checked(automation_id, expected)
        service.repo.edit(automation_id, found.spec.model_copy(update={"model": "someone-else"}))
        return found

    monkeypatch.setattr(service, "_at", then_someone_edits)
    before = dump(store)
    with pytest.raises(AutomationConflict):
        if switch == "pause":
            service.pause("nightly", "from the fleet file", expected_revision=revision)
        else:
            service.resume("nightly", expected_revision=revision)
    after = dump(store)
    assert service.get("nightly").spec.model == "someone-else"
    assert service.get("nightly").state.value == ("paused" if switch == "resume" else "active")
    assert after["fg_wake_state"] == before["fg_wake_state"]  # a streak stays as it was
