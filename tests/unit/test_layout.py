"""The layering rule of docs/architecture.md, read from the source: imports only go down, and there is no cycle.

    engines                          imports nothing of ours
    pipeline                         engines
    sources                          engines
    worker                           engines, pipeline, sources
    tinymemory_ingest.api            engines, worker.control, worker.settings (and the top package's version)
    tinymemory_ingest.cortex_double  engines.contract (a test double: no product module imports it)
    tinymemory_ingest.cli            everything (the double only from `tinymemory dev`)

Every import counts, those inside functions and those only for the type checker too: a cycle is not broken by
making one of its imports lazy. Importing a module also runs its packages' `__init__` first, so a package that
re-exports from a module importing back into it is a cycle too. Module names follow one convention: none starts
with an underscore (a package's public surface is what its `__init__` lists in `__all__`).
"""

from __future__ import annotations

import ast
import importlib
import types
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("engines", "pipeline", "sources", "worker", "tinymemory_ingest")
DOUBLE = "tinymemory_ingest.cortex_double"
ALLOWED = {
    "engines": ("engines",),
    "pipeline": ("engines", "pipeline"),
    "sources": ("engines", "sources"),
    "worker": ("engines", "pipeline", "sources", "worker"),
    "tinymemory_ingest.api": ("engines", "tinymemory_ingest.api", "worker.control", "worker.settings"),
    DOUBLE: ("engines.contract", DOUBLE),
    "tinymemory_ingest.cli": PACKAGES,
}
# The top package's `__init__` (the distribution's name and version) is shared by the API and the command line.
TOP = "tinymemory_ingest"
DOUBLE_USERS = ("tinymemory_ingest.cli.dev",)


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


MODULES = dict(_modules())


def _imports(path: Path, module: str) -> set[str]:
    """First-party modules `path` imports anywhere: at its top, inside functions, or for the type checker."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(_from(node.module, [alias.name for alias in node.names]))
    return {name for name in found if name.split(".")[0] in PACKAGES and name != module}


def _from(module: str, names: list[str]) -> set[str]:
    # `from worker.cluster import tasks` imports the module worker.cluster.tasks, not what the package's
    # `__init__` holds; any other name is an attribute of `module` itself.
    submodules = {f"{module}.{n}" for n in names if f"{module}.{n}" in MODULES}
    return submodules if len(submodules) == len(names) else {module, *submodules}


def _with_packages(module: str, imported: set[str]) -> set[str]:
    """`imported` and the packages each of them runs first: importing `a.b.c` runs `a/__init__` and `a/b/__init__`
    (not those of `module`'s own packages, which are running already when it is imported)."""
    own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    packages = {".".join(name.split(".")[:i]) for name in imported for i in range(1, name.count(".") + 1)}
    return imported | {p for p in packages if p in MODULES and p not in own and p != module}


DIRECT = {module: _imports(path, module) for module, path in MODULES.items()}
GRAPH = {module: _with_packages(module, imported) for module, imported in DIRECT.items()}


def _layer(module: str) -> str:
    return max((layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")), key=len, default="")


def _within(name: str, allowed: tuple[str, ...]) -> bool:
    return any(name == a or name.startswith(a + ".") for a in allowed)


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != TOP))
def test_imports_only_go_down(module: str) -> None:
    allowed = ALLOWED[_layer(module)]
    top_ok = module.startswith(TOP + ".")
    wrong = sorted(n for n in DIRECT[module] if not _within(n, allowed) and not (top_ok and n == TOP))
    assert wrong == [], f"{module} imports {wrong}, above it in the layering"


def test_the_top_package_imports_nothing_of_ours() -> None:
    assert DIRECT[TOP] == set()


def test_only_the_dev_command_imports_the_cortexdb_double() -> None:
    users = {
        m for m, imported in GRAPH.items() if not m.startswith(DOUBLE) and any(_within(n, (DOUBLE,)) for n in imported)
    }
    assert users == set(DOUBLE_USERS)


def test_no_import_cycle_anywhere_even_through_lazy_or_type_checker_imports() -> None:
    assert [component for component in _strongly_connected(GRAPH) if len(component) > 1] == []


def test_the_cycle_check_finds_a_cycle() -> None:
    # The check itself: a cycle through a lazy import is found.
    assert _strongly_connected({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == [["a", "b", "c"], ["d"]]


def test_no_module_name_starts_with_an_underscore() -> None:
    private = sorted(
        str(p.relative_to(ROOT))
        for p in MODULES.values()
        if p.name.startswith("_") and p.stem not in {"__init__", "__main__"}
    )
    assert private == []


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's components of `graph` (edges to unknown modules ignored), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components


def _ruff_order(name: str) -> tuple[int, str]:
    group = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return group, name


EXPORTING = [
    "engines.contract",
    "engines.local",
    "engines.tools",
    "pipeline.convert",
    "pipeline.legacy",
    "pipeline.processes",
    "pipeline.scrub",
    "sources",
    "worker.control",
    "worker.embedded",
    "worker.jobs",
    "worker.state",
    "tinymemory_ingest",
    "tinymemory_ingest.api",
    "tinymemory_ingest.cli",
    DOUBLE,
]


@pytest.mark.parametrize("name", EXPORTING)
def test_each_package_exports_a_sorted_complete_all(name: str) -> None:
    package = importlib.import_module(name)
    exported = {
        key
        for key, value in vars(package).items()
        if not key.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert package.__all__ == sorted(package.__all__, key=_ruff_order)
    assert exported == set(package.__all__)
