"""The layering rule of the architecture, read from the source: imports only go down, and no module-level cycles.

    engines   imports nothing of ours
    pipeline  engines
    sources   engines
    worker    engines, pipeline, sources
    api       engines, worker.control (and worker.settings, which the app factory reads)

Every import counts for the layering (also those inside functions and under TYPE_CHECKING). No package has
module-level cycles, and above the contract there are none even through imports inside functions or for
the type checker.
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


def _imports(tree: ast.AST, module: str, *, module_level: bool) -> set[str]:
    """First-party modules imported in `tree`: all of them, or only those imported when the module is."""
    found: set[str] = set()
    nodes = _module_level(tree) if module_level else ast.walk(tree)
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


def _module_level(tree: ast.AST) -> Iterator[ast.AST]:
    """The statements that run when the module is imported (not function bodies, not type-checker imports)."""
    for node in getattr(tree, "body", []):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from (n for child in node.orelse for n in _module_level_stmt(child))
            continue
        yield from _module_level_stmt(node)


def _module_level_stmt(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    if isinstance(node, ast.If | ast.Try | ast.With):
        yield from _module_level(node)


@pytest.mark.parametrize(("module", "path"), list(_modules()), ids=lambda v: str(v) if isinstance(v, str) else "")
def test_imports_only_go_down(module: str, path: Path) -> None:
    allowed = ALLOWED[module.split(".")[0]]
    imported = _imports(ast.parse(path.read_text()), module, module_level=False)
    wrong = sorted(name for name in imported if not any(name == a or name.startswith(a + ".") for a in allowed))
    assert wrong == [], f"{module} imports {wrong}, above it in the layering"


def test_no_module_level_import_cycles() -> None:
    graph = {module: _imports(ast.parse(path.read_text()), module, module_level=True) for module, path in _modules()}
    assert [component for component in _strongly_connected(graph) if len(component) > 1] == []


def test_no_cycles_above_the_contract_even_through_lazy_or_type_checker_imports() -> None:
    # A cycle is not broken by making one of its imports lazy, or by naming a runtime only for the type
    # checker: the job context names protocols, not the runtimes that implement them. (The contract's own
    # modules are laid out by the spec, which puts `Facet`, needing namespaces, beside `SegmentKind`.)
    graph = {
        module: _imports(ast.parse(path.read_text()), module, module_level=False)
        for module, path in _modules()
        if not module.startswith("engines")
    }
    assert [component for component in _strongly_connected(graph) if len(component) > 1] == []


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


@pytest.mark.parametrize(
    "name", ["sources", "worker.jobs", "worker.embedded", "worker.state", "worker.cli", "worker.control"]
)
def test_each_package_exports_a_sorted_complete_all(name: str) -> None:
    package = importlib.import_module(name)
    exported = {
        key
        for key, value in vars(package).items()
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert package.__all__ == sorted(package.__all__, key=_ruff_order)
    assert exported == set(package.__all__)
