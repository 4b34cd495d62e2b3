"""README.md's shell blocks run as written: in order, with bash, in one fresh directory.

Markers in README.md, readable as prose:

- ``<!-- readme-test: skip: REASON -->`` on the line just before a ```` ```sh ```` block: the block
  is not run, and REASON says why (CI runs it already, it needs a server or paths outside the
  tour's directory, it shows placeholders for ids).
- A command's trailing comment that begins ``exit N`` (``... --turn t-002   # exit 3``) is the
  exit code it must return; every other command must exit 0.
- A command whose comment says ``shows "TEXT"`` must print TEXT (on stdout or stderr).
- A command whose comment says ``until SIGTERM`` (``floorgate run``) is started in the background,
  given until it logs that it armed its timers, then sent SIGTERM; it must exit 0.
- Each ```` ```python ```` block runs on its own, in a fresh directory, with the project's
  interpreter, and must exit 0 (the same skip marker applies).

The test provides what a reader's machine does and nothing the tour should create itself: the
project's venv first on ``PATH``, a fresh directory and ``HOME``, ``TZ=UTC``, no ``FLOORGATE_*``
variables (so a fresh ``./floorgate.db``), and a ``crontab`` stand-in first on ``PATH`` that keeps
the crontab in a file in that directory: the tour's crontab automation is applied, read back,
acknowledged and removed without touching a real account's crontab.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
MARKER = re.compile(r"^<!--\s*readme-test:\s*(.*?)\s*-->$")
EXIT = re.compile(r"^exit (\d+)\b")
SHOWS = re.compile(r'\bshows "([^"]+)"')
ARMED = "armed"  # what `floorgate run` logs once its timers are armed

pytestmark = pytest.mark.slow

FAKE_CRONTAB = """#!/bin/sh
# A stand-in for crontab(1): the caller's crontab is the file $FAKE_CRONTAB.
case "$1" in
  -l) [ -f "$FAKE_CRONTAB" ] && exec cat "$FAKE_CRONTAB"; echo "no crontab for $(id -un)" >&2; exit 1 ;;
  -) cat > "$FAKE_CRONTAB" ;;
  -r) rm -f "$FAKE_CRONTAB" ;;
  *) echo "crontab stand-in: unsupported arguments: $*" >&2; exit 2 ;;
esac
"""


@dataclass(frozen=True)
class Command:
    """One shell command of README.md, with where it is and what it must do."""

    text: str
    comment: str
    line: int

    @property
    def expected_exit(self) -> int:
        match = EXIT.match(self.comment)
        return int(match.group(1)) if match else 0

    @property
    def shows(self) -> str | None:
        match = SHOWS.search(self.comment)
        return match.group(1) if match else None

    @property
    def until_sigterm(self) -> bool:
        return "until SIGTERM" in self.comment


@dataclass(frozen=True)
class Block:
    """One ```sh block: its commands, and the skip reason when its marker says so."""

    line: int
    commands: tuple[Command, ...]
    skip: str | None


def split_commands(block: str, first_line: int) -> list[Command]:
    """Shell commands of ``block``: a newline ends one unless it is quoted or escaped; ``#`` at the
    start of a word outside quotes starts a comment (kept beside the command, not run)."""
    commands: list[Command] = []
    text: list[str] = []
    comments: list[str] = []
    quote: str | None = None
    line = start = first_line
    i = 0

    def flush() -> None:
        command = "".join(text).strip()
        if command:
            commands.append(Command(command, " ".join(comments), start))
        text.clear()
        comments.clear()

    while i < len(block):
        c = block[i]
        if c == "\n":
            line += 1
        if quote is not None:
            text.append(c)
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(block):
                i += 1
                text.append(block[i])
        elif c == "\\" and i + 1 < len(block):
            i += 1
            line += block[i] == "\n"
            text += [c, block[i]]
        elif c in "'\"":
            quote = c
            text.append(c)
        elif c == "#" and (not text or text[-1].isspace()):
            end = block.find("\n", i)
            end = len(block) if end < 0 else end
            comments.append(block[i + 1 : end].strip())
            i = end
            continue
        elif c == "\n":
            flush()
            start = line
        else:
            if not "".join(text).strip():
                start = line
            text.append(c)
        i += 1
    assert quote is None, f"README.md:{first_line}: a block ends inside a {quote} quote"
    flush()
    return commands


def readme_blocks(text: str) -> list[Block]:
    """The ```sh blocks of README ``text`` in order, with their markers."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```sh":
            marker = MARKER.match(lines[i - 1].strip()) if i else None
            skip = None
            if marker is not None:
                directive = marker.group(1)
                assert directive.startswith("skip: "), f"README.md:{i}: unknown readme-test marker {directive!r}"
                skip = directive.removeprefix("skip: ").strip()
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            body = "\n".join(lines[i + 1 : end])
            blocks.append(Block(i + 1, tuple(split_commands(body, i + 2)), skip))
            i = end
        i += 1
    return blocks


