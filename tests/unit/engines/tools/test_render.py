"""What the tools write back: the spec's example strings, key order, rounding, the metadata subset."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engines.contract import (
    Citation,
    FetchPage,
    FetchRequest,
    Hit,
    ItemKind,
    Learning,
    LearningKind,
    MemoryEngine,
    MemoryMeta,
    Namespace,
    RecallAnswer,
    RecallRequest,
    SourceKind,
    SourceRef,
)
from engines.local import LocalEngine
from engines.reference import ReferenceEngine
from engines.tools import MemoryTools

NOW = datetime(2026, 10, 4, 9, 30, tzinfo=UTC)
WRITER = Namespace.parse("team:acme/agent:writer")
ZERO = "0" * 40
TABS_ID = "13fafe0dcbabfc5e301412a72dcedfd8a0411259"
# The learning of docs/spec/contract.md §6.4 example 1, as a model stores it; its id is
# TABS_ID.
TABS = {
    "learning": {"text": "prefers tabs over spaces", "learning_kind": "preference", "evidence": "said so in review 12"},
    "tags": ["style"],
}
STORED = '{"id":"13fafe0dcbabfc5e301412a72dcedfd8a0411259","replayed":false}'
GOT = (
    '{"items":[{"id":"13fafe0dcbabfc5e301412a72dcedfd8a0411259","kind":"learning","text":"prefers tabs over spaces",'
    '"score":0.0,"confidence":0.8,"meta":{"source":{"kind":"agent"},"tags":["style"],'
    '"observed_at":"2026-10-04T09:30:00Z"}}],"missing":["0000000000000000000000000000000000000000"]}'
)
FORGOT = '{"forgotten":1,"skipped":["0000000000000000000000000000000000000000"]}'


def _tools(engine: MemoryEngine) -> MemoryTools:
    return MemoryTools(engine, clock=lambda: NOW)


@pytest.fixture(params=["reference", "local"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryEngine]:
    if request.param == "reference":
        yield ReferenceEngine()
        return
    local = LocalEngine(tmp_path / "memory.sqlite3")
    yield local
    local.close()


async def test_the_example_outputs_of_the_spec(engine: MemoryEngine) -> None:
    tools = _tools(engine)
    assert await tools.call("memory_store", TABS) == STORED
    assert await tools.call("memory_store", json.dumps(TABS)) == STORED.replace("false", "true")
    assert await tools.call("memory_get", {"ids": [TABS_ID, ZERO, TABS_ID]}) == GOT
    assert await tools.call("memory_forget", {"ids": [TABS_ID, ZERO]}) == FORGOT
    assert await tools.call("memory_get", {"ids": [TABS_ID]}) == f'{{"items":[],"missing":["{TABS_ID}"]}}'


class Canned(ReferenceEngine):
    """Answers reads with fixed results, to pin down how each is written."""

    META = MemoryMeta(
        namespace=WRITER,
        workspace="w",
        file_path="/notes/a.md",
        url="https://x/a",
        thread_id="t-1",
        agent_id="agent-1",
        source=SourceRef(kind=SourceKind.FILE, id="src"),
        observed_at=datetime(2026, 10, 4, 9, 30, 0, 250000, tzinfo=UTC),
    )
    HIT = Hit(id="h1", kind=ItemKind.DOCUMENT, text="doc", meta=META, score=0.123456789)

    async def fetch(self, req: FetchRequest) -> FetchPage:
        return FetchPage(hits=[self.HIT], next_cursor="c2")

    async def recall(self, req: RecallRequest) -> RecallAnswer:
        cited = [
            Citation(id="h1", kind=ItemKind.DOCUMENT, snippet="d", meta=MemoryMeta()),
            Citation(id="h2", kind=ItemKind.LEARNING, snippet="l", meta=self.META, score=2 / 3),
        ]
        return RecallAnswer(answer="yes", citations=cited, model="m")


async def test_results_keep_the_spec_key_order_and_write_no_nulls() -> None:
    tools = _tools(Canned())
    meta = (
        '"meta":{"source":{"kind":"file","id":"src"},"file_path":"/notes/a.md","url":"https://x/a",'
        '"thread_id":"t-1","observed_at":"2026-10-04T09:30:00.250Z"}'
    )
    assert await tools.call("memory_fetch", {"query": "q"}) == (
        '{"hits":[{"id":"h1","kind":"document","text":"doc","score":0.1235,' + meta + '}],"next_cursor":"c2"}'
    )
    assert await tools.call("memory_recall", {"question": "q"}) == (
        '{"answer":"yes","citations":[{"id":"h1","kind":"document","snippet":"d","meta":{"source":{"kind":"agent"}}},'
        '{"id":"h2","kind":"learning","snippet":"l","score":0.6667,' + meta + "}]}"
    )


async def test_explore_is_written_in_its_wire_form(engine: MemoryEngine) -> None:
    for n in range(4):
        await engine.store(Learning(text=f"note {n}", kind=LearningKind.FACT, confidence=0.5))
    assert await _tools(engine).call("memory_explore", {"facet": "kind", "limit": 1}) == (
        '{"facet":"kind","buckets":[{"value":"learning","count":4}],"total":4,"missing":0,"more_buckets":0,'
        '"truncated":false}'
    )


async def test_a_list_page_names_its_next_cursor_only_when_more_follow() -> None:
    engine = ReferenceEngine()
    tools = _tools(engine)
    await tools.call("memory_store", {"document": {"text": "body", "title": "Title"}})
    await tools.call("memory_store", {"learning": {"text": "fact", "confidence": 0.123456}})
    first = json.loads(await tools.call("memory_list", {"limit": 1}))
    assert [h["text"] for h in first["items"]] == ["# Title\n\nbody"]
    assert "confidence" not in first["items"][0]
    assert first["next_cursor"] == "1"
    rest = json.loads(await tools.call("memory_list", {"limit": 1, "cursor": first["next_cursor"]}))
    assert list(rest) == ["items"]
    assert rest["items"][0]["confidence"] == 0.1235
