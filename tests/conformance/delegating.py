"""`DelegatingEngine`: a wrapper that forwards every `MemoryEngine` method, defaulted ones included.

The broken engines of `broken.py` subclass it and override only what they break.
"""

from __future__ import annotations

from engines.conformance import ReferenceEngine
from engines.contract import (
    EngineDescriptor,
    EngineHealth,
    EraseReport,
    EraseRequest,
    ExplorePage,
    ExploreRequest,
    ExportPage,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Hit,
    Item,
    ItemId,
    ListPage,
    ListRequest,
    MemoryEngine,
    Reach,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
)

# Module-level aliases: inside an engine class `list` names the method, not the builtin.
Hits = list[Hit]
Ids = list[ItemId]
Receipts = list[StoreReceipt]
Items = list[Item]


class DelegatingEngine(MemoryEngine):
    """Forwards every call to `inner` unchanged."""

    def __init__(self, inner: MemoryEngine | None = None) -> None:
        self.inner = inner if inner is not None else ReferenceEngine()

    def descriptor(self) -> EngineDescriptor:
        return self.inner.descriptor()

    async def health(self) -> EngineHealth:
        return await self.inner.health()

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        return await self.inner.recall(req)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        return await self.inner.fetch(req)

    async def store(self, item: Item) -> StoreReceipt:
        return await self.inner.store(item)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        return await self.inner.forget(target)

    async def forget_within(self, ids: Ids, reach: Reach) -> ForgetReport:
        return await self.inner.forget_within(ids, reach)

    async def store_many(self, items: Items) -> Receipts:
        return await self.inner.store_many(items)

    async def explore(self, req: ExploreRequest) -> ExplorePage:
        return await self.inner.explore(req)

    async def get(self, req: GetRequest) -> Hits:
        return await self.inner.get(req)

    async def export(self, req: ListRequest) -> ExportPage:
        return await self.inner.export(req)

    async def erase(self, req: EraseRequest) -> EraseReport:
        return await self.inner.erase(req)

    async def list(self, req: ListRequest) -> ListPage:
        return await self.inner.list(req)


class ListingEdit(DelegatingEngine):
    """A base for wrappers that change each listed hit; `edit` is the breakage."""

    def edit(self, hit: Hit) -> Hit:
        return hit

    async def list(self, req: ListRequest) -> ListPage:
        page = await self.inner.list(req)
        return page.model_copy(update={"items": [self.edit(hit) for hit in page.items]})
