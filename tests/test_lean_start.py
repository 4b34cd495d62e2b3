"""What a command's start imports: the pre-model hook and the read commands load only what they use.

Each case runs one real command line in a fresh interpreter and lists the modules it imported
(bench/start.py measures what that costs; a test asserts the set, never a time).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from floorgate.admission import Admission, Store
from floorgate.admission.store import ENV_URL, head_revision
from floorgate.scheduler.app import owner_gate
from floorgate.scheduler.cli.main import COMMANDS, _named_modules, build_parser, run

from helpers import add_automation, floor

# The owner console's stack, the migration tool and the host runtime: no hook or read needs them.
CONSOLE = ("starlette", "uvicorn", "jinja2", "prometheus_client", "multipart", "python_multipart", "floorgate.scheduler.console")
NEVER = (
    *CONSOLE,
    "alembic",
    "mako",
    "floorgate.scheduler.runtime.host",
    "floorgate.scheduler.runtime.executor",
    "floorgate.scheduler.cli.commands.run",
)
# An admission never renders a readback: no schedules' host adapters, previews or recovery.
ADMIT_NEVER = (*NEVER, "apscheduler", "floorgate.scheduler.app.readback", "floorgate.hosts.registry", "floorgate.scheduler.views.present")
# --version reads no store and parses no command.
VERSION_NEVER = (*NEVER, "sqlalchemy", "pydantic", "psycopg", "floorgate.admission.store", "floorgate.scheduler.cli.commands")

# The hook command's modules: its own and the 'hook serve' registration it splits out.
HOOK_COMMAND = {"floorgate.scheduler.cli.commands.hook", "floorgate.scheduler.cli.commands._hook_serve"}

_RUN = """
import json, sys
from floorgate.scheduler.cli.main import run
code = run(sys.argv[2:])
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "modules": sorted(sys.modules)}, f)
"""


def _imports(tmp_path: Path, argv: list[str], stdin: str = "") -> tuple[int, set[str]]:
    """Run ``floorgate ARGV`` in a fresh interpreter: its exit code and every module it imported."""
    report = tmp_path / "modules.json"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-c", _RUN, str(report), *argv], input=stdin, capture_output=True, text=True, env=env, timeout=120
    )
    assert report.exists(), done.stderr
    found = json.loads(report.read_text())
    return found["code"], set(found["modules"])


def _loaded(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == f or m.startswith(f + ".") for f in forbidden))


def _hook(db: str) -> list[str]:
    return ["hook", "user-prompt-submit", "--db", db, "--goal", "g", "--agent", "a", "--automation", "x", "--wake", "automatic"]


def test_version_imports_no_store_no_command_and_no_console(tmp_path: Path) -> None:
    code, modules = _imports(tmp_path, ["--version"])
    assert code == 0 and "floorgate.scheduler.cli.main" in modules
    assert _loaded(modules, VERSION_NEVER) == []


@pytest.mark.parametrize("denied", [False, True], ids=["admitted", "denied"])
def test_the_prompt_hook_imports_only_what_its_answer_uses(store: Store, db_url: str, tmp_path: Path, denied: bool) -> None:
    if denied:  # a floor and a start a moment ago: the prompt is blocked, with the lane's readback
        now = datetime.now(UTC)
        floor(store, _Clock(now), "g/a", timedelta(hours=1))
        add_automation(store, _Clock(now), "x")
        Admission(store).reserve(goal="g", agent="a", automation="x", turn_id="t-1", trigger_time=now)
        Admission(store).confirm("t-1")
    code, modules = _imports(tmp_path, _hook(db_url), stdin='{"session_id": "s"}')
    assert code == (2 if denied else 0)
    assert "floorgate.admission.gate" in modules  # it did decide
    assert _loaded(modules, NEVER if denied else ADMIT_NEVER) == []
    assert ("sqlite3" in modules) == (store.dialect == "sqlite")  # SQLite's driver only for a SQLite store
    # Only the hook's own command module: no other command's services.
    assert {m for m in modules if m.startswith("floorgate.scheduler.cli.commands.")} == HOOK_COMMAND


def test_the_stop_hook_imports_only_what_recording_usage_uses(store: Store, db_url: str, tmp_path: Path) -> None:
    argv = ["hook", "stop", "--db", db_url, "--goal", "g", "--agent", "a", "--automation", "x"]
    code, modules = _imports(tmp_path, argv, stdin=json.dumps({"session_id": "s", "transcript_path": str(tmp_path / "none.jsonl")}))
    assert code == 0 and "floorgate.scheduler.agents.app_usage" in modules  # it did read the (missing) transcript
    assert _loaded(modules, ADMIT_NEVER) == []
    assert {m for m in modules if m.startswith("floorgate.scheduler.cli.commands.")} == HOOK_COMMAND


def test_the_tool_hook_outside_a_mission_imports_no_store(tmp_path: Path) -> None:
    code, modules = _imports(tmp_path, ["hook", "pre-tool-use", "--db", str(tmp_path / "none.db")], stdin='{"tool_name": "Bash"}')
    assert code == 0
    assert _loaded(modules, (*ADMIT_NEVER, "sqlalchemy", "floorgate.admission.store")) == []


def test_status_on_an_empty_store_opens_it_without_the_migration_tool(store: Store, db_url: str, tmp_path: Path) -> None:
    code, modules = _imports(tmp_path, ["status", "--db", db_url])
    assert code == 0 and "floorgate.admission.store" in modules
    assert _loaded(modules, NEVER) == []


def test_a_store_behind_the_head_is_still_migrated(tmp_path: Path) -> None:
    """The fast schema check only ever skips Alembic at the head: an older store is upgraded."""
    from sqlalchemy import text

    from floorgate.admission import open_store

    db = tmp_path / "old.db"
    with open_store(str(db)) as store:
        before = _downgrade_one(store)
        with store.read() as conn:
            assert conn.execute(text("SELECT version_num FROM fg_alembic_version")).scalar() == before
    code, modules = _imports(tmp_path, ["status", "--db", str(db)])
    assert code == 0 and "alembic" in modules
    with open_store(str(db)) as store, store.read() as conn:
        assert before != head_revision()
        assert conn.execute(text("SELECT version_num FROM fg_alembic_version")).scalar() == head_revision()


def _downgrade_one(store: Store) -> str:
    """Undo the head migration (its ``downgrade``, as Alembic runs it): a store really one behind."""
    from alembic.config import Config
    from alembic.runtime.environment import EnvironmentContext
    from alembic.script import ScriptDirectory

    from floorgate.admission.store import _MIGRATIONS

    script = ScriptDirectory(str(_MIGRATIONS), version_locations=[str(_MIGRATIONS)])
    head = script.get_revision(script.get_current_head())
    before = str(head.down_revision)
    cfg = Config()
    cfg.set_main_option("script_location", str(_MIGRATIONS))
    with store.write(lock_key=None) as conn:

        def downgrade(rev, _context):  # type: ignore[no-untyped-def]
            return script._downgrade_revs(before, rev)

        with EnvironmentContext(cfg, script, fn=downgrade, destination_rev=before) as env:
            env.configure(connection=conn, version_table="fg_alembic_version", transactional_ddl=True)
            env.run_migrations()
    return before


def test_a_postgresql_store_at_the_head_with_stale_decision_functions_reinstalls_them(store: Store, db_url: str) -> None:
    """At the head, the fast check still compares the installed decision functions' hash with
    this floorgate's rendering: a stale text is installed again at open, as without the check."""
    if store.dialect != "postgresql":
        pytest.skip("the rendered decision functions are PostgreSQL's")
    from sqlalchemy import text

    from floorgate.admission import open_store
    from floorgate.admission.decide import render

    with store.write() as conn:
        conn.execute(text("UPDATE fg_installed SET hash = 'stale' WHERE name = 'decision'"))
    with open_store(db_url) as reopened, reopened.read() as conn:
        assert render.installed_hash(conn) == render.functions_hash()


