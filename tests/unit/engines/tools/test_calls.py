"""`MemoryTools.call`: the host-fixed scope, the requests each tool makes, and the results it writes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from engines.contract import (
    Conversation,
    Document,
    DocumentBody,
    EngineDescriptor,
    ExplorePage,
    ExploreRequest,
    Facet,
    FetchMode,
    FetchPage,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    GetRequest,
    Hit,
    InvalidRequestError,
    Item,
    Learning,
    LearningKind,
    ListPage,
    ListRequest,
    MemoryEngine,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    RecallAnswer,
    RecallRequest,
    Role,
    SourceKind,
    SourceRef,
    StoreReceipt,
    TimeHint,
    Turn,
    UnavailableError,
    UnsupportedError,
)
from engines.local import LocalEngine
from engines.reference import ReferenceEngine
from engines.tools import MemoryTools, ToolScope

NOW = datetime(2026, 10, 4, 9, 30, tzinfo=UTC)
TEAM = Namespace.parse("team:acme")
WRITER = Namespace.parse("team:acme/agent:writer")
EDITOR = Namespace.parse("team:acme/agent:editor")
ZERO = "0" * 40
LEARNING = {"learning": {"text": "prefers tabs over spaces"}, "tags": ["style"]}


class Recorder(ReferenceEngine):
    """The reference engine, keeping every request it is sent; it may claim to serve fewer modes."""

    def __init__(self, modes: tuple[FetchMode, ...] = tuple(FetchMode)) -> None:
        super().__init__()
        self.sent: list[object] = []
        self._descriptor = super().descriptor().model_copy(update={"fetch_modes": modes})

    def descriptor(self) -> EngineDescriptor:
        return self._descriptor

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        self.sent.append(req)
        return await super().recall(req)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        self.sent.append(req)
        return await super().fetch(req)

    async def list(self, req: ListRequest) -> ListPage:
        self.sent.append(req)
        return await super().list(req)

    async def get(self, req: GetRequest) -> list[Hit]:
        self.sent.append(req)
        return await super().get(req)

    async def explore(self, req: ExploreRequest) -> ExplorePage:
        self.sent.append(req)
        return await super().explore(req)

    async def store(self, item: Item) -> StoreReceipt:
        self.sent.append(item)
        return await super().store(item)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        self.sent.append(target)
        return await super().forget(target)


def _tools(engine: MemoryEngine, scope: ToolScope | None = None) -> MemoryTools:
    return MemoryTools(engine, scope, clock=lambda: NOW)


@pytest.fixture(params=["reference", "local"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryEngine]:
    if request.param == "reference":
        yield ReferenceEngine()
        return
    local = LocalEngine(tmp_path / "memory.sqlite3")
    yield local
    local.close()


async def test_writes_land_at_the_place_with_only_the_host_metadata() -> None:
    engine = Recorder()
    tools = _tools(engine).placed_at(WRITER)
    await tools.call("memory_store", {"learning": {"text": "likes rust", "confidence": 1}, "tags": ["lang", "lang"]})
    await tools.call("memory_store", {"document": {"text": "body", "title": "  "}, "learning": None})
    await tools.call("memory_store", {"conversation": {"turns": [{"role": "user", "text": "hi"}]}, "tags": []})
    meta = MemoryMeta(namespace=WRITER, source=SourceRef(kind=SourceKind.AGENT), observed_at=NOW)
    assert engine.sent == [
        Learning(
            text="likes rust",
            kind=LearningKind.FACT,
            confidence=1.0,
            meta=meta.model_copy(update={"tags": ["lang", "lang"]}),
        ),
        Document(title=None, body=DocumentBody.of_text("body"), mime=None, meta=meta),
        Conversation(turns=[Turn(role=Role.USER, text="hi")], meta=meta),
    ]


async def test_learning_defaults_are_fact_and_eight_tenths() -> None:
    engine = Recorder()
    await _tools(engine).call("memory_store", {"learning": {"text": "t"}})
    (item,) = engine.sent
    assert isinstance(item, Learning)
    assert (item.kind, item.confidence, item.evidence, item.meta.namespace) == (
        LearningKind.FACT,
        0.8,
        None,
        Namespace.ROOT,
    )


FILTER_ARGS = {
    "agent_id": "a",
    "file_path": "/f",
    "folder": "/d",
    "kinds": ["learning"],
    "observed_after": "2026-10-01T00:00:00Z",
    "observed_before": "2026-10-05T00:00:00+02:00",
    "repo": "o/n",
    "sources": ["agent", "file"],
    "tags_any": ["t"],
    "thread_id": "th",
    "url": "https://u",
    "workspace": "w",
}


@pytest.mark.parametrize("reach", [None, Reach.of(WRITER), Reach.exact(TEAM), Reach.subtree(TEAM)])
async def test_every_read_is_confined_to_the_scope_reach(reach: Reach | None) -> None:
    engine = Recorder()
    tools = _tools(engine, ToolScope(place=WRITER, reach=reach))
    await tools.call("memory_recall", {"question": "q", "filter": FILTER_ARGS, "limit": 3, "instructions": "short"})
    await tools.call("memory_fetch", {"query": "q", "filter": FILTER_ARGS, "mode": "keyword", "cursor": "0"})
    await tools.call("memory_list", {"filter": FILTER_ARGS, "limit": 50})
    await tools.call("memory_explore", {"facet": "tag", "filter": FILTER_ARGS})
    await tools.call("memory_get", {"ids": ["a", "b", "a"]})
    wanted = MetaFilter.model_validate({**FILTER_ARGS, "reach": reach})
    recall, fetch, listing, explore, *walk = engine.sent
    assert recall == RecallRequest(question="q", filter=wanted, limit=3, instructions="short")
    assert fetch == FetchRequest(query="q", mode=FetchMode.KEYWORD, filter=wanted, limit=10, cursor="0")
    assert listing == ListRequest(filter=wanted, limit=50)
    assert isinstance(explore, ExploreRequest)
    assert (explore.facet, explore.filter, explore.limit, explore.scan_limit) == (Facet.TAG, wanted, 10, 5000)
    # The explore default lists under the same filter; then get asks with the reach, duplicates dropped.
    assert GetRequest(ids=["a", "b"], reach=reach) in walk


async def test_refers_to_is_a_time_hint_in_the_host_zone() -> None:
    engine = Recorder()
    tools = MemoryTools(engine, zone="Europe/Lisbon")
    days = {"from": "2026-10-03", "to": "2026-10-04"}
    await tools.call("memory_recall", {"question": "q", "refers_to": days})
    await tools.call("memory_fetch", {"query": "q", "refers_to": days})
    hint = TimeHint.model_validate({**days, "zone": "Europe/Lisbon"})
    assert [req.refers_to for req in engine.sent if isinstance(req, RecallRequest | FetchRequest)] == [hint, hint]


async def _seed(engine: MemoryEngine) -> dict[Namespace, str]:
    ids = {}
    for place in (Namespace.ROOT, TEAM, WRITER, EDITOR):
        receipt = await engine.store(
            Learning(
                text=f"note of {place}",
                kind=LearningKind.FACT,
                confidence=0.5,
                meta=MemoryMeta(namespace=place, tags=["x"]),
            )
        )
        ids[place] = receipt.id
    return ids


async def test_a_model_cannot_read_a_sibling(engine: MemoryEngine) -> None:
    ids = await _seed(engine)
    visible = {ids[Namespace.ROOT], ids[TEAM], ids[WRITER]}
    tools = _tools(engine).placed_at(WRITER)
    listed = json.loads(await tools.call("memory_list", {"limit": 50}))
    assert {h["id"] for h in listed["items"]} == visible
    got = json.loads(await tools.call("memory_get", {"ids": [ids[EDITOR], ids[WRITER]]}))
    assert ([h["id"] for h in got["items"]], got["missing"]) == ([ids[WRITER]], [ids[EDITOR]])
    fetched = json.loads(await tools.call("memory_fetch", {"query": "note", "limit": 50}))
    fetched_ids = {h["id"] for h in fetched["hits"]}
    assert ids[WRITER] in fetched_ids
    assert fetched_ids <= visible
    recalled = json.loads(await tools.call("memory_recall", {"question": "note", "limit": 50}))
    assert ids[EDITOR] not in {c["id"] for c in recalled["citations"]}
    explored = json.loads(await tools.call("memory_explore", {"facet": "tag"}))
    assert explored["total"] == 3
    # No rendered field says where an item lives.
    assert "namespace" not in json.dumps([listed, got, fetched, recalled])


async def test_forget_by_ids_skips_and_keeps_what_the_scope_cannot_see(engine: MemoryEngine) -> None:
    ids = await _seed(engine)
    tools = _tools(engine).placed_at(WRITER)
    out = await tools.call("memory_forget", {"ids": [ids[EDITOR], ids[WRITER], ZERO, ids[WRITER]]})
    assert out == f'{{"forgotten":1,"skipped":["{ids[EDITOR]}","{ZERO}"]}}'
    left = await engine.list(ListRequest(limit=50))
    assert {h.id for h in left.items} == {ids[Namespace.ROOT], ids[TEAM], ids[EDITOR]}


async def test_forget_by_ids_that_are_all_unseen_calls_no_forget() -> None:
    engine = Recorder()
    ids = await _seed(engine)
    engine.sent.clear()
    out = await _tools(engine).placed_at(WRITER).call("memory_forget", {"ids": [ids[EDITOR]]})
    assert out == f'{{"forgotten":0,"skipped":["{ids[EDITOR]}"]}}'
    assert engine.sent[0] == GetRequest(ids=[ids[EDITOR]], reach=Reach.of(WRITER))
    assert not [sent for sent in engine.sent if isinstance(sent, ForgetTarget)]


async def test_forget_by_filter_runs_under_the_reach(engine: MemoryEngine) -> None:
    ids = await _seed(engine)
    tools = _tools(engine).with_reach(Reach.exact(WRITER))
    assert await tools.call("memory_forget", {"filter": {"tags_any": ["x"], "kinds": []}}) == (
        '{"forgotten":1,"skipped":[]}'
    )
    left = await engine.list(ListRequest(limit=50))
    assert ids[WRITER] not in {h.id for h in left.items}
    assert len(left.items) == 3
    # The reach alone never makes a filter: a model must set a field.
    with pytest.raises(InvalidRequestError, match="`filter` must set at least one field"):
        await tools.call("memory_forget", {"filter": {}})


async def test_read_only_tools_refuse_writes_before_reading_the_arguments() -> None:
    engine = ReferenceEngine()
    tools = _tools(engine).read_only()
    for name, args in [
        ("memory_store", "{not json"),
        ("memory_forget", {"namespace": "x"}),
        ("memory_store", LEARNING),
    ]:
        with pytest.raises(UnsupportedError) as caught:
            await tools.call(name, args)
        assert caught.value.message == f"{name}: these memory tools are read-only"
    assert await tools.call("memory_list", None) == '{"items":[]}'


async def test_an_unknown_tool_is_named_with_the_seven() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        await _tools(ReferenceEngine()).read_only().call("memory_search", "{not json")
    assert caught.value.message == (
        "unknown tool `memory_search`; the memory tools are memory_recall, memory_fetch, memory_list, "
        "memory_get, memory_explore, memory_store, memory_forget"
    )


async def test_fetch_needs_a_served_mode() -> None:
    tools = _tools(Recorder(modes=()))
    with pytest.raises(UnsupportedError) as caught:
        await tools.call("memory_fetch", {"reach": 1})
    assert caught.value.message == "memory_fetch: this memory offers no fetch mode"


@pytest.mark.parametrize(
    ("served", "used"),
    [
        (tuple(FetchMode), FetchMode.HYBRID),
        ((FetchMode.VECTOR, FetchMode.KEYWORD), FetchMode.KEYWORD),
        ((FetchMode.VECTOR,), FetchMode.VECTOR),
    ],
)
async def test_fetch_without_a_mode_uses_hybrid_else_the_first_served(
    served: tuple[FetchMode, ...], used: FetchMode
) -> None:
    engine = Recorder(modes=served)
    await _tools(engine).call("memory_fetch", {"query": "q"})
    (req,) = engine.sent
    assert isinstance(req, FetchRequest)
    assert req.mode is used


async def test_a_mode_the_engine_does_not_serve_is_refused() -> None:
    engine = Recorder(modes=(FetchMode.KEYWORD, FetchMode.VECTOR))
    with pytest.raises(InvalidRequestError) as caught:
        await _tools(engine).call("memory_fetch", {"query": "q", "mode": "hybrid"})
    assert caught.value.message == "memory_fetch: `mode` `hybrid` is not a fetch mode this memory offers"
    assert engine.sent == []


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("memory_list", {"cursor": "bogus"}, "unknown cursor `bogus`"),
        ("memory_store", {"learning": {"text": "  "}}, "learning text must not be empty"),
        ("memory_store", {"document": {"text": ""}}, "document body must not be empty"),
        ("memory_store", {"conversation": {"turns": []}}, "conversation must have at least one turn"),
        (
            "memory_store",
            {"conversation": {"turns": [{"role": "user", "text": " "}]}},
            "conversation turns must not be empty",
        ),
    ],
)
async def test_the_engine_s_own_refusals_come_through_unchanged(tool: str, args: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        await _tools(ReferenceEngine()).call(tool, args)
    assert caught.value.message == message


async def test_engine_errors_propagate_unchanged() -> None:
    class Down(ReferenceEngine):
        async def list(self, req: ListRequest) -> ListPage:
            raise UnavailableError("the store is restarting")

    with pytest.raises(UnavailableError) as caught:
        await _tools(Down()).call("memory_list", {})
    assert caught.value == UnavailableError("the store is restarting")


def test_builders_return_new_tools_with_the_changed_scope() -> None:
    tools = MemoryTools(ReferenceEngine())
    assert tools.scope == ToolScope.default() == ToolScope(Namespace.ROOT, None, True)
    placed = tools.placed_at(WRITER)
    assert placed.scope == ToolScope.at(WRITER) == ToolScope(WRITER, Reach.of(WRITER), True)
    assert placed.with_reach(None).scope == ToolScope(WRITER, None, True)
    assert placed.read_only().scope == ToolScope(WRITER, Reach.of(WRITER), False)
    assert placed.read_only().placed_at(TEAM).scope == ToolScope(TEAM, Reach.of(TEAM), False)
    other = ToolScope(TEAM, Reach.subtree(TEAM), False)
    assert tools.with_scope(other).scope == other
    assert tools.scope == ToolScope.default()
    assert placed.engine is tools.engine
