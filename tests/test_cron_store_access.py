"""A crontab line for another account is refused at apply when that account cannot write the store
(it would fail at every fire, unseen: cron drops the line's output), not reported armed.

The account's side runs as that account for real: a forked process that drops to the test account
(``test_timers.cron_user``) before it opens the store. The probe's script runs as a real process."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_timers import cron_user  # noqa: F401 (a fixture)

from floorgate.admission import Store
from floorgate.scheduler.app import timers
from floorgate.scheduler.app.timers import store_problem


def _as(user: str, url: str) -> str | None:
    """``store_problem(url)`` in a child process running as ``user``."""
    import psycopg  # noqa: F401 - imported before the drop: the account cannot read this interpreter's files

    entry = pwd.getpwnam(user)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(entry.pw_gid)
            os.setuid(entry.pw_uid)
            found = store_problem(url)
            os.write(write, (found if found is not None else "").encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        said = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the probe's child failed"
    return said or None


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder other accounts may enter (a test's tmp_path is root's alone)."""
    path = Path(tempfile.mkdtemp(prefix="fg-cron-store-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.mark.parametrize(
    ("owned", "mode", "refused"),
    [
        pytest.param((), 0o600, "unable to open", id="root-only-file"),
        pytest.param((), 0o644, "readonly", id="readable-not-writable"),
        pytest.param(("file",), 0o600, "readonly", id="file-owned-folder-not"),
        pytest.param(("file", "folder"), 0o600, None, id="file-and-folder-owned"),
    ],
)
def test_a_sqlite_store_the_account_cannot_write_is_named(
    cron_user: str,  # noqa: F811
    shared_dir: Path,
    _sqlite_template: Path,
    owned: tuple[str, ...],
    mode: int,
    refused: str | None,
) -> None:
    db = shared_dir / "floorgate.db"
    shutil.copy(_sqlite_template, db)
    db.chmod(mode)
    uid = pwd.getpwnam(cron_user).pw_uid
    if "file" in owned:
        os.chown(db, uid, -1)
    if "folder" in owned:
        os.chown(shared_dir, uid, -1)
    found = _as(cron_user, str(db))
    if refused is None:
        assert found is None
    else:
        assert found is not None and refused in found and str(db) in found


def test_the_account_reaches_a_store_by_its_url(store: Store, cron_user: str) -> None:  # noqa: F811
    """PostgreSQL: the URL's role, from any account (a missing database is named); SQLite: this
    test's store lies in root's own folder, which the account cannot enter."""
    found = _as(cron_user, store.url)
    if store.dialect == "sqlite":
        assert found is not None and "Permission denied" in found
        return
    assert found is None
    missing = store.url.rsplit("/", 1)[0] + "/fg_no_such_database"
    found = _as(cron_user, missing)
    assert found is not None and "fg_no_such_database" in found


def test_the_probe_exits_3_with_the_reason_when_the_store_refuses(store: Store, tmp_path: Path) -> None:
    """The script the account runs: 0 for a store it can write, 3 and one line naming the store
    for one it cannot (here: none at that path); ``_check_runnable`` words the refusal from it."""

    def probe(url: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", timers._PROBE], input=url, capture_output=True, text=True, timeout=120)

    ok = probe(store.url)
    assert ok.returncode == 0, ok.stderr
    missing = tmp_path / "elsewhere.db"
    refused = probe(str(missing))
    assert refused.returncode == timers._STORE_REFUSED
    assert refused.stderr.strip().count("\n") == 0 and str(missing) in refused.stderr
    assert not missing.exists()  # a probe never creates a store


def test_apply_for_an_account_that_cannot_write_the_store_arms_nothing(
    store: Store,
    cron_user: str,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The refusal's wording and effect, with the account's answer given (runuser cannot start this
    interpreter as the test account here: it lives under /root)."""
    from basics import T0
    from test_timers import EVERY_15, add, crontab_text

    from floorgate.admission import FixedClock

    real_run = subprocess.run

    def answered(argv, **kwargs):  # type: ignore[no-untyped-def]
        if argv[:1] == ["runuser"]:
            return subprocess.CompletedProcess(
                argv, timers._STORE_REFUSED, "", "store /x/floorgate.db failed: unable to open database file\n"
            )
        return real_run(argv, **kwargs)

    monkeypatch.setattr(timers.subprocess, "run", answered)
    clock = FixedClock(T0)
    automation = add(store, clock, "q", EVERY_15, "crontab")
    binding = timers.TimerService(store, clock=clock, crontab_user=cron_user).apply(automation)
    assert binding.apply_error is not None
    assert f"user {cron_user} cannot write the store: store /x/floorgate.db failed: unable to open database file" in binding.apply_error
    assert "--crontab-user" in binding.apply_error
    assert "# floorgate:q" not in crontab_text(cron_user)
