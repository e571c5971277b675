"""Deliberately broken engines, one per row of docs/spec/contract.md §18.8, to prove the conformance suite can fail.

Each wrapper subclasses `DelegatingEngine` and overrides only the behaviour it breaks; rows 20 to 25
live in `broken_removal.py`. `BROKEN` tables each wrapper with the check that must be the first to fail.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Awaitable
from dataclasses import dataclass

from engines.conformance import ReferenceEngine, run, run_isolation
from engines.contract import (
    Citation,
    EngineDescriptor,
    EngineHealth,
    EraseReport,
    EraseRequest,
    ExplorePage,
    ExploreRequest,
    Exported,
    ExportPage,
    FetchMode,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Hit,
    Item,
    ItemId,
    ItemKind,
    Learning,
    ListPage,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    NotFoundError,
    Reach,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
)
from tests.conformance.broken_removal import (
    EmptyFilterForgetsAll,
    EraseIgnoresDescendants,
    EraseRemembers,
    ForgetCountsNamedIds,
    ForgetIgnoresTags,
    ForgetSkipsSandboxes,
)
from tests.conformance.delegating import DelegatingEngine, Hits, Ids, Items, ListingEdit, Receipts


# 1
class DownHealth(DelegatingEngine):
    async def health(self) -> EngineHealth:
        return EngineHealth.down("broken")


# 2
class AlwaysReplayed(DelegatingEngine):
    async def store(self, item: Item) -> StoreReceipt:
        receipt = await self.inner.store(item)
        return receipt.model_copy(update={"replayed": True})


# 3
class TaglessListing(ListingEdit):
    def edit(self, hit: Hit) -> Hit:
        return hit.model_copy(update={"meta": hit.meta.model_copy(update={"tags": []})})


# 4
class UntitledListing(ListingEdit):
    def edit(self, hit: Hit) -> Hit:
        if hit.kind is not ItemKind.DOCUMENT or not hit.text.startswith("# "):
            return hit
        return hit.model_copy(update={"text": hit.text.split("\n\n", 1)[-1]})


# 5
class ScoredListing(ListingEdit):
    def edit(self, hit: Hit) -> Hit:
        return hit.model_copy(update={"score": 1.0})


# 6
class CursorlessListing(DelegatingEngine):
    async def list(self, req: ListRequest) -> ListPage:
        page = await self.inner.list(req.model_copy(update={"cursor": None}))
        return page.model_copy(update={"next_cursor": "again"})


# 7
class RandomIds(DelegatingEngine):
    """Every id is swapped for a random one made on first sight, and swapped back on the way in."""

    def __init__(self, inner: MemoryEngine | None = None) -> None:
        super().__init__(inner)
        self._out: dict[ItemId, ItemId] = {}
        self._in: dict[ItemId, ItemId] = {}

    def out(self, item_id: ItemId) -> ItemId:
        if item_id not in self._out:
            fake = secrets.token_hex(20)
            self._out[item_id], self._in[fake] = fake, item_id
        return self._out[item_id]

    def back(self, ids: Ids) -> Ids:
        return [self._in.get(item_id, item_id) for item_id in ids]

    def hits(self, hits: Hits) -> Hits:
        return [hit.model_copy(update={"id": self.out(hit.id)}) for hit in hits]

    async def store(self, item: Item) -> StoreReceipt:
        receipt = await self.inner.store(item)
        return receipt.model_copy(update={"id": self.out(receipt.id)})

    async def store_many(self, items: Items) -> Receipts:
        receipts = await self.inner.store_many(items)
        return [r.model_copy(update={"id": self.out(r.id)}) for r in receipts]

    async def list(self, req: ListRequest) -> ListPage:
        page = await self.inner.list(req)
        return page.model_copy(update={"items": self.hits(page.items)})

    async def fetch(self, req: FetchRequest) -> FetchPage:
        page = await self.inner.fetch(req)
        return page.model_copy(update={"hits": self.hits(page.hits)})

    async def get(self, req: GetRequest) -> Hits:
        return self.hits(await self.inner.get(req.model_copy(update={"ids": self.back(req.ids)})))

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        answer = await self.inner.recall(req)
        cited = [c.model_copy(update={"id": self.out(c.id)}) for c in answer.citations]
        return answer.model_copy(update={"citations": cited})

    async def export(self, req: ListRequest) -> ExportPage:
        page = await self.inner.export(req)
        entries = [Exported(id=self.out(e.id), item=e.item) for e in page.items]
        return page.model_copy(update={"items": entries, "incomplete": [self.out(i) for i in page.incomplete]})

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if target.ids is not None:
            target = ForgetTarget.by_ids(self.back(target.ids))
        return await self.inner.forget(target)

    async def forget_within(self, ids: Ids, reach: Reach) -> ForgetReport:
        return await self.inner.forget_within(self.back(ids), reach)


# 8
class EvidencelessExport(DelegatingEngine):
    async def export(self, req: ListRequest) -> ExportPage:
        page = await self.inner.export(req)
        entries = [_without_evidence(entry) for entry in page.items]
        return page.model_copy(update={"items": entries})


def _without_evidence(entry: Exported) -> Exported:
    if not isinstance(entry.item, Learning):
        return entry
    return Exported(id=entry.id, item=entry.item.model_copy(update={"evidence": None}))


# 9
class IncompleteExport(DelegatingEngine):
    async def export(self, req: ListRequest) -> ExportPage:
        page = await self.inner.export(req)
        return page.model_copy(update={"incomplete": [entry.id for entry in page.items[:1]]})


# 10
class DoubledReplays(DelegatingEngine):
    """Once an item is stored again, the listing shows it twice; export is untouched."""

    def __init__(self, inner: MemoryEngine | None = None) -> None:
        super().__init__(inner)
        self._replayed: set[ItemId] = set()

    async def store(self, item: Item) -> StoreReceipt:
        receipt = await self.inner.store(item)
        if receipt.replayed:
            self._replayed.add(receipt.id)
        return receipt

    async def list(self, req: ListRequest) -> ListPage:
        page = await self.inner.list(req)
        doubled = [copy for hit in page.items for copy in [hit] * (2 if hit.id in self._replayed else 1)]
        return page.model_copy(update={"items": doubled})


# 11
class OverCountedExplore(DelegatingEngine):
    async def explore(self, req: ExploreRequest) -> ExplorePage:
        page = await self.inner.explore(req)
        return page.model_copy(update={"total": page.total + 1})


# 12
class GetRefusesUnknown(DelegatingEngine):
    async def get(self, req: GetRequest) -> Hits:
        hits = await self.inner.get(req)
        found = {hit.id for hit in hits}
        for item_id in req.ids:
            if item_id not in found:
                raise NotFoundError(f"item `{item_id}` is not held")
        return hits


# 13
class EmptyBatchAccepted(DelegatingEngine):
    async def store_many(self, items: Items) -> Receipts:
        if not items:
            return []
        return await self.inner.store_many(items)


# 14
class ReversedReceipts(DelegatingEngine):
    async def store_many(self, items: Items) -> Receipts:
        return list(reversed(await self.inner.store_many(items)))


# 15
class ExactFolder(DelegatingEngine):
    """`folder` matches only an equal folder: hits below the named one are dropped."""

    @staticmethod
    def exact(filter: MetaFilter, hits: Hits) -> Hits:
        if filter.folder is None:
            return hits
        return [hit for hit in hits if hit.meta.folder == filter.folder]

    async def list(self, req: ListRequest) -> ListPage:
        page = await self.inner.list(req)
        return page.model_copy(update={"items": self.exact(req.filter, page.items)})

    async def fetch(self, req: FetchRequest) -> FetchPage:
        page = await self.inner.fetch(req)
        return page.model_copy(update={"hits": self.exact(req.filter, page.hits)})


# 16
class FetchIgnoresLanguage(DelegatingEngine):
    async def fetch(self, req: FetchRequest) -> FetchPage:
        loose = req.filter.model_copy(update={"language": None})
        return await self.inner.fetch(req.model_copy(update={"filter": loose}))


# 17
class UndeclaredModes(DelegatingEngine):
    """Declares only hybrid fetch, yet serves every mode (the inner engine checks its own descriptor)."""

    def descriptor(self) -> EngineDescriptor:
        return self.inner.descriptor().model_copy(update={"fetch_modes": (FetchMode.HYBRID,)})


# 18
class NoInherit(DelegatingEngine):
    """Every reach reads as if `inherit` were false, in filters, get and erase alike."""

    @staticmethod
    def reach(reach: Reach | None) -> Reach | None:
        return None if reach is None else reach.model_copy(update={"inherit": False})

    def scoped(self, filter: MetaFilter) -> MetaFilter:
        return filter.model_copy(update={"reach": self.reach(filter.reach)})

    async def list(self, req: ListRequest) -> ListPage:
        return await self.inner.list(req.model_copy(update={"filter": self.scoped(req.filter)}))

    async def fetch(self, req: FetchRequest) -> FetchPage:
        return await self.inner.fetch(req.model_copy(update={"filter": self.scoped(req.filter)}))

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        return await self.inner.recall(req.model_copy(update={"filter": self.scoped(req.filter)}))

    async def explore(self, req: ExploreRequest) -> ExplorePage:
        return await self.inner.explore(req.model_copy(update={"filter": self.scoped(req.filter)}))

    async def export(self, req: ListRequest) -> ExportPage:
        return await self.inner.export(req.model_copy(update={"filter": self.scoped(req.filter)}))

    async def get(self, req: GetRequest) -> Hits:
        return await self.inner.get(req.model_copy(update={"reach": self.reach(req.reach)}))

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if target.filter is not None:
            target = ForgetTarget.by_filter(self.scoped(target.filter))
        return await self.inner.forget(target)

    async def forget_within(self, ids: Ids, reach: Reach) -> ForgetReport:
        return await self.inner.forget_within(ids, reach.model_copy(update={"inherit": False}))

    async def erase(self, req: EraseRequest) -> EraseReport:
        return await self.inner.erase(req.model_copy(update={"reach": self.reach(req.reach)}))


# 19
class GetIgnoresReach(DelegatingEngine):
    async def get(self, req: GetRequest) -> Hits:
        return await self.inner.get(req.model_copy(update={"reach": None}))


# 26
class PhantomCitations(DelegatingEngine):
    async def recall(self, req: RecallRequest) -> RecallAnswer:
        answer = await self.inner.recall(req)
        return answer.model_copy(update={"citations": [_phantom(c) for c in answer.citations]})


def _phantom(citation: Citation) -> Citation:
    fake = hashlib.sha256(f"phantom {citation.id}".encode()).hexdigest()[:40]
    return citation.model_copy(update={"id": fake})


# 27
class SharedHandle(DelegatingEngine):
    """A faithful handle, broken only by being paired with another user's handle on the same store."""


