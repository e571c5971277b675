"""Copying a v1 workspace into any engine, in batches through `store_many` (spec legacy-import §10).

One iterator runs the whole migration; each run of at most `MAX_STORE_MANY` items is scrubbed
(`pipeline.scrub`, like every other item), stored, and only then does the checkpoint move to the run's last
item and `on_batch` hear of it. A failed store raises `MigrationFailed` carrying the checkpoint saved before
that batch, so a host resumes by re-sending it: what the engine had stored of it comes back as replays.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterator
from itertools import islice

from engines.contract import MAX_STORE_MANY, EngineError, Error, MemoryEngine, Namespace, StoreItem, WireModel
from pipeline.legacy_checkpoint import Checkpoint
from pipeline.legacy_sections import ReadStats
from pipeline.legacy_workspace import DEFAULT_PAGE_SIZE, ImportedItem, LegacyWorkspace
from pipeline.scrub import Policy, scrub_item

OnBatch = Callable[[Checkpoint], Awaitable[None] | None]
"""Told each committed checkpoint, after the engine acknowledged its batch; sync or async."""


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
) -> MigrationReport:
    """Store every item after `from_checkpoint` (None: the start) in batches of at most 100.

    Items are scrubbed under `policy` (the default policy when None) and stored under `namespace` (the root,
    as the spec has it, unless the host moves them). `on_batch` exceptions propagate, as do legacy read
    failures (`LegacyImportError`), after which the host resumes from the checkpoint `on_batch` last got.
    """
    saved = from_checkpoint or Checkpoint.START
    report = MigrationReport(checkpoint=saved)
    items = workspace.items_from(saved, page_size, stats=stats)
    rules = policy or Policy()
    for run in _runs(items):
        batch = [_prepared(imported.item, rules, namespace) for imported in run]
        try:
            receipts = await engine.store_many(batch)
        except Error as err:
            raise MigrationFailed.stopped_at(saved, err) from err
        saved = run[-1].checkpoint
        replayed = sum(1 for receipt in receipts if receipt.replayed)
        report.stored += len(receipts) - replayed
        report.replayed += replayed
        report.batches += 1
        report.checkpoint = saved
        outcome = on_batch(saved)
        if inspect.isawaitable(outcome):
            await outcome
    return report


def prepared_items(
    workspace: LegacyWorkspace, policy: Policy | None = None, namespace: Namespace = Namespace.ROOT
) -> Iterator[StoreItem]:
    """Every item exactly as `migrate` stores it (scrubbed, under `namespace`), for hosts that compare."""
    rules = policy or Policy()
    return (_prepared(imported.item, rules, namespace) for imported in workspace.items())


def _prepared(item: StoreItem, policy: Policy, namespace: Namespace) -> StoreItem:
    clean = scrub_item(item, policy).value
    if namespace.is_root:
        return clean
    return clean.model_copy(update={"meta": clean.meta.model_copy(update={"namespace": namespace})})


def _runs(items: Iterator[ImportedItem]) -> Iterator[list[ImportedItem]]:
    while run := list(islice(items, MAX_STORE_MANY)):
        yield run


def _ignore(_: Checkpoint) -> None:
    """The batch callback of `migrate`: nothing to persist."""
