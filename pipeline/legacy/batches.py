"""A migration's batches: runs of at most `MAX_STORE_MANY` items, each scrubbed and placed, with the checkpoint
after its last item (docs/spec/legacy-import.md §10).

The same batches come from reading in place (`prepared_batches`) and from the helper process
(`pipeline.legacy.helper`), which runs exactly this function.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass
from itertools import islice

from engines.contract import MAX_STORE_MANY, Namespace, StoreItem
from pipeline.legacy.checkpoint import Checkpoint, SectionKeys, replace_keys
from pipeline.legacy.mapping import Skip
from pipeline.legacy.sections import ReadStats
from pipeline.legacy.workspace import LegacyWorkspace
from pipeline.scrub import Policy, scrub_item

Skipped = Counter[tuple[str, Skip]]
"""Rows skipped, by section and reason (as `ReadStats.skipped` counts them)."""


@dataclass(frozen=True)
class Batch:
    """Items as `store_many` gets them, and the keys of the checkpoint that covers them and all before."""

    items: list[StoreItem]
    keys: SectionKeys


def prepared_batches(
    workspace: LegacyWorkspace,
    after: Checkpoint,
    policy: Policy,
    namespace: Namespace,
    page_size: int,
    stats: ReadStats,
) -> Generator[Batch, None, None]:
    """The batches of every item after `after`; `stats` counts rows as they are read.

    Each batch is read before it is scrubbed, and the iterator reads nothing past a batch's last item until the
    next batch is asked for: `stats` then counts exactly the rows up to that item, so another reader that
    starts from the batch's checkpoint counts the rest.
    """
    keyed = workspace.keyed_items(after, page_size, stats=stats)
    keys = after.keys()
    while run := list(islice(keyed, MAX_STORE_MANY)):
        keys = replace_keys(keys, run)
        yield Batch([prepared(item, policy, namespace) for _, _, item in run], keys)


def prepared(item: StoreItem, policy: Policy, namespace: Namespace) -> StoreItem:
    """`item` scrubbed under `policy` and placed under `namespace` (the mapping's own place for the root)."""
    clean = scrub_item(item, policy).value
    if namespace.is_root:
        return clean
    return clean.model_copy(update={"meta": clean.meta.model_copy(update={"namespace": namespace})})


def taken(stats: ReadStats) -> tuple[int, Skipped]:
    """What `stats` counted so far, leaving it at zero (so each hand-over carries only its own rows)."""
    counted = (stats.rows, stats.skipped)
    stats.rows, stats.skipped = 0, Counter()
    return counted


def add(stats: ReadStats, rows: int, skipped: Skipped) -> None:
    """Count `rows` and `skipped` into `stats`."""
    stats.rows += rows
    stats.skipped.update(skipped)
