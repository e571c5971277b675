"""A store through the agent tools into what an erasure covers is refused (409, kind `conflict`) and stores
nothing: while the erasure is queued, and after it completed; other kinds and other accounts still store."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from engines.contract import ConflictError, ItemKind, ListRequest, MetaFilter, Namespace, Reach
from engines.reference import ReferenceEngine
from engines.tools import ToolScope
from tests.unit.tinymemory_ingest.api.conftest import Api, open_api
from worker import control
from worker.erasure.request import Tombstone
from worker.state.sqlite import SqliteStateStore

LEARNING = {"learning": {"text": "alice keeps her okapi in the west paddock"}}
DOCUMENT = {"document": {"text": "the west paddock floods in spring", "title": "Paddock"}}


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[Api]:
    # The reference engine: what is checked here is the API's, whichever engine it serves.
    async with open_api(tmp_path, ReferenceEngine()) as opened:
        yield opened


async def erased(api: Api, body: dict[str, Any]) -> str:
    """Erase `body`'s target through the API and wait for it to complete; the erasure's id."""
    erasure_id = str((await api.post("/v1/erasures", body)).json()["id"])
    for _ in range(200):
        receipt = (await api.client.get(f"/v1/erasures/{erasure_id}")).json()
        if receipt["status"] in ("completed", "failed"):
            assert receipt["status"] == "completed", receipt
            return erasure_id
        await asyncio.sleep(0.02)
    raise AssertionError(f"erasure {erasure_id} did not finish")


async def _count(api: Api, headers: dict[str, str]) -> int:
    return len((await api.post("/v1/list", {"limit": 100}, headers)).json()["items"])


async def test_a_store_into_an_erased_account_is_refused_and_stores_nothing(api: Api) -> None:
    erasure_id = await erased(api, {"namespace": "user:a"})
    admin = api.token("ops", admin=True, reach="subtree")
    before = await _count(api, admin)
    for n, place in enumerate(("user:a", "user:a/agent:x")):  # the account, and a node below it
        agent = api.token(f"agent{n}", place=place)
        for body in (LEARNING, DOCUMENT):
            refused = await api.post("/v1/tools/memory_store", body, agent)
            assert refused.status_code == 409, refused.text
            error = refused.json()["error"]
            assert error["kind"] == "conflict"
            assert f"at {place}: it was erased (erasure {erasure_id}" in error["message"]
            assert "store it under another namespace" in error["message"]
    assert await _count(api, admin) == before
    bob = api.token("bob", place="user:b")
    assert (await api.post("/v1/tools/memory_store", LEARNING, bob)).status_code == 200
    assert await _count(api, admin) == before + 1


async def test_only_the_erased_kinds_are_refused(api: Api) -> None:
    await erased(api, {"namespace": "user:a", "kinds": ["learning"]})
    alice = api.token("alice", place="user:a")
    assert (await api.post("/v1/tools/memory_store", LEARNING, alice)).status_code == 409
    stored = await api.post("/v1/tools/memory_store", DOCUMENT, alice)
    assert stored.status_code == 200 and stored.json()["id"]


async def test_a_store_is_refused_while_the_erasure_is_still_queued(api: Api) -> None:
    # The tombstone is written as the request is taken, before any worker runs it.
    state = SqliteStateStore(api.settings.state_file)
    try:
        state.put_tombstone(Tombstone(scope="namespace:user:a", erasure_id="queued1"))
    finally:
        state.close()
    alice = api.token("alice", place="user:a")
    refused = await api.post("/v1/tools/memory_store", LEARNING, alice)
    assert refused.status_code == 409 and "(erasure queued1" in refused.json()["error"]["message"]
    # Forgetting is not storing: what the erasure has yet to remove may still be forgotten.
    forgot = await api.post("/v1/tools/memory_forget", {"filter": {"tags_any": ["minerals"]}}, alice)
    assert forgot.status_code == 200 and forgot.json()["forgotten"] >= 1


async def test_refusals_that_come_first_are_kept(api: Api) -> None:
    await erased(api, {"namespace": "user:a"})
    reader = api.token("reader", place="user:a", read_only=True)
    assert (await api.post("/v1/tools/memory_store", LEARNING, reader)).status_code == 403
    alice = api.token("alice", place="user:a")
    malformed = await api.post("/v1/tools/memory_store", {"nothing": 1}, alice)
    assert malformed.status_code == 400 and malformed.json()["error"]["kind"] == "invalid_request"


async def test_the_guard_holds_for_text_arguments_and_survives_the_builders(tmp_path: Path) -> None:
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    try:
        state.put_tombstone(Tombstone(scope="namespace:user:a", erasure_id="e1", kinds=[ItemKind.DOCUMENT]))
        engine = ReferenceEngine()
        tools = control.guarded_tools(state, engine, ToolScope.default())
        placed = tools.placed_at(Namespace.parse("user:a/agent:x"))
        with pytest.raises(ConflictError, match="cannot store a document at user:a/agent:x"):
            await placed.call("memory_store", '{"document": {"text": "a page"}}')
        with pytest.raises(ConflictError):
            await placed.with_reach(Reach.subtree(Namespace.ROOT)).call("memory_store", b'{"document": {"text": "p"}}')
        assert '"id"' in await placed.call("memory_store", '{"learning": {"text": "a fact"}}')
        assert '"id"' in await tools.call("memory_store", '{"document": {"text": "at the root"}}')
        listed = await engine.list(ListRequest(filter=MetaFilter(reach=Reach.subtree(Namespace.ROOT)), limit=10))
        assert sorted(hit.kind for hit in listed.items) == [ItemKind.DOCUMENT, ItemKind.LEARNING]
    finally:
        state.close()