def test_an_open_at_the_head_checks_it_in_one_statement(store: Store, db_url: str) -> None:
    """Every hook and command opens a store: at the head, the schema revision (and on PostgreSQL
    the installed decision functions' hash) is one SELECT, never one round trip per check."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from floorgate.admission import open_store

    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        open_store(db_url).close()
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    checks = [s for s in statements if "fg_alembic_version" in s or "fg_installed" in s]
    assert len(checks) == 1, checks


def test_opening_a_store_reads_the_required_columns_nullability_in_one_query(db_url: str) -> None:
    """Whether a hand rebuild dropped a NOT NULL is one read at open, not one per table."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from floorgate.admission import open_store

    open_store(db_url).close()  # migrated: the open below reads, it does not build
    statements: list[str] = []

    def seen(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        store = open_store(db_url)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    try:
        assert store.relaxed is False
    finally:
        store.close()
    reads = [s for s in statements if ("table_info" in s or "information_schema.columns" in s) and "fg_alembic" not in s]
    assert len(reads) == 1, reads


def test_the_head_read_from_the_migration_files_is_alembics() -> None:
    from alembic.script import ScriptDirectory

    from floorgate.admission.store import _MIGRATIONS

    newest = max(f.name for f in _MIGRATIONS.glob("[0-9]*.py"))
    assert head_revision() == newest.split("_", 1)[0]  # the newest migration file, found among them all
    assert head_revision() == ScriptDirectory(str(_MIGRATIONS), version_locations=[str(_MIGRATIONS)]).get_current_head()


def test_two_heads_in_the_migration_files_leave_the_decision_to_alembic(tmp_path: Path) -> None:
    for name, rev, down in (("a.py", "0001", None), ("b.py", "0002", "0001"), ("c.py", "0003", "0001")):
        (tmp_path / name).write_text(f'revision = "{rev}"\ndown_revision = {json.dumps(down) if down else None}\n')
    assert head_revision(tmp_path) is None
    (tmp_path / "c.py").write_text('revision = "0003"\ndown_revision = "0002"\n')
    assert head_revision(tmp_path) == "0003"


def test_the_command_table_names_every_command_in_help_order() -> None:
    parser = build_parser()  # every command module
    sub = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict))
    assert list(sub.choices) == list(COMMANDS)


