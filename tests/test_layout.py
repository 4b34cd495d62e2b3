"""The package layout's import rule, read from the source with ``ast`` (nothing is imported).

``admission/`` imports no other package of ours; ``hosts/`` imports only ``admission`` among ours;
``scheduler/`` is the composition root and may import both. Every import counts: module level,
inside functions, under ``TYPE_CHECKING``, and ``importlib.import_module("...")`` with a literal name.
The folders are installed as ``floorgate.admission``, ``floorgate.hosts`` and ``floorgate.scheduler``:
a bare ``import scheduler`` would load whatever other distribution owns that name, so it breaks the rule too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("admission", "hosts", "scheduler")
ALLOWED = {"admission": set(), "hosts": {"admission"}, "scheduler": {"admission", "hosts"}}


def module_name(path: Path, root: Path) -> str:
    parts = ["floorgate", *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in ``path``, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                name = ".".join([*base, node.module] if node.module else base)
            else:
                name = node.module or ""
            found.append((node.lineno, name))
        elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                found.append((node.lineno, first.value))
    return found


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def violations(root: Path = ROOT) -> list[str]:
    """One line per import that breaks the rule, naming file, line and the imported module."""
    out = []
    for package, allowed in ALLOWED.items():
        for path in sorted((root / package).rglob("*.py")):
            for line, name in imported_modules(path, root):
                parts = name.split(".")
                if parts[0] in OURS:
                    out.append(f"{path.relative_to(root)}:{line}: {package}/ imports {name} outside the floorgate namespace")
                elif parts[0] == "floorgate" and len(parts) > 1:
                    top = parts[1]
                    if top in OURS and top != package and top not in allowed:
                        out.append(f"{path.relative_to(root)}:{line}: {package}/ imports {name}")
    return out


def test_every_package_keeps_to_its_imports() -> None:
    assert violations() == []


def test_the_walk_sees_every_package() -> None:
    # A rule over no files would pass vacuously: each package must have modules with imports.
    for package in OURS:
        files = list((ROOT / package).rglob("*.py"))
        assert len(files) > 3 and any(imported_modules(p) for p in files), package


@pytest.mark.parametrize(
    ("package", "source", "breaks"),
    [
        ("admission", "from floorgate.hosts import Schedule\n", True),
        ("admission", "def f():\n    import floorgate.scheduler.cli.main\n", True),
        ("admission", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from floorgate.hosts.schedule import Schedule\n", True),
        ("admission", "import importlib\nimportlib.import_module('floorgate.scheduler.runtime.host')\n", True),
        ("hosts", "from floorgate.scheduler.runtime.executor import TurnExecutor\n", True),
        ("hosts", "from floorgate.admission import Store\nfrom . import errors\nfrom ..hosts import schedule\n", False),
        ("admission", "from . import errors\nfrom .store import Store\nimport sqlalchemy\n", False),
        ("scheduler", "from floorgate.admission import Store\nfrom floorgate.hosts import Schedule\n", False),
        ("scheduler", "from admission import Store\n", True),
        ("hosts", "import scheduler\n", True),
    ],
)
def test_a_forbidden_import_is_found(tmp_path: Path, package: str, source: str, breaks: bool) -> None:
    for name in OURS:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    nested = tmp_path / package / "sub"  # the walk goes into subpackages
    nested.mkdir()
    (nested / "__init__.py").write_text("")
    (nested / "mod.py").write_text(source)
    found = violations(tmp_path)
    assert bool(found) is breaks, found
    if breaks:
        assert found[0].startswith(f"{package}/sub/mod.py:")


def test_no_tracked_file_holds_merge_conflict_markers() -> None:
    import subprocess

    root = Path(__file__).resolve().parent.parent
    files = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout.split()
    marked = []
    for name in files:
        path = root / name
        if path.suffix not in (".py", ".md", ".toml", ".json", ".jsonl", "") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if any(line.startswith(("<<<<<<< ", ">>>>>>> ")) for line in text.splitlines()):
            marked.append(name)
    assert marked == [], f"unresolved merge conflicts in {marked}"
