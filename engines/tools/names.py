"""The seven tool names: frozen, since models and hosts address the tools by them
(docs/spec/tools-and-context.md §1)."""

from __future__ import annotations

MEMORY_RECALL = "memory_recall"
MEMORY_FETCH = "memory_fetch"
MEMORY_LIST = "memory_list"
MEMORY_GET = "memory_get"
MEMORY_EXPLORE = "memory_explore"
MEMORY_STORE = "memory_store"
MEMORY_FORGET = "memory_forget"

TOOL_NAMES: tuple[str, ...] = (
    MEMORY_RECALL,
    MEMORY_FETCH,
    MEMORY_LIST,
    MEMORY_GET,
    MEMORY_EXPLORE,
    MEMORY_STORE,
    MEMORY_FORGET,
)
"""Every tool, in the order `specs()` offers them."""

WRITE_TOOL_NAMES: tuple[str, ...] = (MEMORY_STORE, MEMORY_FORGET)
"""The tools that change memory; read-only tools neither offer nor run them."""
