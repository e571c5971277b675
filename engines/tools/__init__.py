"""Engine-neutral products on the contract: the seven memory tools a model calls (`MemoryTools`) and the
`context.md` compiler (`engines.tools.context`); spec: tools-and-context.md."""

from engines.tools.context import Brief, ContextCompiler, ContextDoc, ContextSpec, compile_context, default_briefs
from engines.tools.memory import MemoryTools, Prepare
from engines.tools.names import (
    MEMORY_EXPLORE,
    MEMORY_FETCH,
    MEMORY_FORGET,
    MEMORY_GET,
    MEMORY_LIST,
    MEMORY_RECALL,
    MEMORY_STORE,
    TOOL_NAMES,
    WRITE_TOOL_NAMES,
)
from engines.tools.scope import ToolScope
from engines.tools.spec import ToolSpec

__all__ = [
    "MEMORY_EXPLORE",
    "MEMORY_FETCH",
    "MEMORY_FORGET",
    "MEMORY_GET",
    "MEMORY_LIST",
    "MEMORY_RECALL",
    "MEMORY_STORE",
    "TOOL_NAMES",
    "WRITE_TOOL_NAMES",
    "Brief",
    "ContextCompiler",
    "ContextDoc",
    "ContextSpec",
    "MemoryTools",
    "Prepare",
    "ToolScope",
    "ToolSpec",
    "compile_context",
    "default_briefs",
]
