"""The layering rule of the architecture, read from the source: imports only go down, and no module-level cycles.

    engines   imports nothing of ours
    pipeline  engines
    sources   engines
    worker    engines, pipeline, sources
    api       engines, worker.control (and worker.settings, which the app factory reads)

Every import counts for the layering (also those inside functions and under TYPE_CHECKING); every import
that can run (at module level or inside a function, not those for the type checker only) counts for cycles,
so a cycle is not hidden by making one of its imports lazy.
"""

from __future__ import annotations

import ast
import importlib
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engines", "pipeline", "sources", "worker", "api")
ALLOWED = {
    "engines": ("engines",),
    "pipeline": ("engines", "pipeline"),
    "sources": ("engines", "sources"),
    "worker": ("engines", "pipeline", "sources", "worker"),
    "api": ("engines", "api", "worker.control", "worker.settings"),
}


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def _imports(tree: ast.AST, module: str, *, run_time: bool) -> set[str]:
    """First-party modules imported in `tree`; with `run_time`, not those imported for the type checker only."""
    found: set[str] = set()
    nodes = _run_time(tree) if run_time else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(_from(node.module, [alias.name for alias in node.names]))
    return {name for name in found if name.split(".")[0] in PACKAGES and name != module}


def _from(module: str, names: list[str]) -> set[str]:
    # `from worker.cluster import tasks` imports the module worker.cluster.tasks, not what the package's
    # `__init__` holds; any other name is an attribute of `module` itself.
    folder = ROOT.joinpath(*module.split("."))
    submodules = {f"{module}.{n}" for n in names if folder.joinpath(f"{n}.py").exists() or folder.joinpath(n).is_dir()}
    return submodules if len(submodules) == len(names) else {module, *submodules}


def _run_time(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` but those under `if TYPE_CHECKING:` (imports for the type checker only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in [child, *_run_time(child)])
            continue
        yield node
        yield from _run_time(node)


@pytest.mark.parametrize(("module", "path"), list(_modules()), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_imports_only_go_down(module: str, path: Path) -> None:
    allowed = ALLOWED[module.split(".")[0]]
    imported = _imports(ast.parse(path.read_text()), module, run_time=False)
    wrong = sorted(name for name in imported if not any(name == a or name.startswith(a + ".") for a in allowed))
    assert wrong == [], f"{module} imports {wrong}, above it in the layering"


def test_no_import_cycles() -> None:
    graph = {module: _imports(ast.parse(path.read_text()), module, run_time=True) for module, path in _modules()}
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert cycles == []


def test_no_cycles_above_the_contract_even_for_the_type_checker() -> None:
    # The job context names protocols, not the runtimes that implement them.
    graph = {
        module: _imports(ast.parse(path.read_text()), module, run_time=False)
        for module, path in _modules()
        if not module.startswith("engines")
    }
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert cycles == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of `graph` (edges to unknown modules ignored)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in graph:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            components.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return components


def _ruff_order(name: str) -> tuple[int, str]:
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, name


@pytest.mark.parametrize("name", ["sources", "worker.jobs", "worker.embedded", "worker.state", "worker.cli"])
def test_each_package_exports_a_sorted_complete_all(name: str) -> None:
    package = importlib.import_module(name)
    exported = {
        key
        for key, value in vars(package).items()
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert package.__all__ == sorted(package.__all__, key=_ruff_order)
    assert exported == set(package.__all__)
