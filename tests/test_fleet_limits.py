"""Limits and prices in fleet files, on both backends: ``apply`` sets limit-only rules, limits on
floors and model prices; ``export`` writes them and applying the export changes nothing; a
loosening needs --allow-reduction; a bad limit or price field is one line naming its line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from basics import DAY
from test_fleet import dump

from floorgate.admission import FixedClock, Scope, Store
from floorgate.scheduler.app.root import Floorgate

from cli import run_cli

FILE = """
[[floor]]
scope = "g"
max_starts = 10
starts_per = "1h"
budget_usd = "20.5"
budget_per = "day@Europe/Berlin"
across_agents = true

[[floor]]
scope = "g/a"
min_interval = "1d"
max_starts = 3
starts_per = "1d"
budget_tokens = "2M"
budget_per = "week@UTC"
estimate_tokens = "40k"

[[price]]
model = "claude-sonnet"
usd_per_mtok = "3.25"
"""


def test_limits_and_prices_apply_export_and_round_trip(store: Store, db_url: str, tmp_path: Path, clock: FixedClock) -> None:
    (tmp_path / "fleet.toml").write_text(FILE)
    r = run_cli("apply", "-f", "fleet.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    fg = Floorgate(store, clock=clock)
    goal = fg.policies.get(Scope.parse("g"))
    agent = fg.policies.get(Scope.parse("g/a"))
    assert goal is not None and not goal.active  # a limit-only rule: no floor
    assert goal.limits.doc() == {
        "max_starts": 10, "starts_window": "1h", "budget_tokens": None, "budget_usd": "20.5",
        "budget_window": "day@Europe/Berlin", "estimate_tokens": None, "across_agents": True, "alert_at": None,
    }  # fmt: skip
    assert agent is not None and agent.min_interval == DAY
    assert agent.limits.doc() == {
        "max_starts": 3, "starts_window": "1d", "budget_tokens": 2_000_000, "budget_usd": None,
        "budget_window": "week@UTC", "estimate_tokens": 40_000, "across_agents": False, "alert_at": None,
    }  # fmt: skip
    [price] = fg.prices.list()
    assert (price.model, price.usd_per_mtok_micros) == ("claude-sonnet", 3_250_000)

    after = dump(store)
    again = run_cli("apply", "-f", "fleet.toml", "--owner-ref", "alice", "--json", db=db_url, cwd=tmp_path)
    assert again.returncode == 0 and json.loads(again.stdout)["applied"] == 0, again.stdout
    assert dump(store) == after

    exported = run_cli("export", "-o", "state.toml", db=db_url, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    state = (tmp_path / "state.toml").read_text()
    assert "[[price]]" in state and 'budget_per = "day@Europe/Berlin"' in state and "across_agents = true" in state, state
    plan = run_cli("apply", "-f", "state.toml", "--dry-run", "--prune", "--json", db=db_url, cwd=tmp_path)
    assert {s["action"] for s in json.loads(plan.stdout)["steps"]} == {"unchanged"}, plan.stdout
    assert dump(store) == after


def test_a_loosened_limit_or_lowered_price_needs_allow_reduction(store: Store, db_url: str, tmp_path: Path) -> None:
    (tmp_path / "fleet.toml").write_text(FILE)
    assert run_cli("apply", "-f", "fleet.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path).returncode == 0
    looser = FILE.replace("max_starts = 3", "max_starts = 5").replace('usd_per_mtok = "3.25"', 'usd_per_mtok = "1"')
    (tmp_path / "looser.toml").write_text(looser)
    before = dump(store)
    r = run_cli("apply", "-f", "looser.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    errors = r.stderr.strip().splitlines()
    assert "looser.toml:10: floor g/a: limits: max_starts 3 -> 5 is a loosening; pass --allow-reduction" in errors[0], r.stderr
    assert "looser.toml:21: price claude-sonnet: usd_per_mtok:" in errors[1], r.stderr
    assert "lowering the price of claude-sonnet ($3.25 -> $1.00)" in errors[1], r.stderr  # dollars, not raw decimals
    assert dump(store) == before
    ok = run_cli("apply", "-f", "looser.toml", "--owner-ref", "alice", "--allow-reduction", db=db_url, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr


def test_a_plans_diff_shows_values_as_json_never_python_reprs(store: Store, db_url: str, tmp_path: Path) -> None:
    (tmp_path / "fleet.toml").write_text(FILE)
    plan = run_cli("apply", "-f", "fleet.toml", "--dry-run", db=db_url, cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert '"estimate_tokens": 40000, "max_starts": 3, "starts_per": "1d"}' in plan.stdout, plan.stdout
    assert 'usd_per_mtok: (unset) -> "3.25"' in plan.stdout, plan.stdout
    assert "None" not in plan.stdout and "'" not in plan.stdout, plan.stdout


def test_a_loosened_window_is_named_by_the_files_own_key(store: Store, db_url: str, tmp_path: Path) -> None:
    (tmp_path / "fleet.toml").write_text(FILE)
    assert run_cli("apply", "-f", "fleet.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path).returncode == 0
    (tmp_path / "shorter.toml").write_text(FILE.replace('starts_per = "1d"', 'starts_per = "12h"'))
    r = run_cli("apply", "-f", "shorter.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and "floor g/a: limits: starts_per 1d -> 12h is a loosening" in r.stderr, r.stderr
    assert "starts_window" not in r.stderr and "--max-starts" not in r.stderr  # the file's key, not the store's nor the CLI's


@pytest.mark.parametrize(
    ("table", "words", "line"),
    [
        pytest.param("max_starts = 3\n", "floor g: starts_per: max_starts and starts_per go together", 3, id="count-without-window"),
        pytest.param('max_starts = -1\nstarts_per = "1d"\n', "floor g: max_starts:", 5, id="negative-count"),
        pytest.param('budget_usd = 2.5\nbudget_per = "1d"\n', "floor g: budget_usd: give the amount as text", 5, id="usd-as-float"),
        pytest.param('budget_tokens = "2m"\nbudget_per = "1d"\n', "floor g: budget_tokens:", 5, id="lowercase-m"),
        pytest.param('budget_tokens = "2M"\nbudget_per = "fortnight@UTC"\n', "floor g: budget_per:", 6, id="bad-window"),
        pytest.param(
            'across_agents = "yes"\nmax_starts = 1\nstarts_per = "1d"\n',
            "floor g: across_agents: give true or false",
            5,
            id="across-not-bool",
        ),
        pytest.param('max_starts = 1\nstarts_per = "1d"\nalert_at = [0, 50]\n', "floor g: alert_at: '0' is not", 7, id="alert-zero"),
        pytest.param(
            'max_starts = 1\nstarts_per = "1d"\nalert_at = [50, 50]\n', "floor g: alert_at: 50 is given twice", 7, id="alert-twice"
        ),
        pytest.param('max_starts = 1\nstarts_per = "1d"\nalert_at = [101]\n', "floor g: alert_at: '101' is not", 7, id="alert-over-100"),
        pytest.param(
            'max_starts = 1\nstarts_per = "1d"\nalert_at = [true]\n', "floor g: alert_at: give whole percentages", 7, id="alert-bool"
        ),
        pytest.param(
            'max_starts = 1\nstarts_per = "1d"\nalert_at = []\n', "floor g: alert_at: give whole percentages", 7, id="alert-empty"
        ),
        pytest.param(
            'max_starts = 1\nstarts_per = "1d"\nalert_at = 50.5\n', "floor g: alert_at: give whole percentages", 7, id="alert-float"
        ),
    ],
)
def test_a_bad_limit_field_is_one_line_with_its_line_and_nothing_written(
    store: Store, db_url: str, tmp_path: Path, table: str, words: str, line: int
) -> None:
    """Each problem names the line of its field (the table's header when the field is missing)."""
    (tmp_path / "bad.toml").write_text(f'# limits\n\n[[floor]]\nscope = "g"\n{table}')
    before = dump(store)
    r = run_cli("apply", "-f", "bad.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    [said] = r.stderr.strip().splitlines()
    assert f"bad.toml:{line}: " in said and words in said, said
    assert dump(store) == before


def test_a_bad_price_is_one_line_with_its_line(store: Store, db_url: str, tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text('[[price]]\nmodel = "m"\nusd_per_mtok = "-3"\n')
    r = run_cli("apply", "-f", "bad.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2
    [line] = r.stderr.strip().splitlines()
    assert "bad.toml:3: price m: usd_per_mtok:" in line, line  # the field's line


def test_alert_at_applies_exports_and_round_trips(store: Store, db_url: str, tmp_path: Path, clock: FixedClock) -> None:
    (tmp_path / "fleet.toml").write_text(FILE.replace('estimate_tokens = "40k"', 'estimate_tokens = "40k"\nalert_at = [90, 25]'))
    r = run_cli("apply", "-f", "fleet.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    agent = Floorgate(store, clock=clock).policies.get(Scope.parse("g/a"))
    assert agent is not None and agent.limits.alert_at == (25, 90)
    after = dump(store)
    exported = run_cli("export", "-o", "state.toml", db=db_url, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "alert_at = [25, 90]" in (tmp_path / "state.toml").read_text()
    plan = run_cli("apply", "-f", "state.toml", "--dry-run", "--prune", "--json", db=db_url, cwd=tmp_path)
    assert {s["action"] for s in json.loads(plan.stdout)["steps"]} == {"unchanged"}, plan.stdout
    # The default percentages are stored as the default: back to them is one change, then none.
    (tmp_path / "default.toml").write_text(FILE.replace('estimate_tokens = "40k"', 'estimate_tokens = "40k"\nalert_at = "50,80,100"'))
    assert run_cli("apply", "-f", "default.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path).returncode == 0
    agent = Floorgate(store, clock=clock).policies.get(Scope.parse("g/a"))
    assert agent is not None and agent.limits.alert_at is None and dump(store) != after
    again = run_cli("apply", "-f", "default.toml", "--owner-ref", "alice", "--json", db=db_url, cwd=tmp_path)
    assert json.loads(again.stdout)["applied"] == 0, again.stdout


@pytest.mark.parametrize("scope", [pytest.param("g/a", id="an-agent"), pytest.param("g/a/x", id="an-automation")])
def test_across_agents_on_a_narrower_scope_is_refused_as_policy_set_refuses_it(
    store: Store, db_url: str, tmp_path: Path, scope: str
) -> None:
    """A rule below a goal never counts across agents: the file saying so is refused (it was
    accepted, dropped on write, and planned as a change at every apply)."""
    (tmp_path / "bad.toml").write_text(f'[[floor]]\nscope = "{scope}"\nmin_interval = "1h"\nacross_agents = true\n')
    before = dump(store)
    r = run_cli("apply", "-f", "bad.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    [line] = r.stderr.strip().splitlines()
    assert f"bad.toml:4: floor {scope}: across_agents: only a goal rule can count across agents" in line, line
    assert dump(store) == before


def test_a_dry_run_with_a_loosening_still_shows_its_plan(store: Store, db_url: str, tmp_path: Path) -> None:
    """The plan, then the reduction named with the flag it needs (exit 2: applying it as it is would be refused)."""
    (tmp_path / "f.toml").write_text('[[floor]]\nscope = "g"\nmax_starts = 3\nstarts_per = "1d"\n')
    assert run_cli("apply", "-f", "f.toml", "--owner-ref", "alice", db=db_url, cwd=tmp_path).returncode == 0
    (tmp_path / "f.toml").write_text('[[floor]]\nscope = "g"\nmax_starts = 5\nstarts_per = "1d"\n')
    before = dump(store)
    r = run_cli("apply", "-f", "f.toml", "--dry-run", db=db_url, cwd=tmp_path)
    assert r.returncode == 2
    assert "~ floor g (change)" in r.stdout and "max_starts" in r.stdout, r.stdout
    assert "pass --allow-reduction to apply it" in r.stderr
    doc = json.loads(run_cli("apply", "-f", "f.toml", "--dry-run", "--json", db=db_url, cwd=tmp_path).stdout)
    assert [s["action"] for s in doc["steps"]] == ["change"] and doc["problems"]
    assert dump(store) == before