def python_blocks(text: str) -> list[tuple[int, str, str | None]]:
    """The ```python blocks of README ``text``: (line, code, skip reason)."""
    out: list[tuple[int, str, str | None]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "```python":
            marker = MARKER.match(lines[i - 1].strip()) if i else None
            skip = marker.group(1).removeprefix("skip: ") if marker else None
            end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
            out.append((i + 1, "\n".join(lines[i + 1 : end]) + "\n", skip))
    return out


def tour_script(commands: list[Command], logs: Path) -> str:
    """One bash script that runs ``commands`` in order (one shell: an ``export`` carries on) and
    appends ``INDEX EXIT`` to ``logs/rc`` after each; each command's output goes to ``logs/INDEX``."""
    out = ['cd "$TOUR"']
    for k, command in enumerate(commands):
        log = shlex.quote(str(logs / str(k)))
        if command.until_sigterm:
            out += [
                f"{command.text} >{log} 2>&1 </dev/null &",
                "fg_pid=$!",
                # Ready when it says so (or has exited); bounded so a host that never arms fails.
                f"for _ in $(seq 300); do grep -q {ARMED} {log} && break; kill -0 $fg_pid 2>/dev/null || break; sleep 0.1; done",
                "kill -TERM $fg_pid 2>/dev/null; wait $fg_pid",
            ]
        else:
            out += [f"{{ {command.text}\n}} >{log} 2>&1 </dev/null"]
        out += [f'echo "{k} $?" >>{shlex.quote(str(logs / "rc"))}']
    return "\n".join(out) + "\n"


def tour_environment(tmp: Path) -> dict[str, str]:
    """What a reader's shell has after the install: the venv first on PATH, and nothing of ours."""
    fake_bin = tmp / "bin"
    fake_bin.mkdir()
    crontab = fake_bin / "crontab"
    crontab.write_text(FAKE_CRONTAB)
    crontab.chmod(0o755)
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "floorgate").exists(), f"floorgate is not installed beside {sys.executable}"
    home = tmp / "home"
    home.mkdir()
    return {
        "PATH": os.pathsep.join([str(fake_bin), str(venv_bin), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": str(home),
        "TZ": "UTC",
        "LANG": "C.UTF-8",
        "FAKE_CRONTAB": str(tmp / "crontab.txt"),
    }


def test_the_parser_reads_commands_comments_and_markers() -> None:
    blocks = readme_blocks(
        "<!-- readme-test: skip: not here -->\n```sh\nrm -rf /\n```\n\n```sh\n"
        'a --x \'one\n# two\' \\\n  --y "#3"   # exit 3: denied\nb  # until SIGTERM\nc  # shows "3 of 3" here\n```\n'
    )
    assert blocks[0].skip == "not here" and blocks[1].skip is None
    a, b, c = blocks[1].commands
    assert a.text == "a --x 'one\n# two' \\\n  --y \"#3\"" and a.expected_exit == 3 and a.line == 7
    assert b.text == "b" and b.expected_exit == 0 and b.until_sigterm and b.line == 10 and b.shows is None
    assert c.shows == "3 of 3" and a.shows is None


def test_readme_tour_runs_as_written(tmp_path: Path) -> None:
    blocks = readme_blocks(README.read_text())
    commands = [c for b in blocks if b.skip is None for c in b.commands]
    # The markers are read: the tour has denials, a bounded host, and is not silently empty.
    assert len(commands) > 20 and any(c.expected_exit == 3 for c in commands) and any(c.until_sigterm for c in commands)
    assert all(b.skip for b in blocks if any(".venv/bin/pip install" in c.text for c in b.commands))

    tour = tmp_path / "tour"
    tour.mkdir()
    logs = tmp_path / "logs"
    logs.mkdir()
    script = tmp_path / "tour.sh"
    script.write_text(tour_script(commands, logs))
    env = tour_environment(tmp_path) | {"TOUR": str(tour)}
    subprocess.run(["bash", str(script)], env=env, check=True, timeout=600)

    codes = dict(line.split() for line in (logs / "rc").read_text().splitlines())
    failures = []
    for k, command in enumerate(commands):
        output = (logs / str(k)).read_text()
        got = int(codes[str(k)])
        if got != command.expected_exit or (command.until_sigterm and ARMED not in output):
            failures.append(f"README.md:{command.line}: exit {got}, documented {command.expected_exit}\n$ {command.text}\n{output}")
        elif command.shows is not None and command.shows not in output:
            failures.append(f"README.md:{command.line}: does not print {command.shows!r} as documented\n$ {command.text}\n{output}")
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


def test_readme_python_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = [(line, code) for line, code, skip in python_blocks(README.read_text()) if skip is None]
    assert blocks, "README.md has no python block to run"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLOORGATE_")} | {"TZ": "UTC"}
    for line, code in blocks:
        where = tmp_path / f"block-{line}"
        where.mkdir()
        result = subprocess.run([sys.executable, "-c", code], cwd=where, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"README.md:{line}: the python block exits {result.returncode}\n{result.stderr}"
