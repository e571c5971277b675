"""Erasures: ask for one (`request_erasure`) and follow it (`erasure_status`).

A request is answered at once with its receipt; the erasure runs on an `ErasureRunner`: here, in process
(embedded mode), or on the erase workers (`tm.erase`). The tombstone is written as the request is taken,
so from that moment new syncs of what it covers are refused and running jobs drop what they would store, and
the agent tools of the API and of `tinymemory mcp` (`guarded_tools`) refuse to store into it.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from engines.contract import ConflictError, ItemKind, MemoryEngine, Namespace, NotFoundError
from engines.tools import MEMORY_STORE, MemoryTools, ToolScope
from sources import SourceEntry
from worker.control.results import ErasureRunner
from worker.erasures import ErasureReceipt, ErasureRequest, ErasureTarget, Tombstone, refusing, scopes_over
from worker.state.base import StateStore

CLI_CALLER = "cli"
"""Who asked, in the receipt of an erasure asked for on the command line (the API records the token's name)."""


async def request_erasure(
    state: StateStore, runner: ErasureRunner, target: ErasureTarget, requested_by: str
) -> ErasureReceipt:
    """Ask for `target` to be erased; its receipt, queued. The same request (target and kinds) while an
    earlier one is queued, running or completed is answered with that one's receipt instead (a queued one is
    handed to the runner again, in case its first hand-over was lost). A source must be configured, or
    erased before."""
    source_id = target.source_id
    if source_id is not None and state.get_source(source_id) is None and not state.tombstones([target.scope]):
        raise NotFoundError(f"no source {source_id!r}; `tinymemory sources list` shows the configured ones")
    receipt = state.open_erasure(ErasureRequest(id=uuid.uuid4().hex, target=target, requested_by=requested_by))
    if receipt.status == "queued":
        state.put_tombstone(Tombstone.of(receipt))
        await runner.submit(receipt.id)
    return receipt


def erasure_status(state: StateStore, erasure_id: str) -> ErasureReceipt:
    """The receipt of `erasure_id`; `NotFoundError` naming it when there is none."""
    receipt = state.get_erasure(erasure_id)
    if receipt is None:
        raise NotFoundError(f"no erasure {erasure_id!r}; a request prints the id to ask about")
    return receipt


def refuse_erased(state: StateStore, entry: SourceEntry, doing: str) -> None:
    """`ConflictError` when a tombstone erases every kind of `entry` (its id, or a namespace it is placed in):
    what an erasure covers stays erased."""
    erased = refusing(state.tombstones(scopes_over(entry.id, [entry.placed_at()])))
    if erased is not None:
        raise ConflictError(
            f"cannot {doing} source {entry.id!r}: it is erased (erasure {erased.erasure_id}, "
            f"`tinymemory erase status {erased.erasure_id}`); what an erasure covers stays erased, so configure "
            "the source again under another id (--id) or namespace"
        )


def refuse_erased_store(state: StateStore, namespace: Namespace, kind: ItemKind) -> None:
    """`ConflictError` when an erasure covers storing an item of `kind` at `namespace` (an erased account stays
    erased): for writes that come in without a source, such as the API's and the agent tools' stores."""
    erased = next((t for t in state.tombstones(scopes_over(None, [namespace])) if t.covers(kind)), None)
    if erased is not None:
        raise ConflictError(
            f"cannot store a {kind} at {namespace}: it was erased (erasure {erased.erasure_id}, "
            f"`tinymemory erase status {erased.erasure_id}`); what an erasure covers stays erased, so store it "
            "under another namespace"
        )


def guarded_tools(state: StateStore, engine: MemoryEngine, scope: ToolScope) -> MemoryTools:
    """The memory tools over `engine` under `scope`, whose `memory_store` is refused (`ConflictError`, before
    anything is stored) where an erasure, queued, running or done, covers the item it would store."""
    return _GuardedTools(state, engine, scope)


class _GuardedTools(MemoryTools):
    def __init__(self, state: StateStore, engine: MemoryEngine, scope: ToolScope) -> None:
        super().__init__(engine, scope)
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