@dataclass(frozen=True)
class Breakage:
    """One row of docs/spec/contract.md §18.8: the wrapper, and the check that must be the first to fail."""

    number: int
    wrapper: type[DelegatingEngine]
    check: str
    shared: bool = False

    def exercise(self) -> Awaitable[None]:
        """`run` on the wrapper, or, for a shared store, `run_isolation` on two handles over one engine."""
        if self.shared:
            inner = ReferenceEngine()
            return run_isolation(self.wrapper(inner), self.wrapper(inner))
        return run(self.wrapper())

    @property
    def name(self) -> str:
        return f"{self.number:02d}-{self.wrapper.__name__}"


_Row = tuple[int, type[DelegatingEngine], str]

_ROWS: tuple[_Row, ...] = (
    (1, DownHealth, "health"),
    (2, AlwaysReplayed, "round_trip"),
    (3, TaglessListing, "round_trip"),
    (4, UntitledListing, "round_trip"),
    (5, ScoredListing, "round_trip"),
    (6, CursorlessListing, "round_trip"),
    (7, RandomIds, "export"),
    (8, EvidencelessExport, "export"),
    (9, IncompleteExport, "export"),
    (10, DoubledReplays, "replay"),
    (11, OverCountedExplore, "explore"),
    (12, GetRefusesUnknown, "get"),
    (13, EmptyBatchAccepted, "store_many"),
    (14, ReversedReceipts, "store_many"),
    (15, ExactFolder, "fetch_filters"),
    (16, FetchIgnoresLanguage, "fetch_filters"),
    (17, UndeclaredModes, "unsupported_modes"),
    (18, NoInherit, "namespaces"),
    (19, GetIgnoresReach, "namespaces"),
    (20, ForgetSkipsSandboxes, "namespaces"),
    (21, EmptyFilterForgetsAll, "empty_forget"),
    (22, ForgetCountsNamedIds, "forget_by_id"),
    (23, ForgetIgnoresTags, "forget_by_filter"),
    (24, EraseIgnoresDescendants, "erase"),
    (25, EraseRemembers, "erase"),
    (26, PhantomCitations, "recall"),
)

BROKEN: tuple[Breakage, ...] = (
    *(Breakage(number, wrapper, check) for number, wrapper, check in _ROWS),
    Breakage(27, SharedHandle, "isolation", shared=True),
)