EVERY = list(dict.fromkeys(COMMANDS.values()))


@pytest.mark.parametrize(
    ("argv", "modules"),
    [
        (["--version"], []),
        (["--db", "status", "hook", "pre-tool-use"], ["hook"]),  # --db's value is not the command
        (["--db=x.db", "--json", "status"], ["status"]),
        (["starts", "--goal", "g"], ["admit"]),
        (["status", "--help"], ["status"]),
        (["--help"], EVERY),
        (["stauts"], EVERY),  # a misspelt command: argparse names the nearest of them all
        ([], EVERY),
    ],
    ids=["version", "db-value", "db-equals", "second-word", "command-help", "help", "misspelt", "empty"],
)
def test_a_command_line_builds_only_its_commands_parser(argv: list[str], modules: list[str]) -> None:
    assert _named_modules(argv) == modules


def test_a_misspelt_command_still_names_the_nearest() -> None:
    err = io.StringIO()
    assert run(["stauts"], out=io.StringIO(), err=err) == 2
    assert "did you mean 'status'?" in err.getvalue()


def test_the_store_url_variable_is_named_once() -> None:
    assert owner_gate.STORE_URL_ENV == ENV_URL


class _Clock:
    def __init__(self, now: datetime) -> None:
        self._now = now

    def now(self) -> datetime:
        return self._now
