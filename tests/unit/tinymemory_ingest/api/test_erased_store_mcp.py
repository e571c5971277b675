"""`/mcp`'s `memory_store` into an erased account is a tool error carrying the refusal, and stores nothing;
driven by the official SDK's client, in process through the ASGI transport, under a bearer token."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engines.contract import ListRequest, MetaFilter, Namespace, Reach
from engines.reference import ReferenceEngine
from tests.unit.tinymemory_ingest.api.conftest import Api, open_api
from tests.unit.tinymemory_ingest.api.test_erased_store import DOCUMENT, LEARNING, erased


@asynccontextmanager
async def _mcp(api: Api, headers: dict[str, str]) -> AsyncIterator[Client]:
    app = api.client._transport.app  # type: ignore[attr-defined]
    # The ASGI transport runs no lifespan, and the MCP session manager lives in the app's.
    async with (
        app.router.lifespan_context(app),
        httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), headers=headers, timeout=30) as http,
        Client(streamable_http_client("http://127.0.0.1/mcp", http_client=http)) as client,
    ):
        yield client


async def _everything(api: Api) -> int:
    listed = await api.engine.list(ListRequest(filter=MetaFilter(reach=Reach.subtree(Namespace.ROOT)), limit=100))
    return len(listed.items)


async def test_an_mcp_store_into_an_erased_account_is_a_tool_error(tmp_path: Path) -> None:
    async with open_api(tmp_path, ReferenceEngine()) as api:
        erasure_id = await erased(api, {"namespace": "user:a", "kinds": ["learning"]})
        before = await _everything(api)
        async with _mcp(api, api.token("alice", place="user:a/agent:x")) as client:
            refused = await client.call_tool("memory_store", LEARNING)
            assert refused.is_error
            text = refused.content[0].text  # type: ignore[union-attr]
            assert f"cannot store a learning at user:a/agent:x: it was erased (erasure {erasure_id}" in text
            assert await _everything(api) == before
            stored = await client.call_tool("memory_store", DOCUMENT)  # a kind the erasure left alone
            assert not stored.is_error and (stored.structured_content or {})["id"]
        assert await _everything(api) == before + 1
