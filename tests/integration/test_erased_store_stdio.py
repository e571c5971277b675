"""`tinymemory mcp` (stdio) refuses a store into an erased account, as the API's tools do: the tool error
carries the refusal and nothing is stored."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from engines.contract import ItemKind, ListRequest, MetaFilter, Namespace, Reach
from engines.local import LocalEngine
from tests.integration.test_mcp import TINYMEMORY
from tests.unit.tinymemory_ingest.api.test_erased_store import DOCUMENT, LEARNING
from worker.erasure.request import Tombstone
from worker.settings import Settings
from worker.state.sqlite import SqliteStateStore

pytestmark = pytest.mark.integration


async def test_stdio_refuses_a_store_into_an_erased_account(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")  # type: ignore[arg-type]
    settings.data_dir.mkdir(parents=True)
    state = SqliteStateStore(settings.state_file)
    try:  # the tombstone an erasure of user:a's learnings writes as it is asked for
        state.put_tombstone(Tombstone(scope="namespace:user:a", erasure_id="e-stdio", kinds=[ItemKind.LEARNING]))
    finally:
        state.close()
    env = {**os.environ, "TINYMEMORY_DATA_DIR": str(settings.data_dir)}
    params = StdioServerParameters(command=TINYMEMORY, args=["mcp", "--place", "user:a/agent:x"], env=env)
    async with Client(params) as client:
        refused = await client.call_tool("memory_store", LEARNING)
        assert refused.is_error
        assert "cannot store a learning at user:a/agent:x: it was erased (erasure e-stdio" in refused.content[0].text  # type: ignore[union-attr]
        assert not (await client.call_tool("memory_store", DOCUMENT)).is_error
    engine = LocalEngine(settings.memory_file)
    try:
        listed = await engine.list(ListRequest(filter=MetaFilter(reach=Reach.subtree(Namespace.ROOT)), limit=10))
        assert [hit.kind for hit in listed.items] == [ItemKind.DOCUMENT]
    finally:
        engine.close()
