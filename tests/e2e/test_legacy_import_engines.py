"""The import job into each engine a user may choose: the local engine (its SQLite file) and CortexDB on its
double (both wires, on loopback). Every item imported is listed back by its id; a second run is all replays."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from engines.contract import ListRequest, MemoryEngine, MetaFilter, SourceKind
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.local import LocalEngine
from engines.settings import EngineCredential
from pipeline.legacy import LegacyWorkspace, prepared_items
from tests.fixtures.legacy_workspace import V1Workspace, generated_workspace, sample_workspace
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve
from worker.legacy.job import LegacyImportRequest, LegacyImports, import_legacy

pytestmark = pytest.mark.e2e


@pytest.fixture(params=["local", "cortexdb-direct", "cortexdb-hosted"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[MemoryEngine]:
    if request.param == "local":
        local = LocalEngine(tmp_path / "memory.sqlite3")
        yield local
        local.close()
        return
    wire = request.param.removeprefix("cortexdb-")
    double = CortexDouble(DoubleConfig(wire=wire, rate_limit_per_minute=None))  # type: ignore[arg-type]
    with serve(double) as url:
        kind = CortexWire.TINYHUMANS if wire == "hosted" else CortexWire.DIRECT
        cortex = CortexEngine(kind, url, EngineCredential.of("test-key"), timing=Timing.fast())
        yield cortex
        await cortex.aclose()


@pytest.fixture(scope="module")
def workspaces(tmp_path_factory: pytest.TempPathFactory) -> list[V1Workspace]:
    root = tmp_path_factory.mktemp("v1")
    return [
        sample_workspace(root / "new", "new"),
        sample_workspace(root / "early", "early"),
        generated_workspace(root / "many", 400),
    ]


async def imported_ids(engine: MemoryEngine) -> set[str]:
    ids: set[str] = set()
    cursor = None
    while True:
        page = await engine.list(ListRequest(limit=100, cursor=cursor, filter=MetaFilter(sources=[SourceKind.IMPORT])))
        ids.update(hit.id for hit in page.items)
        if page.next_cursor is None:
            return ids
        cursor = page.next_cursor


async def test_every_item_lands_and_a_second_import_replays(
    engine: MemoryEngine, workspaces: list[V1Workspace], tmp_path: Path
) -> None:
    records = LegacyImports(tmp_path / "data")
    expected: set[str] = set()
    for ws in workspaces:
        with LegacyWorkspace.open(ws.root) as opened:
            ids = {item.fingerprint() for item in prepared_items(opened)}
        record = await import_legacy(LegacyImportRequest(path=str(ws.root)), engine, "engine", records)
        assert (record.status, record.stored, record.replayed) == ("completed", len(ids), 0)
        expected |= ids
    assert await imported_ids(engine) == expected
    again = await import_legacy(LegacyImportRequest(path=str(workspaces[-1].root)), engine, "engine", records)
    assert (again.stored, again.replayed) == (0, len(expected & ids))
