"""The memory tools and context.md over HTTP, under the bearer token's scope."""

from __future__ import annotations

import json

from engines.tools import TOOL_NAMES, MemoryTools
from tests.unit.tinymemory_ingest.api.conftest import Api


async def test_the_tools_are_listed_with_their_frozen_schemas(api: Api) -> None:
    specs = (await api.client.get("/v1/tools")).json()
    assert [s["name"] for s in specs] == list(TOOL_NAMES)
    assert specs == [s.model_dump(mode="json") for s in MemoryTools(api.engine).specs()]
    reader = api.token("reader", place="user:a", read_only=True)
    offered = [s["name"] for s in (await api.client.get("/v1/tools", headers=reader)).json()]
    assert offered == [n for n in TOOL_NAMES if n not in ("memory_store", "memory_forget")]


async def test_a_stored_memory_lands_at_the_tokens_place_and_stays_there(api: Api) -> None:
    alice, bob = api.token("alice", place="user:a"), api.token("bob", place="user:b")
    stored = await api.post(
        "/v1/tools/memory_store", {"learning": {"text": "alice's zebrafish tank is 60 litres"}}, alice
    )
    assert stored.status_code == 200 and stored.headers["content-type"] == "application/json"
    item_id = stored.json()["id"]
    query = {"query": "zebrafish", "mode": "keyword"}
    found = (await api.post("/v1/tools/memory_fetch", query, alice)).json()["hits"]
    assert [h["id"] for h in found] == [item_id]
    assert (await api.post("/v1/tools/memory_fetch", query, bob)).json()["hits"] == []
    forgot = (await api.post("/v1/tools/memory_forget", {"ids": [item_id]}, bob)).json()
    assert forgot == {"forgotten": 0, "skipped": [item_id]}  # bob cannot see it, so cannot forget it
    got = await api.post("/v1/get", {"ids": [item_id]}, alice)
    assert got.json()[0]["meta"]["namespace"] == "user:a"


async def test_refusals_of_the_tools(api: Api) -> None:
    reader = api.token("reader", place="user:a", read_only=True)
    refused = await api.post("/v1/tools/memory_store", {"learning": {"text": "x"}}, reader)
    assert refused.status_code == 403 and "read-only" in refused.json()["error"]["message"]
    writer = api.token("writer", place="user:a")
    fixed = await api.post("/v1/tools/memory_list", {"filter": {"reach": {"at": ""}}}, writer)
    assert fixed.status_code == 400
    assert fixed.json()["error"]["message"] == "memory_list: `filter.reach` is fixed by the host and cannot be set"
    unknown = await api.post("/v1/tools/memory_teleport", {}, writer)
    assert unknown.status_code == 400 and "unknown tool `memory_teleport`" in unknown.json()["error"]["message"]
    no_args = await api.post("/v1/tools/memory_list", None, writer)
    assert no_args.status_code == 200 and json.loads(no_args.text)["items"]


async def test_context_md_is_markdown_compiled_within_the_tokens_reach(api: Api) -> None:
    alice = api.token("alice", place="user:a")
    response = await api.client.get("/v1/context.md", params={"budget_tokens": 400}, headers=alice)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/markdown")
    text = response.text
    assert text.startswith("---\ngenerated_at: ") and "engine: local" in text
    assert int(response.headers["x-context-tokens"]) <= 400
    assert "- prefers tabs over spaces" in text  # alice's learning
    tiny = await api.client.get("/v1/context.md", params={"budget_tokens": 0}, headers=alice)
    assert tiny.status_code == 422
