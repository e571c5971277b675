"""The memory tools as the product serves them to agents (the API's `/v1/tools`, `/mcp`, `tinymemory mcp`).

Two rules hold for what a model stores, as for what a source brings: it is scrubbed before it is stored
(the pipeline's scrubber, so a secret an agent saw in a tool's output does not land in memory), and it is
refused where an erasure, queued, running or done, covers it (what an erasure covers stays erased).
"""

from __future__ import annotations

import json
from typing import Any

from engines.contract import ItemKind, MemoryEngine, StoreItem
from engines.tools import MEMORY_STORE, MemoryTools, ToolScope
from pipeline.scrub import scrub_item
from worker.erasure.operations import refuse_erased_store
from worker.state.base import StateStore


def guarded_tools(state: StateStore, engine: MemoryEngine, scope: ToolScope) -> MemoryTools:
    """The memory tools over `engine` under `scope`: `memory_store` scrubs the item, and is refused
    (`ConflictError`, before anything is stored) where an erasure covers it."""
    return _GuardedTools(state, engine, scope)


def _scrubbed(item: StoreItem) -> StoreItem:
    return scrub_item(item).value


class _GuardedTools(MemoryTools):
    def __init__(self, state: StateStore, engine: MemoryEngine, scope: ToolScope) -> None:
        super().__init__(engine, scope, prepare=_scrubbed)
        self._state = state

    def with_scope(self, scope: ToolScope) -> MemoryTools:
        # The builders (placed_at, read_only...) go through here: the guard stays on whatever they return.
        return _GuardedTools(self._state, self.engine, scope)

    async def call(self, name: str, args: dict[str, Any] | str | bytes | None) -> str:
        # Read-only tools refuse the write themselves, with their own message.
        if name == MEMORY_STORE and self.scope.writes:
            for kind in _stored_kinds(args):
                refuse_erased_store(self._state, self.scope.place, kind)
        return await super().call(name, args)


def _stored_kinds(args: dict[str, Any] | str | bytes | None) -> list[ItemKind]:
    """The kinds a `memory_store` call's arguments name: exactly one when they are valid, which `call` checks
    next (arguments it cannot read name none, and are refused there)."""
    if isinstance(args, str | bytes):
        try:
            args = json.loads(args)
        except (ValueError, RecursionError):
            return []
    return [kind for kind in ItemKind if isinstance(args, dict) and kind.value in args]
