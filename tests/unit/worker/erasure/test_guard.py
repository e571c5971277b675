"""The legacy import job keeps to erasures like every ingest job: an erased namespace is refused, before the import
and when the erasure comes mid-way; an erased kind is left out and counted. Real embedded state, reference engine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import (
    ConflictError,
    Conversation,
    Item,
    ItemKind,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    Namespace,
    Reach,
)
from engines.reference import ReferenceEngine
from pipeline.legacy import LegacyWorkspace, prepared_items
from tests.fixtures.legacy_workspace import V1Workspace, generated_workspace
from tests.unit.pipeline.legacy.test_migrate import AfterStoring
from worker.erasure.request import Tombstone, namespace_scope
from worker.legacy.job import LegacyImportRequest, LegacyImports, import_legacy
from worker.state.sqlite import SqliteStateStore

TEAM = Namespace.parse("team:a")


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> V1Workspace:
    """About 450 items in five batches, conversations among them."""
    return generated_workspace(tmp_path_factory.mktemp("v1") / "ws", 600)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[SqliteStateStore]:
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    yield store
    store.close()


def erased(namespace: Namespace, *kinds: ItemKind) -> Tombstone:
    return Tombstone(scope=namespace_scope(namespace), erasure_id="er-1", kinds=list(kinds))


async def held(engine: MemoryEngine, namespace: Namespace) -> list[Item]:
    page = await engine.export(ListRequest(limit=1000, filter=MetaFilter(reach=Reach.exact(namespace))))
    assert page.next_cursor is None
    return [entry.item for entry in page.items]


async def test_an_erased_namespace_is_refused_and_another_imported(
    ws: V1Workspace, state: SqliteStateStore, tmp_path: Path
) -> None:
    state.put_tombstone(erased(TEAM))
    records, engine = LegacyImports(tmp_path), ReferenceEngine()
    request = LegacyImportRequest(path=str(ws.root), namespace=str(TEAM))
    with pytest.raises(ConflictError, match=r"cannot import into team:a: it was erased \(erasure er-1"):
        await import_legacy(request, engine, "ref", records, erasures=state)
    [record] = records.all()
    assert (record.status, record.stored, record.rows_read) == ("failed", 0, 0)
    assert record.error is not None and "import under another namespace" in record.error
    assert await held(engine, TEAM) == []

    below = request.model_copy(update={"namespace": "team:a/agent:notes"})  # an erased account covers what is below it
    with pytest.raises(ConflictError):
        await import_legacy(below, engine, "ref", records, erasures=state)
    elsewhere = await import_legacy(request.model_copy(update={"namespace": "team:b"}), engine, "ref", records)
    assert elsewhere.status == "completed" and elsewhere.stored > 400


async def test_an_erased_kind_is_left_out_and_counted(ws: V1Workspace, state: SqliteStateStore, tmp_path: Path) -> None:
    state.put_tombstone(erased(TEAM, ItemKind.CONVERSATION))
    engine = ReferenceEngine()
    request = LegacyImportRequest(path=str(ws.root), namespace=str(TEAM))
    record = await import_legacy(request, engine, "ref", LegacyImports(tmp_path), erasures=state)
    with LegacyWorkspace.open(ws.root) as opened:
        expected = list(prepared_items(opened, namespace=TEAM))
    conversations = sum(1 for item in expected if isinstance(item, Conversation))
    assert conversations > 50 and record.status == "completed"
    assert record.stored == len(expected) - conversations
    assert record.skipped == {"conversation items: erased (erasure er-1)": conversations}
    stored = await held(engine, TEAM)
    assert len(stored) == record.stored and not any(isinstance(item, Conversation) for item in stored)


async def test_an_erasure_that_begins_mid_import_stops_it_before_the_next_batch(
    ws: V1Workspace, state: SqliteStateStore, tmp_path: Path
) -> None:
    inner = ReferenceEngine()
    records = LegacyImports(tmp_path)
    request = LegacyImportRequest(path=str(ws.root), namespace=str(TEAM))
    with pytest.raises(ConflictError, match="it was erased"):
        # The tombstone is written once the first batch is stored: the erasure begins while the import runs.
        erasing = AfterStoring(inner, lambda: state.put_tombstone(erased(TEAM)))
        await import_legacy(request, erasing, "ref", records, erasures=state)
    [record] = records.all()
    assert (record.status, record.stored, record.batches) == ("failed", 100, 1)
    assert len(await held(inner, TEAM)) == 100  # the erasure, which runs on, erases these
