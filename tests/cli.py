"""The ``floorgate`` CLI run in-process through its entry function, as a test sees a user's run.

``run_cli`` calls ``scheduler.cli.run(argv, out=..., err=...)`` and returns what a subprocess would
give (exit code, stdout, stderr) without paying an interpreter start and the imports per command.
Like the subprocess it replaces, each call runs beside the database (so ./floorgate-state lands in
the test's directory), reads the given stdin, sees the given environment, and leaves the caller's
working directory, environment and standard streams as they were.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from floorgate.scheduler.cli.main import run


@dataclass(frozen=True)
class Result:
    """What one command gave: the same field names as ``subprocess.CompletedProcess``."""

    returncode: int
    stdout: str
    stderr: str


@contextlib.contextmanager
def _isolated(cwd: str | os.PathLike[str] | None, env: Mapping[str, str] | None, stdin: str) -> Iterator[None]:
    saved_cwd, saved_env, saved_stdin = os.getcwd(), dict(os.environ), sys.stdin
    try:
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        sys.stdin = io.StringIO(stdin)
        yield
    finally:
        sys.stdin = saved_stdin
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)


def run_cli(
    *args: str,
    db: str | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    stdin: str = "",
) -> Result:
    """Run ``floorgate [--db DB] ARGS...`` in this process.

    It runs in ``cwd``, else beside a ``db`` file; ``env`` replaces the environment for the call.
    """
    argv = ["--db", db] if db is not None else []  # before the command: anything after "--" is a host's
    argv += list(args)
    if cwd is None and db is not None and os.path.isabs(db):
        cwd = os.path.dirname(db)
    out, err = io.StringIO(), io.StringIO()
    # Hooks and --help write to sys.stdout/sys.stderr rather than the streams run() is given.
    with _isolated(cwd, env, stdin), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = run(argv, out=out, err=err)
    return Result(code, out.getvalue(), err.getvalue())
