"""Erasures: ask for one (`request_erasure`) and follow it (`erasure_status`).

A request is answered at once with its receipt; the erasure runs on an `ErasureRunner`: here, in process
(embedded mode), or on the erase workers (`tm.erase`). The tombstone is written as the request is taken,
so from that moment new syncs of what it covers are refused and running jobs drop what they would store, and
the agent tools of the API and of `tinymemory mcp` (`worker.control.tools`) refuse to store into it.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from engines.contract import ConflictError, ItemKind, Namespace, NotFoundError
from sources import SourceEntry
from worker.erasure.request import ErasureReceipt, ErasureRequest, ErasureTarget, Tombstone, refusing, scopes_over
from worker.state.base import StateStore


class ErasureRunner(Protocol):
    """Runs erasures: as tasks of this process (embedded) or on the erase workers' queue (distributed).

    `submit` returns once the erasure is handed over, never when it ends; handing over the same id twice
    is harmless (the second run finds it done).
    """

    async def submit(self, erasure_id: str) -> None: ...


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
