"""What an agent stores through the memory tools is scrubbed before it is stored, like everything a source
brings: over HTTP (`/v1/tools/memory_store`), over `/mcp` with the official SDK's client, and through the
tools `tinymemory mcp` serves; the id answered is the stored (scrubbed) item's."""

from __future__ import annotations

import json
from pathlib import Path

from engines.contract import GetRequest, Hit, Namespace, Reach
from engines.reference import ReferenceEngine
from engines.tools import ToolScope
from tests.unit.tinymemory_ingest.api.conftest import Api, open_api
from tests.unit.tinymemory_ingest.api.test_erased_store_mcp import _mcp
from worker import control
from worker.state.sqlite import SqliteStateStore

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
SECRETS = {
    "learning": {"text": f"the deploy key is {AWS_KEY}", "evidence": "password: hunter22hunter"},
    "document": {
        "title": "Ops",
        "text": "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
    },
    "conversation": {"turns": [{"role": "user", "text": f"use {AWS_KEY} for the bucket"}]},
}
LEAKS = (AWS_KEY, "hunter22hunter", "MIIEpAIBAAKCAQEA7")


async def _stored(api: Api, item_id: str) -> Hit:
    (hit,) = await api.engine.get(GetRequest(ids=[item_id], reach=Reach.subtree(Namespace.ROOT)))
    return hit


def _clean(hit: Hit) -> None:
    shown = hit.model_dump_json()
    assert not [leak for leak in LEAKS if leak in shown], shown
    assert "[REDACTED" in shown


async def test_a_store_over_http_is_scrubbed_before_it_is_stored(tmp_path: Path) -> None:
    async with open_api(tmp_path, ReferenceEngine()) as api:
        for kind, body in SECRETS.items():
            answered = await api.post("/v1/tools/memory_store", {kind: body})
            assert answered.status_code == 200, answered.text
            _clean(await _stored(api, answered.json()["id"]))


async def test_a_store_over_mcp_is_scrubbed_before_it_is_stored(tmp_path: Path) -> None:
    async with open_api(tmp_path, ReferenceEngine()) as api, _mcp(api, api.token("alice", place="user:a")) as client:
        stored = await client.call_tool("memory_store", {"learning": SECRETS["learning"]})
        assert not stored.is_error
        _clean(await _stored(api, (stored.structured_content or {})["id"]))


async def test_the_tools_tinymemory_mcp_serves_scrub_and_keep_scrubbing_under_another_scope(tmp_path: Path) -> None:
    engine, state = ReferenceEngine(), SqliteStateStore(tmp_path / "state.sqlite3")
    try:
        tools = control.guarded_tools(state, engine, ToolScope.default()).placed_at(Namespace.parse("user:b"))
        answered = json.loads(await tools.call("memory_store", {"learning": SECRETS["learning"]}))
        (hit,) = await engine.get(GetRequest(ids=[answered["id"]], reach=Reach.subtree(Namespace.ROOT)))
        assert str(hit.meta.namespace) == "user:b"
        _clean(hit)
    finally:
        state.close()
