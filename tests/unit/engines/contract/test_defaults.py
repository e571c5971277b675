"""The `MemoryEngine` defaults and listing-based helpers (docs/spec/contract.md §14, §15), on an engine that
implements only the abstract methods."""

from __future__ import annotations

import pytest

from engines.contract import (
    Document,
    EngineDescriptor,
    EngineError,
    EngineHealth,
    EraseRequest,
    ExploreRequest,
    Facet,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    InvalidRequestError,
    Item,
    ListPage,
    ListRequest,
    MemoryEngine,
    MemoryMeta,
    Namespace,
    Reach,
    RecallAnswer,
    RecallRequest,
    StoreReceipt,
    UnsupportedError,
)
from engines.reference import ReferenceEngine


class MinimalEngine(MemoryEngine):
    """Implements only what is abstract, so every default of the base class is exercised."""

    def __init__(self) -> None:
        self.inner = ReferenceEngine()
        self.list_calls = 0
        self.stored: list[str] = []
        self.fail_on: str | None = None
        self.repeat_cursor = False

    def descriptor(self) -> EngineDescriptor:
        return self.inner.descriptor()

    async def health(self) -> EngineHealth:
        return EngineHealth.ok()

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        return await self.inner.recall(req)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        return await self.inner.fetch(req)

    async def store(self, item: Item) -> StoreReceipt:
        if self.fail_on is not None and item.render_text() == self.fail_on:
            raise EngineError("refused on purpose")
        self.stored.append(item.render_text())
        return await self.inner.store(item)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        return await self.inner.forget(target)

    async def list(self, req: ListRequest) -> ListPage:
        self.list_calls += 1
        page = await self.inner.list(req)
        if self.repeat_cursor and page.next_cursor is not None:
            return page.model_copy(update={"next_cursor": "0"})
        return page


def doc(text: str, **meta: object) -> Document:
    return Document.from_text(text, meta=MemoryMeta.model_validate(meta))


async def filled(count: int, **meta: object) -> MinimalEngine:
    engine = MinimalEngine()
    for n in range(count):
        await engine.store(doc(f"note {n}", **meta))
    return engine


async def test_export_and_erase_check_first_then_refuse() -> None:
    engine = MinimalEngine()
    with pytest.raises(InvalidRequestError):
        await engine.export(ListRequest(limit=0))
    with pytest.raises(UnsupportedError, match="engine does not export memory"):
        await engine.export(ListRequest(limit=1))
    with pytest.raises(InvalidRequestError):
        await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT)))
    with pytest.raises(UnsupportedError, match="engine does not erase memory"):
        await engine.erase(EraseRequest(reach=Reach.exact(Namespace.parse("agent:x"))))


async def test_store_many_validates_the_whole_batch_before_storing() -> None:
    engine = MinimalEngine()
    with pytest.raises(InvalidRequestError, match="document body must not be empty"):
        await engine.store_many([doc("fine"), doc(" ")])
    assert engine.stored == []


async def test_store_many_stops_at_the_first_error_keeping_earlier_items() -> None:
    engine = MinimalEngine()
    engine.fail_on = "b"
    with pytest.raises(EngineError):
        await engine.store_many([doc("a"), doc("b"), doc("c")])
    assert engine.stored == ["a"]
    engine.fail_on = None
    receipts = await engine.store_many([doc("a"), doc("b"), doc("c")])
    assert [r.replayed for r in receipts] == [True, False, False]


async def test_explore_by_listing_counts_and_orders_buckets() -> None:
    engine = MinimalEngine()
    for folder, count in (("/b", 2), ("/a", 2), ("/c", 3)):
        for n in range(count):
            await engine.store(doc(f"{folder} {n}", folder=folder))
    await engine.store(doc("no folder"))
    page = await engine.explore(ExploreRequest(facet=Facet.FOLDER, limit=2))
    assert [(b.value, b.count) for b in page.buckets] == [("/c", 3), ("/a", 2)]
    assert (page.total, page.missing, page.more_buckets, page.truncated) == (8, 1, 1, False)


async def test_explore_by_listing_stops_at_the_scan_limit() -> None:
    engine = await filled(450, workspace="w")
    page = await engine.explore(ExploreRequest(facet=Facet.WORKSPACE, limit=5, scan_limit=300))
    assert page.truncated
    assert page.total == 300
    assert [(b.value, b.count) for b in page.buckets] == [("w", 300)]
    whole = await engine.explore(ExploreRequest(facet=Facet.WORKSPACE, limit=5))
    assert (whole.total, whole.truncated) == (450, False)


async def test_explore_by_listing_refuses_a_repeated_cursor() -> None:
    engine = await filled(450)
    engine.repeat_cursor = True
    with pytest.raises(EngineError, match="list repeated a cursor"):
        await engine.explore(ExploreRequest(facet=Facet.KIND, limit=5))


async def test_get_by_listing_stops_once_every_id_is_found() -> None:
    engine = await filled(1000)
    first = await engine.inner.list(ListRequest(limit=2))
    ids = [hit.id for hit in first.items]
    engine.list_calls = 0
    hits = await engine.get(GetRequest(ids=[ids[1], ids[0], ids[1]]))
    assert [hit.id for hit in hits] == [ids[1], ids[0]]
    # Both ids sit on the first page of 200: one call to list, not five.
    assert engine.list_calls == 1
    engine.list_calls = 0
    hits = await engine.get(GetRequest(ids=[ids[1], "unknown", ids[0]]))
    assert [hit.id for hit in hits] == [ids[1], ids[0]]
    # An unknown id can only be known absent at the end of the listing.
    assert engine.list_calls == 5


async def test_get_by_listing_leaves_out_ids_beyond_the_reach() -> None:
    engine = MinimalEngine()
    inside = await engine.store(doc("inside", namespace="agent:a"))
    outside = await engine.store(doc("outside", namespace="agent:b"))
    hits = await engine.get(GetRequest(ids=[outside.id, inside.id], reach=Reach.of(Namespace.parse("agent:a"))))
    assert [hit.id for hit in hits] == [inside.id]


async def test_forget_within_by_get_checks_ids_and_removes_only_inside() -> None:
    engine = MinimalEngine()
    with pytest.raises(InvalidRequestError, match="forget needs at least one id"):
        await engine.forget_within([], Reach())
    with pytest.raises(InvalidRequestError, match="forget ids must not be blank"):
        await engine.forget_within(["x", " "], Reach())
    inside = await engine.store(doc("inside", namespace="agent:a"))
    outside = await engine.store(doc("outside", namespace="agent:b"))
    reach = Reach.exact(Namespace.parse("agent:a"))
    report = await engine.forget_within([inside.id, outside.id, inside.id, "unknown"], reach)
    assert report.forgotten == 1
    listed = await engine.inner.list(ListRequest(limit=10))
    assert [hit.id for hit in listed.items] == [outside.id]
    assert (await engine.forget_within(["unknown"], reach)).forgotten == 0


async def test_forget_within_by_get_batches_beyond_the_get_limit() -> None:
    engine = await filled(450)
    listed = await engine.inner.list(ListRequest(limit=450))
    ids = [hit.id for hit in listed.items]
    report = await engine.forget_within(ids, Reach.subtree(Namespace.ROOT))
    assert report.forgotten == 450
