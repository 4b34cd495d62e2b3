"""No import circle among our modules, read from the source with ``ast`` (nothing is imported).

Every import counts, as in ``test_layout``: module level, inside functions, under ``TYPE_CHECKING``,
and ``importlib.import_module`` with a literal name. ``from pkg import name`` is an edge to
``pkg.name`` when that is a module of ours, else to ``pkg``: a package's ``__init__`` that imports
its submodules is no circle by itself; one through it is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = ("admission", "hosts", "scheduler")


def module_name(path: Path, root: Path) -> str:
    parts = ["floorgate", *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Each of our modules (``floorgate.x.y``) and the modules of ours it imports."""
    files = {module_name(p, root): p for top in OURS if (root / top).is_dir() for p in sorted((root / top).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = package[: len(package) - (node.level - 1)] if node.level else []
                module = ".".join([*base, node.module] if node.module else base)
                for alias in node.names:  # a submodule by name, else an attribute of the module
                    edges.add(f"{module}.{alias.name}" if f"{module}.{alias.name}" in files else module)
            elif isinstance(node, ast.Call) and _is_dynamic_import(node.func) and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    edges.add(first.value)
        graph[name] = {e for e in edges if e in files and e != name}
    return graph


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in ("__import__", "import_module")
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # iterative: the graph is deep enough to matter for recursion
        nonlocal counter
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            advanced = False
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def test_no_import_circle_among_our_modules() -> None:
    assert circles(import_graph()) == []


def test_the_graph_sees_the_scheduler_rooms() -> None:
    # A check over an empty graph would pass vacuously: the CLI's main and every command module
    # reach the shared context through edges this walk found (main imports a command's module by
    # name from its table, only when that command is run).
    graph = import_graph()
    assert "floorgate.scheduler.cli.context" in graph["floorgate.scheduler.cli.main"]
    assert "floorgate.scheduler.cli.context" in graph["floorgate.scheduler.cli.commands.turn"]
    assert len(graph) > 100


def _tree(tmp_path: Path, modules: dict[str, str]) -> Path:
    for rel, source in modules.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            if str(parent) != ".":
                init = tmp_path / parent / "__init__.py"
                if not init.exists():
                    init.write_text("")
        path.write_text(source)
    return tmp_path


@pytest.mark.parametrize(
    ("modules", "expected"),
    [
        pytest.param(
            {"scheduler/cli/main.py": "from .commands import run\n", "scheduler/cli/commands/run.py": "from ..main import EXIT_OK\n"},
            [["floorgate.scheduler.cli.commands.run", "floorgate.scheduler.cli.main"]],
            id="module-level-circle",
        ),
        pytest.param(
            {
                "scheduler/agents/a.py": "def f():\n    from .b import x\n",
                "scheduler/agents/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n",
            },
            [["floorgate.scheduler.agents.a", "floorgate.scheduler.agents.b"]],
            id="inside-a-function-and-type-checking",
        ),
        pytest.param(
            {"scheduler/app/__init__.py": "from .root import Root\n", "scheduler/app/root.py": "from ..app import Root\n"},
            [["floorgate.scheduler.app", "floorgate.scheduler.app.root"]],
            id="through-a-package-init",
        ),
        pytest.param(
            {
                "scheduler/console/__init__.py": "from .pages import page\n",
                "scheduler/console/pages.py": "from . import runs\n",
                "scheduler/console/runs.py": "",
            },
            [],
            id="a-submodule-by-name-is-no-edge-to-its-package",
        ),
        pytest.param(
            {
                "scheduler/x.py": "import importlib\nimportlib.import_module('floorgate.scheduler.y')\n",
                "scheduler/y.py": "from .x import z\n",
            },
            [["floorgate.scheduler.x", "floorgate.scheduler.y"]],
            id="import-module-by-name",
        ),
        pytest.param(
            {
                "scheduler/cli/main.py": "from .context import Context\nfrom .commands import run\n",
                "scheduler/cli/context.py": "",
                "scheduler/cli/commands/run.py": "from ..context import Context\n",
            },
            [],
            id="a-shared-module-breaks-it",
        ),
    ],
)
def test_a_planted_circle_is_found(tmp_path: Path, modules: dict[str, str], expected: list[list[str]]) -> None:
    root = _tree(tmp_path, {"admission/__init__.py": "", "hosts/__init__.py": "", **modules})
    assert circles(import_graph(root)) == expected
