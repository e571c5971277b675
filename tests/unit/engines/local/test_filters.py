"""The local engine's SQL filters, reach and facets agree with the contract's own `MetaFilter.matches`
and `Facet.values` on random items and filters."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engines.contract import (
    Conversation,
    Document,
    EraseRequest,
    ExploreRequest,
    Facet,
    ForgetTarget,
    GetRequest,
    Item,
    ItemKind,
    Learning,
    LearningKind,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    Role,
    SourceKind,
    SourceRef,
    ToolCallRef,
    Turn,
    TurnRange,
    hit_of,
    redacted_id,
)
from engines.local import HashingEmbedder, LocalEngine

NAMESPACES = [
    Namespace.parse(text)
    for text in ("root", "team:t", "team:t/agent:a", "team:t/agent:b", "team:t/service:s", "team:t/service:s/agent:c")
]
PATHS = ["/a", "/a/b", "/a/b/c.md", "/a/bc", "/a/b0", "/x"]
WORDS = ["alpha", "beta", None]
T0 = datetime(2026, 1, 1, tzinfo=UTC)

values = st.sampled_from(WORDS)
paths = st.sampled_from([*PATHS, None])
ids = st.sampled_from(["t1", "t2", redacted_id("+1 555 010 9999"), None])
moments = st.sampled_from([None, T0, T0 + timedelta(hours=1), T0 + timedelta(days=2)])

metas = st.builds(
    MemoryMeta,
    namespace=st.sampled_from(NAMESPACES),
    workspace=values,
    folder=paths,
    file_path=paths,
    language=values,
    repo=values,
    commit=values,
    url=values,
    thread_id=ids,
    turns=st.sampled_from([None, TurnRange(first=0, last=1), TurnRange(first=2, last=3)]),
    agent_id=ids,
    tool_call=st.sampled_from([None, ToolCallRef(name="grep"), ToolCallRef(name="read", id="c1")]),
    source=st.builds(SourceRef, kind=st.sampled_from(list(SourceKind)), id=ids),
    tags=st.lists(st.sampled_from(["x", "y", "z"]), max_size=3),
    observed_at=moments,
)


def _item(kind: ItemKind, n: int, meta: MemoryMeta) -> Item:
    if kind is ItemKind.DOCUMENT:
        return Document.from_text(f"document {n}", meta=meta, title=f"Doc {n}")
    if kind is ItemKind.CONVERSATION:
        return Conversation(turns=[Turn(role=Role.USER, text=f"question {n}")], meta=meta)
    return Learning(text=f"learning {n}", kind=LearningKind.FACT, confidence=0.5, meta=meta)


items_strategy = st.lists(st.tuples(st.sampled_from(list(ItemKind)), metas), min_size=30, max_size=30).map(
    lambda pairs: [_item(kind, n, meta) for n, (kind, meta) in enumerate(pairs)]
)

reaches = st.none() | st.builds(Reach, at=st.sampled_from(NAMESPACES), inherit=st.booleans(), descendants=st.booleans())


def sparse(strategy: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    """Mostly unset: a filter that sets many fields admits almost nothing and tests little."""
    return st.one_of(st.none(), st.none(), st.none(), st.none(), strategy)


filters = st.builds(
    MetaFilter,
    reach=reaches,
    workspace=sparse(st.sampled_from(["alpha", "beta"])),
    folder=sparse(st.sampled_from(["/a", "/a/", "/a/b"])),
    file_path=sparse(st.sampled_from(["/a/b", "/a/bc"])),
    language=sparse(st.sampled_from(["alpha", "beta"])),
    thread_id=sparse(st.sampled_from(["t1", "+1 555 010 9999"])),
    agent_id=sparse(st.just("t2")),
    turns=sparse(st.just(TurnRange(first=0, last=1))),
    tool_call=sparse(st.just("grep")),
    source_id=sparse(st.just("t1")),
    kinds=st.lists(st.sampled_from(list(ItemKind)), max_size=2),
    sources=sparse(st.lists(st.sampled_from(list(SourceKind)), min_size=1, max_size=3)).map(lambda v: v or []),
    tags_any=sparse(st.lists(st.sampled_from(["x", "y", "none"]), min_size=1, max_size=2)).map(lambda v: v or []),
    observed_after=sparse(moments),
    observed_before=sparse(moments),
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalEngine]:
    engine = LocalEngine(Path(tmp_path_factory.mktemp("filters")) / "m.sqlite3", embedder=HashingEmbedder(64))
    yield engine
    engine.close()


async def _list_all(engine: LocalEngine, filter: MetaFilter) -> list[str]:
    found, cursor = [], None
    while True:
        page = await engine.list(ListRequest(filter=filter, limit=7, cursor=cursor))
        found.extend(hit.id for hit in page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


async def _replace_contents(engine: LocalEngine, items: list[Item]) -> dict[str, Item]:
    await engine.erase(EraseRequest(reach=Reach.subtree(Namespace.ROOT), whole_tree=True))
    receipts = await engine.store_many(items)
    return {r.id: item for r, item in zip(receipts, items, strict=True)}


async def _check(engine: LocalEngine, items: list[Item], filter: MetaFilter) -> None:
    held = await _replace_contents(engine, items)
    expected = [i for i, item in held.items() if filter.matches(item.item_kind, item.meta)]
    assert await _list_all(engine, filter) == expected
    hits = [hit_of(i, held[i]) for i in expected]
    for facet in (Facet.KIND, Facet.FOLDER, Facet.TAG, Facet.NAMESPACE, Facet.THREAD, Facet.SOURCE_ID):
        page = await engine.explore(ExploreRequest(facet=facet, filter=filter, limit=500))
        counts = Counter(v for hit in hits for v in facet.values(hit))
        assert {b.value: b.count for b in page.buckets} == dict(counts), facet
        assert (page.total, page.missing) == (len(hits), sum(not facet.values(h) for h in hits)), facet
    got = await engine.get(GetRequest(ids=list(held), reach=filter.reach))
    assert [hit.id for hit in got] == [i for i in held if Reach.admitted_by(filter.reach, held[i].meta.namespace)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=items_strategy, filter=filters)
def test_sql_filters_agree_with_the_contract(engine: LocalEngine, items: list[Item], filter: MetaFilter) -> None:
    asyncio.run(_check(engine, items, filter))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=items_strategy, filter=filters)
def test_forget_by_filter_removes_exactly_what_the_filter_admits(
    engine: LocalEngine, items: list[Item], filter: MetaFilter
) -> None:
    async def check() -> None:
        held = await _replace_contents(engine, items)
        if filter.is_empty():
            return
        report = await engine.forget(ForgetTarget.by_filter(filter))
        removed = {i for i, item in held.items() if filter.matches(item.item_kind, item.meta)}
        assert report.forgotten == len(removed)
        left = await _list_all(engine, MetaFilter(reach=Reach(at=Namespace.ROOT, inherit=False, descendants=True)))
        sandboxed = await _list_all(engine, MetaFilter(reach=Reach.subtree(NAMESPACES[4])))
        assert set(left) | set(sandboxed) == set(held) - removed

    asyncio.run(check())
