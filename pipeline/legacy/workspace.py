"""`LegacyWorkspace`: an opened v1 workspace, its items in order with their checkpoints, and its counts
(docs/spec/legacy-import.md §1, §5, §9, §11)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import TracebackType

from engines.contract import StoreItem, WireModel
from pipeline.legacy.checkpoint import Checkpoint, SectionKeys, replace_keys
from pipeline.legacy.mapping import NsClass, facet_gone, logical_namespace_of, namespace_class
from pipeline.legacy.paging import query
from pipeline.legacy.schema import Opened, open_workspace
from pipeline.legacy.sections import Read, ReadStats, read_sections

DEFAULT_PAGE_SIZE = 256


@dataclass(frozen=True)
class ImportedItem:
    """An item and the checkpoint covering it and every item before it."""

    item: StoreItem
    keys: SectionKeys

    @cached_property
    def checkpoint(self) -> Checkpoint:
        # Built when asked for: a migration reads one checkpoint a batch, not one an item.
        return Checkpoint.of_keys(self.keys)


class LegacyCounts(WireModel):
    """Rough per-section counts from aggregate queries: blank rows are not excluded, so they may overcount."""

    documents: int = 0
    chunks: int = 0
    conversations: int = 0
    learnings: int = 0
    profile: int = 0

    @property
    def total(self) -> int:
        return self.documents + self.chunks + self.conversations + self.learnings + self.profile


class LegacyWorkspace:
    """A v1 TinyCortex workspace opened read-only; close it (or use it as a context manager) when done.

    Item ids are fingerprints that include `meta.workspace`, the canonical path: resume from the same place.
    One iteration at a time: the databases are single connections.
    """

    def __init__(self, opened: Opened) -> None:
        """Use `LegacyWorkspace.open`."""
        self._opened = opened

    @classmethod
    def open(cls, path: str | Path) -> LegacyWorkspace:
        """Detect and open the workspace at `path` (`LegacyNotFound`, `NotLegacy` when it is none)."""
        return cls(open_workspace(path))

    @property
    def path(self) -> Path:
        """The canonical workspace directory."""
        return self._opened.path

    def items(self, page_size: int = DEFAULT_PAGE_SIZE, *, stats: ReadStats | None = None) -> Iterator[ImportedItem]:
        """Every item, sections in order; `stats`, when given, counts rows read and skipped."""
        return self.items_from(Checkpoint.START, page_size, stats=stats)

    def items_from(
        self, checkpoint: Checkpoint, page_size: int = DEFAULT_PAGE_SIZE, *, stats: ReadStats | None = None
    ) -> Iterator[ImportedItem]:
        """Exactly the items `items()` yields after the item that produced `checkpoint` (for an unchanged
        workspace). After a read failure (`LegacyImportError`) the iterator yields nothing more."""
        return self._items(checkpoint, self.keyed_items(checkpoint, page_size, stats=stats))

    def keyed_items(
        self, checkpoint: Checkpoint, page_size: int = DEFAULT_PAGE_SIZE, *, stats: ReadStats | None = None
    ) -> Iterator[Read]:
        """The items of `items_from` as `(section, key, item)`, without a checkpoint each: the checkpoint
        after an item is `checkpoint` with the keys of it and the items before it put in (`replace_keys`)."""
        if page_size < 1:
            raise ValueError(f"page_size must be at least 1, not {page_size}")
        return read_sections(self._opened, checkpoint, page_size, stats if stats is not None else ReadStats())

    @staticmethod
    def _items(checkpoint: Checkpoint, keyed: Iterator[Read]) -> Iterator[ImportedItem]:
        keys = checkpoint.keys()
        for read in keyed:
            keys = replace_keys(keys, (read,))
            yield ImportedItem(read[2], keys)

    def counts(self) -> LegacyCounts:
        """Per-section counts by aggregate queries; a missing section counts 0."""
        counts = LegacyCounts()
        main, chunks = self._opened.main, self._opened.chunks
        if chunks is not None:
            pairs = "SELECT COUNT(*) FROM (SELECT DISTINCT source_kind, source_id FROM mem_tree_chunks)"
            counts.chunks = query(chunks.conn, pairs, {})[0][0]
        if main is None:
            return counts
        grouped = f"SELECT namespace, {main.column('logical_namespace')}, COUNT(*) FROM memory_docs GROUP BY 1, 2"
        for namespace, stated, count in query(main.conn, grouped, {}):
            ns_class = namespace_class(logical_namespace_of(namespace, stated))
            if ns_class is NsClass.DOCUMENT:
                counts.documents += count
            elif ns_class is not NsClass.EVENT:
                counts.learnings += count
        sessions = "SELECT COUNT(DISTINCT session_id) FROM episodic_log"
        counts.conversations = query(main.conn, sessions, {})[0][0]
        facets = f"SELECT {main.column('state')}, {main.column('user_state')}, COUNT(*) FROM user_profile GROUP BY 1, 2"
        counts.profile = sum(n for s, u, n in query(main.conn, facets, {}) if facet_gone(s, u) is None)
        return counts

    def close(self) -> None:
        self._opened.close()

    def __enter__(self) -> LegacyWorkspace:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
