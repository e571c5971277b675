"""The memory tools over MCP, driven by the official SDK's own client: over stdio (`tinymemory mcp`) and over
streamable HTTP (`/mcp` of the API, a real server on loopback, under bearer tokens)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from engines.contract import GetRequest, Namespace, Reach
from engines.local import LocalEngine
from engines.tools import TOOL_NAMES
from tinymemory_ingest.api import create_app
from worker.control import Services
from worker.settings import Settings
from worker.state.sqlite import SqliteStateStore
from worker.token_store import TokenStore

pytestmark = pytest.mark.integration

TINYMEMORY = str(Path(sys.executable).parent / "tinymemory")


async def _store_fetch_forget(client: Client) -> str:
    """The issue's round trip: list the tools, store, fetch it back, forget it; the stored id."""
    listed = await client.list_tools()
    assert [tool.name for tool in listed.tools] == list(TOOL_NAMES)
    assert listed.tools[1].input_schema["properties"]["mode"]["enum"] == ["keyword", "vector", "hybrid"]
    stored = await client.call_tool("memory_store", {"learning": {"text": "the okapi enclosure opens at nine"}})
    assert not stored.is_error and stored.structured_content is not None
    item_id = str(stored.structured_content["id"])
    fetched = await client.call_tool("memory_fetch", {"query": "okapi enclosure", "mode": "keyword"})
    assert [hit["id"] for hit in (fetched.structured_content or {})["hits"]] == [item_id]
    refused = await client.call_tool("memory_list", {"filter": {"reach": {"at": ""}}})
    assert refused.is_error and "is fixed by the host" in refused.content[0].text  # type: ignore[union-attr]
    forgot = await client.call_tool("memory_forget", {"ids": [item_id]})
    assert forgot.structured_content == {"forgotten": 1, "skipped": []}
    again = await client.call_tool("memory_fetch", {"query": "okapi enclosure", "mode": "keyword"})
    assert (again.structured_content or {})["hits"] == []
    return item_id


async def test_stdio_tools_under_the_scope_the_flags_fix(tmp_path: Path) -> None:
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data")}
    params = StdioServerParameters(command=TINYMEMORY, args=["mcp", "--place", "user:alice"], env=env)
    async with Client(params) as client:
        await _store_fetch_forget(client)
        kept = await client.call_tool("memory_store", {"document": {"text": "alice keeps this one", "title": "Kept"}})
        kept_id = str((kept.structured_content or {})["id"])
    engine = LocalEngine(tmp_path / "data" / "memory.sqlite3")
    try:
        (hit,) = await engine.get(GetRequest(ids=[kept_id], reach=Reach.subtree(Namespace.ROOT)))
        assert str(hit.meta.namespace) == "user:alice" and hit.meta.source.kind.value == "agent"
    finally:
        engine.close()


async def test_stdio_read_only_offers_no_writes(tmp_path: Path) -> None:
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(tmp_path / "data")}
    params = StdioServerParameters(command=TINYMEMORY, args=["mcp", "--read-only"], env=env)
    async with Client(params) as client:
        names = [tool.name for tool in (await client.list_tools()).tools]
        assert "memory_store" not in names and "memory_recall" in names
        refused = await client.call_tool("memory_store", {"learning": {"text": "x"}})
        assert refused.is_error and "read-only" in refused.content[0].text  # type: ignore[union-attr]


async def _started(server: uvicorn.Server, within_s: float = 10.0) -> None:
    async with asyncio.timeout(within_s):
        while not server.started:  # noqa: ASYNC110 (uvicorn offers no event to wait on)
            await asyncio.sleep(0.02)


@asynccontextmanager
async def _serving(tmp_path: Path) -> AsyncIterator[tuple[str, TokenStore, LocalEngine]]:
    settings = Settings(data_dir=tmp_path / "data")  # type: ignore[arg-type]
    engine = LocalEngine(settings.memory_file)
    state = SqliteStateStore(settings.state_file)
    app = create_app(settings, Services(settings, state=state, engine=engine))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await _started(server)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", TokenStore(settings.token_path), engine
    finally:
        server.should_exit = True
        await task
        state.close()
        engine.close()


@asynccontextmanager
async def _client(url: str, token: str | None) -> AsyncIterator[Client]:
    # The transport leaves a client it was given open: close it here.
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


async def test_http_tools_under_each_bearer_tokens_scope(tmp_path: Path) -> None:
    async with _serving(tmp_path) as (url, tokens, engine):
        _, alice = tokens.add("alice", place="user:alice")
        _, bob = tokens.add("bob", place="user:bob")
        async with _client(url, alice) as client:
            await _store_fetch_forget(client)
            stored = await client.call_tool("memory_store", {"learning": {"text": "alice's okapi is called Olga"}})
            kept = str((stored.structured_content or {})["id"])
        async with _client(url, bob) as client:
            found = await client.call_tool("memory_fetch", {"query": "okapi", "mode": "keyword"})
            assert (found.structured_content or {})["hits"] == []  # alice's, beyond bob's reach
            forgot = await client.call_tool("memory_forget", {"ids": [kept]})
            assert forgot.structured_content == {"forgotten": 0, "skipped": [kept]}
        (hit,) = await engine.get(GetRequest(ids=[kept], reach=Reach.subtree(Namespace.ROOT)))
        assert str(hit.meta.namespace) == "user:alice"


async def test_http_refuses_a_missing_or_wrong_token_before_mcp(tmp_path: Path) -> None:
    async with _serving(tmp_path) as (url, tokens, _):
        tokens.add("alice", place="user:alice")
        async with httpx2.AsyncClient() as http:
            for headers in ({}, {"Authorization": "Bearer tm_wrong"}):
                response = await http.post(
                    url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=headers
                )
                assert response.status_code == 401
                assert response.json()["error"]["kind"] == "unauthorized"
