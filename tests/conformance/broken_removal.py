"""Broken engines of docs/spec/contract.md §18.8 that remove wrongly: rows 20 to 25 (forget and erase)."""

from __future__ import annotations

from engines.contract import (
    EraseReport,
    EraseRequest,
    ForgetReport,
    ForgetTarget,
    Item,
    ItemId,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    Namespace,
    Reach,
    StoreReceipt,
)
from tests.conformance.delegating import DelegatingEngine


# 20
class ForgetSkipsSandboxes(DelegatingEngine):
    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target.check()
        if target.ids is None:
            return await self.inner.forget(target)
        # The root's subtree is every node except sandboxes.
        return await self.inner.forget_within(target.ids, Reach.subtree(Namespace.ROOT))


# 21
class EmptyFilterForgetsAll(DelegatingEngine):
    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if target.filter is not None and target.filter.is_empty():
            target = ForgetTarget.by_filter(MetaFilter(reach=Reach.subtree(Namespace.ROOT)))
        return await self.inner.forget(target)


# 22
class ForgetCountsNamedIds(DelegatingEngine):
    async def forget(self, target: ForgetTarget) -> ForgetReport:
        report = await self.inner.forget(target)
        if target.ids is None:
            return report
        return ForgetReport(forgotten=len(set(target.ids)))


# 23
class ForgetIgnoresTags(DelegatingEngine):
    async def forget(self, target: ForgetTarget) -> ForgetReport:
        target.check()
        if target.filter is not None:
            target = ForgetTarget.by_filter(target.filter.model_copy(update={"tags_any": []}))
        return await self.inner.forget(target)


# 24
class EraseIgnoresDescendants(DelegatingEngine):
    async def erase(self, req: EraseRequest) -> EraseReport:
        if not req.reach.at.is_root:
            req = req.model_copy(update={"reach": req.reach.model_copy(update={"descendants": False})})
        return await self.inner.erase(req)


# 25
class EraseRemembers(DelegatingEngine):
    """Remembers what erase removed, and reports storing one of those again as a replay.

    What was removed is read as a listing before and after, so sandboxes below `at` are not
    remembered; the suite erases none.
    """

    def __init__(self, inner: MemoryEngine | None = None) -> None:
        super().__init__(inner)
        self._erased: set[ItemId] = set()

    async def erase(self, req: EraseRequest) -> EraseReport:
        scope = MetaFilter(reach=req.reach.model_copy(update={"inherit": False}), kinds=req.kinds)
        before = await self._ids(scope)
        report = await self.inner.erase(req)
        self._erased |= before - await self._ids(scope)
        return report

    async def _ids(self, scope: MetaFilter) -> set[ItemId]:
        # One page of everything is enough here: the suite holds a few dozen items.
        page = await self.inner.list(ListRequest(filter=scope, limit=100_000))
        return {hit.id for hit in page.items}

    async def store(self, item: Item) -> StoreReceipt:
        receipt = await self.inner.store(item)
        if receipt.id in self._erased:
            return receipt.model_copy(update={"replayed": True})
        return receipt
