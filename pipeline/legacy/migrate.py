"""Copying a v1 workspace into any engine, in batches through `store_many` (docs/spec/legacy-import.md §10).

One iterator runs the whole migration; each run of at most `MAX_STORE_MANY` items is scrubbed
(`pipeline.scrub`, like every other item), stored, and only then does the checkpoint move to the run's last
item and `on_batch` hear of it. A failed store raises `MigrationFailed` carrying the checkpoint saved before
that batch, so a host resumes by re-sending it: what the engine had stored of it comes back as replays.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import aclosing
from dataclasses import dataclass

from engines.contract import (
    EngineError,
    Error,
    MemoryEngine,
    Namespace,
    StoreItem,
    StoreReceipt,
    WireModel,
)
from pipeline.legacy.batches import prepared
from pipeline.legacy.checkpoint import Checkpoint, SectionKeys
from pipeline.legacy.helper import HelperProcess, ReadPlan, read_batches
from pipeline.legacy.sections import ReadStats
from pipeline.legacy.workspace import DEFAULT_PAGE_SIZE, LegacyWorkspace
from pipeline.scrub import Policy

OnBatch = Callable[[Checkpoint], Awaitable[None] | None]
"""Told each committed checkpoint, after the engine acknowledged its batch; sync or async."""
Keep = Callable[[list[StoreItem]], list[StoreItem]]
"""Which of a batch's items to send, asked right before it is sent; it may raise to stop the migration."""

HELPER_FROM_ITEMS = 5_000
"""Workspaces of at least this many items (as `LegacyWorkspace.counts` reckons) are read by a helper process:
below it, the process would cost more to start than it saves."""
HELPER_MIN_CPUS = 2
"""The CPUs a helper process needs by default: one for it, one for the store. On one CPU it only adds its own
costs. On two shared virtual CPUs, bench/legacy_import.py measured 50,000 rows into the local engine at 0.80 to
0.84 of `store_many` alone with it, 0.66 to 0.72 without, for about a fifth more CPU in all (it pickles what
this process unpickles, about 18 µs an item)."""


class MigrationReport(WireModel):
    """What a migration did: items newly stored, items the engine already held, batches, where it stands."""

    stored: int = 0
    replayed: int = 0
    batches: int = 0
    checkpoint: Checkpoint = Checkpoint.START


class MigrationFailed(EngineError):  # noqa: N818 - the spec's name
    """A batch the engine refused or could not take; `checkpoint` is the last one saved, to resume from."""

    def __init__(self, message: str, checkpoint: Checkpoint) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint

    @classmethod
    def stopped_at(cls, checkpoint: Checkpoint, cause: Error) -> MigrationFailed:
        return cls(f"legacy import stopped; resume from {checkpoint.to_json()}: {cause}", checkpoint)

    def __reduce__(self) -> tuple[type[MigrationFailed], tuple[str, Checkpoint]]:  # type: ignore[override]
        return (type(self), (self.message, self.checkpoint))


async def migrate(
    engine: MemoryEngine,
    workspace: LegacyWorkspace,
    from_checkpoint: Checkpoint | None = None,
    *,
    policy: Policy | None = None,
    namespace: Namespace = Namespace.ROOT,
) -> MigrationReport:
    """`migrate_with` without a batch callback."""
    return await migrate_with(engine, workspace, from_checkpoint, _ignore, policy=policy, namespace=namespace)


