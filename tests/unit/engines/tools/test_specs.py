"""The tools' names and schemas are frozen by a fixture; `specs()` follows the scope and the engine's modes."""

from __future__ import annotations

import importlib
import json
import os
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engines.contract import (
    EngineDescriptor,
    EngineHealth,
    FetchMode,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    Item,
    ListPage,
    ListRequest,
    MemoryEngine,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
)
from engines.reference import ReferenceEngine
from engines.tools import (
    MEMORY_EXPLORE,
    MEMORY_FETCH,
    MEMORY_FORGET,
    MEMORY_GET,
    MEMORY_LIST,
    MEMORY_RECALL,
    MEMORY_STORE,
    TOOL_NAMES,
    WRITE_TOOL_NAMES,
    MemoryTools,
    ToolSpec,
)

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "tool_specs.json"
BLESS = "BLESS_TOOL_CONTRACTS"
SURFACE = {
    "MEMORY_EXPLORE",
    "MEMORY_FETCH",
    "MEMORY_FORGET",
    "MEMORY_GET",
    "MEMORY_LIST",
    "MEMORY_RECALL",
    "MEMORY_STORE",
    "TOOL_NAMES",
    "WRITE_TOOL_NAMES",
    "MemoryTools",
    "ToolScope",
    "ToolSpec",
}


class ModesEngine(MemoryEngine):
    """The reference engine, described as serving only `modes` (and refusing the others in fetch)."""

    def __init__(self, modes: tuple[FetchMode, ...]) -> None:
        self._inner = ReferenceEngine()
        self._descriptor = self._inner.descriptor().model_copy(update={"fetch_modes": modes})

    def descriptor(self) -> EngineDescriptor:
        return self._descriptor

    async def health(self) -> EngineHealth:
        return await self._inner.health()

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        return await self._inner.recall(req)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        self._descriptor.ensure_mode(req.mode)
        return await self._inner.fetch(req)

    async def store(self, item: Item) -> StoreReceipt:
        return await self._inner.store(item)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        return await self._inner.forget(target)

    async def list(self, req: ListRequest) -> ListPage:
        return await self._inner.list(req)


def _as_json(specs: list[ToolSpec]) -> str:
    return json.dumps([s.model_dump(mode="json") for s in specs], indent=2, sort_keys=True, ensure_ascii=False)


def _by_name(specs: list[ToolSpec]) -> dict[str, dict[str, Any]]:
    return {s.name: s.model_dump(mode="json") for s in specs}


def test_specs_equal_the_frozen_fixture() -> None:
    rendered = _as_json(MemoryTools(ReferenceEngine()).specs()) + "\n"
    if os.environ.get(BLESS) == "1":
        FIXTURE.write_text(rendered, encoding="utf-8")
        pytest.skip(f"{BLESS}=1: rewrote {FIXTURE}; review and commit the change")
    assert FIXTURE.read_text(encoding="utf-8") == rendered, f"tool contracts changed; if on purpose, run with {BLESS}=1"


def test_names_are_the_seven_in_order() -> None:
    assert TOOL_NAMES == (
        MEMORY_RECALL,
        MEMORY_FETCH,
        MEMORY_LIST,
        MEMORY_GET,
        MEMORY_EXPLORE,
        MEMORY_STORE,
        MEMORY_FORGET,
    )
    assert TOOL_NAMES == (
        "memory_recall",
        "memory_fetch",
        "memory_list",
        "memory_get",
        "memory_explore",
        "memory_store",
        "memory_forget",
    )
    assert WRITE_TOOL_NAMES == ("memory_store", "memory_forget")
    assert [s.name for s in MemoryTools(ReferenceEngine()).specs()] == list(TOOL_NAMES)


def _ruff_order(name: str) -> tuple[int, str]:
    return (0 if name.isupper() else 1 if name[0].isupper() else 2), name


def test_package_exports_a_sorted_complete_all() -> None:
    package = importlib.import_module("engines.tools")
    exported = {k for k, v in vars(package).items() if not k.startswith("_") and not isinstance(v, types.ModuleType)}
    assert package.__all__ == sorted(package.__all__, key=_ruff_order)
    assert exported == set(package.__all__)
    assert set(package.__all__) >= SURFACE


def test_read_only_tools_offer_no_write_tool() -> None:
    names = [s.name for s in MemoryTools(ReferenceEngine()).read_only().specs()]
    assert names == [n for n in TOOL_NAMES if n not in WRITE_TOOL_NAMES]


@pytest.mark.parametrize(
    ("served", "enum", "default"),
    [
        ((FetchMode.VECTOR, FetchMode.KEYWORD), ["keyword", "vector"], "keyword"),
        ((FetchMode.VECTOR,), ["vector"], "vector"),
        ((FetchMode.HYBRID, FetchMode.KEYWORD), ["keyword", "hybrid"], "hybrid"),
        (tuple(FetchMode), ["keyword", "vector", "hybrid"], "hybrid"),
    ],
)
def test_fetch_mode_lists_exactly_the_served_modes(
    served: tuple[FetchMode, ...], enum: list[str], default: str
) -> None:
    narrowed = _by_name(MemoryTools(ModesEngine(served)).specs())
    full = _by_name(MemoryTools(ReferenceEngine()).specs())
    mode = narrowed[MEMORY_FETCH]["parameters"]["properties"]["mode"]
    assert mode["enum"] == enum
    assert mode["default"] == default
    # Nothing else changes: the rest of fetch, and every other tool, are the frozen ones.
    full[MEMORY_FETCH]["parameters"]["properties"]["mode"] = mode
    assert narrowed == full


def test_an_engine_serving_no_mode_gets_no_fetch_tool() -> None:
    names = [s.name for s in MemoryTools(ModesEngine(())).specs()]
    assert names == [n for n in TOOL_NAMES if n != MEMORY_FETCH]
    assert [s.name for s in MemoryTools(ModesEngine(())).read_only().specs()] == [
        MEMORY_RECALL,
        MEMORY_LIST,
        MEMORY_GET,
        MEMORY_EXPLORE,
    ]


def test_changing_a_spec_leaves_the_next_ones_alone() -> None:
    tools = MemoryTools(ReferenceEngine())
    first = tools.specs()
    first[0].parameters["properties"].clear()
    first[1].parameters["properties"]["filter"]["properties"].clear()
    assert _as_json(tools.specs()) + "\n" == FIXTURE.read_text(encoding="utf-8")


def _objects(schema: object) -> Iterator[dict[str, Any]]:
    if isinstance(schema, dict):
        if schema.get("type") == "object":
            yield schema
        for value in schema.values():
            yield from _objects(value)


def test_every_object_schema_is_closed_and_names_no_host_fixed_key() -> None:
    for spec in MemoryTools(ReferenceEngine()).specs():
        objects = list(_objects(spec.parameters))
        assert objects, spec.name
        for schema in objects:
            assert schema["additionalProperties"] is False
            assert not {"namespace", "reach"} & set(schema["properties"])
