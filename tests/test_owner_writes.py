"""Who may change limits from the CLI: once the store has an owner, owner writes need its token.

Every command declares its access; owner writes run only with a live owner's token (from
``$FLOORGATE_TOKEN`` or a private token file), are recorded under that owner's name, and are refused
and recorded from inside a managed turn, which never inherits the token. Stores without owners behave
as before. All through the CLI's entry point, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from floorgate.admission import Approvals, Automation, AutomationState, Principals, Store, SystemClock
from floorgate.admission.automations import AutomationSpec, CommandHost
from floorgate.admission.events import EventKind, Events
from floorgate.admission.journal import TurnRecord
from floorgate.scheduler.app.owner_gate import Access
from floorgate.scheduler.cli.main import build_parser, leaf_parsers
from floorgate.scheduler.runtime._host_env import host_env

from console_kit import pending_ask
from helpers import add_automation, floor
from test_cli import cli, one_line_error

# Every owner write, with arguments that parse (the gate runs before the handler looks at them).
OWNER_WRITES: dict[str, tuple[str, ...]] = {
    "policy set": ("policy", "set", "g/a", "--min-interval", "0", "--revision", "1", "--allow-reduction"),
    "policy price": ("policy", "price", "some-model", "--usd-per-mtok", "3", "--revision", "0"),
    "settings set": ("settings", "set", "--catch-up", "0", "--revision", "0"),
    "automation add": ("automation", "add", "y", "--goal", "g", "--agent", "b", "--schedule", "every 1h", "--", "true"),
    "automation edit": ("automation", "edit", "x", "--schedule", "every 2h"),
    "automation pause": ("automation", "pause", "x"),
    "automation resume": ("automation", "resume", "x"),
    "automation remove": ("automation", "remove", "x"),
    "approve": ("approve", "auth-nope"),
    "deny": ("deny", "auth-nope"),
    "reconcile": ("reconcile", "mis-nope", "--clear-latch"),
    "owner add": ("owner", "add", "mallory"),
    "owner revoke": ("owner", "revoke", "alice"),
    "notify add": ("notify", "add", "http://127.0.0.1:9/hook", "--events", "ask_pending"),
    "notify remove": ("notify", "remove", "wh-nope"),
    "apply": ("apply", "-f", "fleet.toml"),
    "prune": ("prune", "--older-than", "90d"),
    "service install": ("service", "install", "--user", "--unit-dir", "units"),
    "service uninstall": ("service", "uninstall", "--user", "--unit-dir", "units"),
}
REFUSED = "floorgate: refused: "


def test_every_command_declares_its_access_and_the_owner_writes_are_these() -> None:
    leaves = {" ".join(words): leaf for words, leaf in leaf_parsers(build_parser())}
    undeclared = [name for name, leaf in leaves.items() if not isinstance(leaf.get_default("access"), Access)]
    assert undeclared == [], "declare set_defaults(access=Access...) on every command"
    owner = {name for name, leaf in leaves.items() if leaf.get_default("access") is Access.OWNER}
    assert owner == set(OWNER_WRITES), "a new owner write belongs in OWNER_WRITES (and a new command must say what it is)"
    for name in owner:
        assert not leaves[name].get_default("raw_handler"), f"{name}: a raw handler would skip the gate"
        assert any("--token-file" in a.option_strings for a in leaves[name]._actions), name


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """An empty HOME: no default token file unless a test writes one."""
    path = tmp_path / "home"
    path.mkdir()
    return path


def _env(home: Path, **extra: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": str(home), **extra}


def _setup(store: Store, clock) -> dict[str, str]:  # type: ignore[no-untyped-def]
    floor(store, clock, "g/a", timedelta(hours=1))
    add_automation(store, clock, "x")
    principals = Principals(store, clock)
    tokens = {name: principals.add(name, role)[1] for name, role in (("alice", "owner"), ("val", "viewer"), ("gone", "owner"))}
    principals.revoke("gone")
    return tokens


def _history(store: Store) -> list[tuple[str, str, str]]:
    doc = json.loads(cli("policy", "history", "--json", db=store.url).stdout)
    return [(h["owner_ref"], h["owner_kind"], h["after"]) for h in doc["history"]]


@pytest.mark.parametrize("command", sorted(OWNER_WRITES))
def test_every_owner_write_is_refused_without_a_credential_once_an_owner_exists_and_passes_with_one(
    store: Store, clock, tmp_path: Path, home: Path, command: str
) -> None:  # type: ignore[no-untyped-def]
    tokens = _setup(store, clock)
    before = _history(store)
    r = cli(*OWNER_WRITES[command], db=store.url, cwd=tmp_path, env=_env(home))
    assert r.returncode == 3, r.stderr
    line = one_line_error(r)
    assert line.startswith(REFUSED) and f"'{command}' is an owner write" in line and "FLOORGATE_TOKEN" in line
    assert _history(store) == before
    assert json.loads(cli("automation", "show", "x", "--json", db=store.url).stdout)["state"] == "eligible"
    # With the owner's token the same command passes the gate: its own answer (ok, or e.g. not found).
    signed = cli(*OWNER_WRITES[command], db=store.url, cwd=tmp_path, env=_env(home, FLOORGATE_TOKEN=tokens["alice"]))
    assert not signed.stderr.startswith(REFUSED), signed.stderr


def _file(path: Path, text: str, mode: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    path.chmod(mode)
    return path


# id -> (how the credential is presented, expected exit code, what the refusal says)
CREDENTIALS = [
    pytest.param("env", 0, None, id="FLOORGATE_TOKEN"),
    pytest.param("file-0600", 0, None, id="token-file-0600"),
    pytest.param("env-file-0600", 0, None, id="FLOORGATE_TOKEN_FILE-0600"),
    pytest.param("default-file-0600", 0, None, id="default-token-file-0600"),
    pytest.param("owner-ref-same", 0, None, id="owner-ref-matching-the-token"),
    pytest.param("file-0644", 3, "open to group or others (mode 0644)", id="token-file-0644"),
    pytest.param("file-0640", 3, "open to group or others (mode 0640)", id="token-file-0640"),
    pytest.param("default-file-0604", 3, "open to group or others (mode 0604)", id="default-token-file-0604"),
    pytest.param("symlink", 3, "is a symlink", id="token-file-symlink"),
    pytest.param("missing-file", 3, "does not exist", id="token-file-missing"),
    pytest.param("revoked", 3, "not a live token", id="revoked-token"),
    pytest.param("wrong-secret", 3, "not a live token", id="wrong-secret"),
    pytest.param("viewer", 3, "'val' is a viewer", id="viewer-token"),
    pytest.param("owner-ref-other", 3, "--owner-ref 'bob' is not the token's principal 'alice'", id="owner-ref-disagrees"),
    pytest.param("none", 3, "this store has owners", id="no-credential"),
]


@pytest.mark.parametrize(("how", "code", "says"), CREDENTIALS)
def test_a_credential_is_accepted_only_from_a_live_owner_in_a_private_file_or_the_environment(
    store: Store, clock, tmp_path: Path, home: Path, how: str, code: int, says: str | None
) -> None:  # type: ignore[no-untyped-def]
    tokens = _setup(store, clock)
    alice = tokens["alice"]
    env, extra = _env(home), ()
    secret_file = tmp_path / "secrets" / "token"
    if how == "env":
        env["FLOORGATE_TOKEN"] = alice
    elif how.startswith("file-"):
        extra = ("--token-file", str(_file(secret_file, alice, int(how.removeprefix("file-"), 8))))
    elif how == "env-file-0600":
        env["FLOORGATE_TOKEN_FILE"] = str(_file(secret_file, alice, 0o600))
    elif how.startswith("default-file-"):
        _file(home / ".config" / "floorgate" / "token", alice, int(how.removeprefix("default-file-"), 8))
    elif how == "symlink":
        target = _file(secret_file, alice, 0o600)
        (tmp_path / "link").symlink_to(target)
        extra = ("--token-file", str(tmp_path / "link"))
    elif how == "missing-file":
        extra = ("--token-file", str(tmp_path / "nothing-here"))
    elif how in ("revoked", "viewer"):
        env["FLOORGATE_TOKEN"] = tokens["gone" if how == "revoked" else "val"]
    elif how == "wrong-secret":
        env["FLOORGATE_TOKEN"] = alice[:-4] + ("AAAA" if not alice.endswith("AAAA") else "BBBB")
    elif how.startswith("owner-ref-"):
        env["FLOORGATE_TOKEN"] = alice
        extra = ("--owner-ref", "alice" if how == "owner-ref-same" else "bob")
    before = _history(store)
    r = cli(
        "policy", "set", "g/a", "--min-interval", "0", "--revision", "1", "--allow-reduction", *extra, db=store.url, cwd=tmp_path, env=env
    )
    assert r.returncode == code, r.stderr
    if code == 0:
        assert _history(store) == [("alice", "authenticated", "0"), *before]  # recorded as the principal, vouched for
    else:
        assert says is not None and says in one_line_error(r) and one_line_error(r).startswith(REFUSED)
        assert _history(store) == before


def test_an_approval_with_a_token_records_who_decided(store: Store, clock, tmp_path: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    now = SystemClock()  # the CLI decides on the real clock: the ask must not have expired by then
    approval_id = pending_ask(store, now, "asker")  # type: ignore[arg-type]
    _, token = Principals(store, now).add("alice", "owner")
    r = cli("approve", approval_id, "--json", db=store.url, cwd=tmp_path, env=_env(home, FLOORGATE_TOKEN=token))
    assert r.returncode == 0, r.stderr
    decided = Approvals(store, now).get(approval_id)
    assert (decided.decided_by, decided.decided_by_kind) == ("alice", "authenticated")


@pytest.mark.parametrize("owners", [True, False], ids=["store-with-owners", "store-without-owners"])
def test_inside_a_managed_turn_an_owner_write_is_refused_even_with_a_token_and_recorded(
    store: Store, clock, tmp_path: Path, home: Path, owners: bool
) -> None:  # type: ignore[no-untyped-def]
    floor(store, clock, "g/a", timedelta(hours=1))
    env = _env(home, FLOORGATE_TURN_ID="turn-42")
    if owners:
        env["FLOORGATE_TOKEN"] = Principals(store, clock).add("alice", "owner")[1]
    before = _history(store)
    r = cli(
        "policy", "set", "g/a", "--min-interval", "0", "--revision", "1", "--allow-reduction", "--owner-ref", "alice",
        db=store.url, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert r.returncode == 3
    line = one_line_error(r)
    assert line.startswith(REFUSED) and "inside managed turn 'turn-42'" in line
    assert _history(store) == before
    [event] = Events(store).list(EventKind.OWNER_WRITE_REFUSED)
    assert event.subject == "turn-42" and event.data == {"turn_id": "turn-42", "command": "policy set"}
    assert event.event_id in line and event.occurred_at.tzinfo is not None
    # A read inside the turn stays a read.
    assert cli("policy", "show", "g/a", db=store.url, cwd=tmp_path, env=env).returncode == 0


def test_a_store_without_owners_takes_asserted_writes_as_before_and_the_first_owner_says_how_to_sign(
    store: Store, clock, tmp_path: Path, home: Path
) -> None:  # type: ignore[no-untyped-def]
    env = _env(home)
    ok = cli("policy", "set", "g/a", "--min-interval", "1h", "--revision", "0", "--owner-ref", "bob", db=store.url, cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stderr
    assert _history(store) == [("bob", "asserted", "1h")]
    missing = cli("policy", "set", "g/a", "--min-interval", "2h", "--revision", "1", db=store.url, cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "--owner-ref" in one_line_error(missing)
    viewer = cli("owner", "add", "val", "--role", "viewer", db=store.url, cwd=tmp_path, env=env)
    assert viewer.returncode == 0 and "FLOORGATE_TOKEN" not in viewer.stdout  # a viewer cannot sign writes
    first = cli("owner", "add", "alice", "--json", db=store.url, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    assert "FLOORGATE_TOKEN" in doc["cli_writes"] and "chmod 600" in doc["cli_writes"]
    after = cli(
        "policy", "set", "g/a", "--min-interval", "2h", "--revision", "1", "--owner-ref", "bob", db=store.url, cwd=tmp_path, env=env
    )
    assert after.returncode == 3 and one_line_error(after).startswith(REFUSED)
    signed = cli(
        "policy",
        "set",
        "g/a",
        "--min-interval",
        "2h",
        "--revision",
        "1",
        db=store.url,
        cwd=tmp_path,
        env={**env, "FLOORGATE_TOKEN": doc["token"]},
    )
    assert signed.returncode == 0 and _history(store)[0] == ("alice", "authenticated", "2h")
    second = cli("owner", "add", "carol", db=store.url, cwd=tmp_path, env={**env, "FLOORGATE_TOKEN": doc["token"]})
    assert second.returncode == 0 and "FLOORGATE_TOKEN" not in second.stdout  # said once, for the first owner


@pytest.mark.parametrize(
    ("name", "words"),
    [
        *(pytest.param(n, f"{n} is a credential", id=n) for n in ("FLOORGATE_TOKEN", "FLOORGATE_TOKEN_FILE", "FLOORGATE_DB")),
        *(
            pytest.param(n, f"--env: {n!r} is not an environment variable's name", id=i)
            for n, i in (("API_KEY=secret", "with-a-value"), ("9LIVES", "leading-digit"), ("A-B", "dash"))
        ),
    ],
)
def test_an_env_flag_is_refused_for_an_owner_credential_or_what_is_no_variable_name(
    store: Store, tmp_path: Path, home: Path, name: str, words: str
) -> None:
    r = cli(
        "automation", "add", "leaky", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--env", name, "--", "true",
        db=store.url, cwd=tmp_path, env=_env(home),
    )  # fmt: skip
    assert r.returncode == 2 and words in one_line_error(r)
    assert json.loads(cli("automation", "list", "--json", db=store.url).stdout)["automations"] == []


@pytest.mark.parametrize("name", ["FLOORGATE_TOKEN", "FLOORGATE_TOKEN_FILE", "FLOORGATE_DB"])
def test_a_turn_host_never_gets_an_owner_credential_even_when_its_automation_allows_it(clock, name: str) -> None:  # type: ignore[no-untyped-def]
    # An automation stored before the --env check (or written around it) still never passes it on.
    spec = AutomationSpec(
        goal_id="g",
        agent_id="a",
        schedule="RRULE:FREQ=DAILY",
        host=CommandHost(argv=("true",), env_allow=(name, "KEEP"), timeout_seconds=5),
    )
    automation = Automation(
        automation_id="old",
        spec=spec,
        state=AutomationState.ACTIVE,
        state_note=None,
        revision=1,
        created_at=clock.now(),
        updated_at=clock.now(),
    )
    record = TurnRecord.model_construct(turn_id="t-1", attempt=1, mission_id=None)
    env = host_env(
        automation, record, runner_env={name: "fgo_alice.secret", "KEEP": "1", "PATH": "/bin"}, credential=None, envelope_mode="enforce"
    )
    assert name not in env and env["KEEP"] == "1"


def test_a_managed_turn_cannot_lift_its_own_floor(store: Store, clock, tmp_path: Path, home: Path) -> None:  # type: ignore[no-untyped-def]
    """A real host process (a shell script run by ``floorgate turn run``) tries to set its floor to 0,
    as it is and with FLOORGATE_TURN_ID unset, while the runner holds the owner's token."""
    floor(store, clock, "g/a", timedelta(hours=1))
    _, token = Principals(store, clock).add("alice", "owner")
    floorgate = Path(sys.executable).parent / "floorgate"
    codes, seen = tmp_path / "codes", tmp_path / "env"
    lift = f"{shlex.quote(str(floorgate))} --db {shlex.quote(store.url)} policy set g/a --min-interval 0 --revision 1 --allow-reduction --owner-ref alice"
    script = _file(
        tmp_path / "agent.sh",
        "#!/bin/sh\n"
        f"env > {shlex.quote(str(seen))}\n"
        f"{lift} >/dev/null 2>&1; echo $? >> {shlex.quote(str(codes))}\n"
        f"env -u FLOORGATE_TURN_ID {lift} >/dev/null 2>&1; echo $? >> {shlex.quote(str(codes))}\n",
        0o700,
    )
    runner = _env(home, FLOORGATE_TOKEN=token)
    added = cli(
        "automation", "add", "agent", "--goal", "g", "--agent", "a", "--schedule", "every 1h", "--", str(script),
        db=store.url, cwd=tmp_path, env=runner,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    before = _history(store)
    ran = subprocess.run(
        [str(floorgate), "--db", store.url, "turn", "run", "agent", "--json"],
        cwd=tmp_path, env=runner, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert codes.read_text().split() == ["3", "3"]  # refused as a turn, and refused for want of a token
    assert _history(store) == before
    assert "FLOORGATE_TOKEN" not in seen.read_text() and "FLOORGATE_TURN_ID" in seen.read_text()
    assert [e.data["command"] for e in Events(store).list(EventKind.OWNER_WRITE_REFUSED)] == ["policy set"]