async def migrate_with(
    engine: MemoryEngine,
    workspace: LegacyWorkspace,
    from_checkpoint: Checkpoint | None,
    on_batch: OnBatch,
    *,
    policy: Policy | None = None,
    namespace: Namespace = Namespace.ROOT,
    page_size: int = DEFAULT_PAGE_SIZE,
    stats: ReadStats | None = None,
    report: MigrationReport | None = None,
    keep: Keep | None = None,
    helper_from: int | None = HELPER_FROM_ITEMS,
) -> MigrationReport:
    """Store every item after `from_checkpoint` (None: the start) in batches of at most 100.

    Items are scrubbed under `policy` (the default policy when None) and stored under `namespace` (the root,
    as the spec has it, unless the host moves them). `on_batch` exceptions propagate, as do legacy read
    failures (`LegacyImportError`), after which the host resumes from the checkpoint `on_batch` last got.

    `stats` counts the rows read and skipped; `report`, when given, is the report this call fills in (and
    returns), so `on_batch` can read the counts so far. `keep`, when given, is asked which of a batch's items
    to send right before it is sent (after the batch before was acknowledged); what it raises propagates.

    Into an engine that stores over the network, the next batch is read and scrubbed while the engine stores the
    one before; it is sent only once that one is acknowledged. Into one that stores in this process
    (`MemoryEngine.stores_in_process`), each batch is read after the one before is stored. A workspace of at
    least `helper_from` items (None: never; 0: always, whatever the CPUs) is read by a helper process
    (`pipeline.legacy.helper`) once it is up, on a machine of `HELPER_MIN_CPUS`, which reads ahead while the
    engine stores; which changes no item, checkpoint or count.
    """
    run = _Migration(engine, on_batch, from_checkpoint or Checkpoint.START, report)
    plan = ReadPlan(policy or Policy(), namespace, page_size)
    helper = HelperProcess.start(workspace, plan) if _helped(workspace, helper_from) else None
    batches = read_batches(workspace, run.saved, plan, stats if stats is not None else ReadStats(), helper)
    flight: _Flight | None = None
    try:
        async with aclosing(batches):  # which stops the helper, before a batch in flight is landed
            async for batch in batches:
                if flight is not None:
                    landed, flight = flight, None
                    await run.settle(landed)
                items = batch.items if keep is None else keep(batch.items)
                flight = _Flight(_sent(engine, items), batch.keys)
                if engine.stores_in_process:
                    # Reading the next batch here meanwhile only takes turns with the store on the GIL: at 50,000
                    # rows into the local engine, 0.74-0.81 of `store_many` alone against 0.75-0.85 one after the
                    # other. A helper process reads ahead anyway.
                    landed, flight = flight, None
                    await run.settle(landed)
                else:
                    await asyncio.sleep(0)  # let the store start before the next batch is read
    except BaseException as err:
        if flight is not None:
            await _land_after(run, flight, err)
        raise
    finally:
        if helper is not None:
            helper.close()  # had the batches never been asked for, their generator would not have
    if flight is not None:
        await run.settle(flight)
    return run.report


def _helped(workspace: LegacyWorkspace, helper_from: int | None) -> bool:
    if helper_from is None or helper_from <= 0:
        return helper_from is not None
    return len(os.sched_getaffinity(0)) >= HELPER_MIN_CPUS and workspace.counts().total >= helper_from


def _sent(engine: MemoryEngine, items: list[StoreItem]) -> asyncio.Future[list[StoreReceipt]]:
    if items:
        return asyncio.ensure_future(engine.store_many(items))
    nothing: asyncio.Future[list[StoreReceipt]] = asyncio.get_running_loop().create_future()
    nothing.set_result([])  # every item was left out: the checkpoint still moves past them
    return nothing


@dataclass(frozen=True)
class _Flight:
    """A batch sent to the engine and not yet acknowledged, with its last item (whose checkpoint it commits)."""

    receipts: asyncio.Future[list[StoreReceipt]]
    keys: SectionKeys


class _Migration:
    """The state of one `migrate_with` call: the last committed checkpoint and the report."""

    def __init__(
        self, engine: MemoryEngine, on_batch: OnBatch, start: Checkpoint, report: MigrationReport | None
    ) -> None:
        self.engine = engine
        self.on_batch = on_batch
        self.saved = start
        self.report = report if report is not None else MigrationReport()
        self.report.checkpoint = start

    async def settle(self, flight: _Flight) -> None:
        """Wait for the batch's receipts, then commit its checkpoint and tell `on_batch`."""
        try:
            receipts = await flight.receipts
        except Error as err:
            raise MigrationFailed.stopped_at(self.saved, err) from err
        self.saved = Checkpoint.of_keys(flight.keys)
        replayed = sum(1 for receipt in receipts if receipt.replayed)
        self.report.stored += len(receipts) - replayed
        self.report.replayed += replayed
        self.report.batches += 1
        self.report.checkpoint = self.saved
        outcome = self.on_batch(self.saved)
        if inspect.isawaitable(outcome):
            await outcome


async def _land_after(run: _Migration, flight: _Flight, err: BaseException) -> None:
    """After a read failure, finish the batch already sent, so it stays stored and checkpointed; when the
    migration itself was cancelled, cancel it (a resume re-sends it, and what it stored replays)."""
    if isinstance(err, Exception):
        await run.settle(flight)
    else:
        flight.receipts.cancel()


def prepared_items(
    workspace: LegacyWorkspace, policy: Policy | None = None, namespace: Namespace = Namespace.ROOT
) -> Iterator[StoreItem]:
    """Every item exactly as `migrate` stores it (scrubbed, under `namespace`), for hosts that compare."""
    rules = policy or Policy()
    return (prepared(imported.item, rules, namespace) for imported in workspace.items())


def _ignore(_: Checkpoint) -> None:
    """The batch callback of `migrate`: nothing to persist."""
