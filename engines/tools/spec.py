"""`ToolSpec`, one tool as a model sees it, and the list `MemoryTools.specs()` offers
(docs/spec/tools-and-context.md §3)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import ConfigDict

from engines.contract import FetchMode, WireModel
from engines.tools.names import MEMORY_FETCH, TOOL_NAMES, WRITE_TOOL_NAMES
from engines.tools.schemas import DESCRIPTIONS, parameters


class ToolSpec(WireModel):
    """A tool's name, its frozen description and its parameters as a JSON Schema (closed objects)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    parameters: dict[str, Any]


def served_modes(modes: Iterable[FetchMode]) -> list[FetchMode]:
    """The modes an engine serves, each once, in `FetchMode` order whatever order it lists them in."""
    held = set(modes)
    return [mode for mode in FetchMode if mode in held]


def tool_specs(modes: list[FetchMode], writes: bool) -> list[ToolSpec]:
    """The tools to offer, in `TOOL_NAMES` order: no write tools unless `writes`, no fetch without `modes`."""
    offered = [
        name for name in TOOL_NAMES if (writes or name not in WRITE_TOOL_NAMES) and (modes or name != MEMORY_FETCH)
    ]
    return [ToolSpec(name=name, description=DESCRIPTIONS[name], parameters=parameters(name, modes)) for name in offered]
