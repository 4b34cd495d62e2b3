"""What a command imports: the modules a process loads, read from ``-X importtime``, and the code
of a process that imports just those (a bound: the command's imports without its work).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path


def top_imports(lines: list[str]) -> list[str]:
    """The modules imported at the top of ``-X importtime``'s tree (each pulls in its own), in order."""
    found: list[str] = []
    for line in lines:
        if not line.startswith("import time:") or "|" not in line:
            continue
        name = line.rsplit("|", 1)[1]
        if name.startswith(" ") and not name.startswith("  ") and name.strip() != "imported package":
            found.append(name.strip())
    return [m for m in found if m not in ("__main__", "site", "encodings") and not m.startswith("_")]


def imported_by(argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> list[str]:
    """The top modules the process ``argv`` imports (run once, its imports traced)."""
    run_env = {**(os.environ if env is None else env), "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(argv, env=run_env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return top_imports(done.stderr.splitlines())


def import_code(modules: list[str]) -> str:
    """``python -c`` code importing ``modules`` in order (one that will not import alone is named on
    stderr and skipped)."""
    return (
        f"import importlib, sys\nfor m in {modules!r}:\n    try:\n        importlib.import_module(m)\n"
        "    except Exception as e:\n        print(f'not imported alone: {m}: {e}', file=sys.stderr)\n"
    )
