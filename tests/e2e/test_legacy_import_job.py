"""The import job around `migrate`: its record in the data directory, transient engine failures resumed from
the checkpoint, one run at a time, time slices, and failures that leave a resumable record."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from engines.contract import (
    ConflictError,
    EngineError,
    InvalidRequestError,
    Item,
    MemoryEngine,
    NotFoundError,
    StoreReceipt,
    UnavailableError,
)
from engines.reference import ReferenceEngine
from tests.conformance.delegating import DelegatingEngine
from tests.fixtures.legacy_workspace import V1Workspace, generated_workspace
from worker.legacy.job import LegacyImportRequest, LegacyImports, LegacyImportSettings, import_legacy

pytestmark = pytest.mark.e2e

FAST = LegacyImportSettings(store_attempts=3, backoff_s=0.001, backoff_max_s=0.002)


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> V1Workspace:
    return generated_workspace(tmp_path_factory.mktemp("v1") / "ws", 500)


class Flaky(DelegatingEngine):
    """Answers Unavailable to the calls numbered in `failing` (counting from 1)."""

    def __init__(self, inner: MemoryEngine, failing: set[int]) -> None:
        super().__init__(inner)
        self.failing = failing
        self.calls = 0

    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        self.calls += 1
        if self.calls in self.failing:
            raise UnavailableError("engine restarting")
        return await self.inner.store_many(items)


async def test_an_unavailable_engine_is_waited_for_and_the_import_resumes(ws: V1Workspace, tmp_path: Path) -> None:
    engine = Flaky(ReferenceEngine(), failing={2, 3})
    records = LegacyImports(tmp_path)
    record = await import_legacy(LegacyImportRequest(path=str(ws.root)), engine, "ref", records, settings=FAST)
    assert record.status == "completed" and record.replayed == 0 and record.runs == 1
    again = await import_legacy(LegacyImportRequest(path=str(ws.root)), engine, "ref", records, settings=FAST)
    assert (again.stored, again.replayed, again.runs) == (0, record.stored, 2)


async def test_an_engine_that_stays_down_fails_the_import_resumably(ws: V1Workspace, tmp_path: Path) -> None:
    inner = ReferenceEngine()
    records = LegacyImports(tmp_path)
    request = LegacyImportRequest(path=str(ws.root))
    with pytest.raises(EngineError, match="legacy import stopped; resume from"):
        await import_legacy(request, Flaky(inner, failing={2, 3, 4}), "ref", records, settings=FAST)
    [failed] = records.all()
    assert failed.status == "failed" and failed.batches == 1 and "engine restarting" in (failed.error or "")
    resumed = await import_legacy(request, inner, "ref", records, settings=FAST)
    assert resumed.status == "completed" and resumed.batches > 1 and resumed.replayed == 0


async def test_one_run_of_an_import_at_a_time(ws: V1Workspace, tmp_path: Path) -> None:
    records = LegacyImports(tmp_path)
    request = LegacyImportRequest(path=str(ws.root))
    held = await import_legacy(request, ReferenceEngine(), "ref", records)
    with records.claim(held.id), pytest.raises(ConflictError, match="running in another process"):
        await import_legacy(request, ReferenceEngine(), "ref", records)
    # Another engine or namespace is another import, with a record of its own.
    other = await import_legacy(request.model_copy(update={"namespace": "team:a"}), ReferenceEngine(), "ref", records)
    assert other.id != held.id and len(records.all()) == 2


async def test_a_deadline_pauses_after_a_batch_and_the_next_run_goes_on(ws: V1Workspace, tmp_path: Path) -> None:
    engine = ReferenceEngine()
    records = LegacyImports(tmp_path)
    request = LegacyImportRequest(path=str(ws.root))
    paused = await import_legacy(request, engine, "ref", records, deadline=time.monotonic())
    assert (paused.status, paused.batches, paused.stored) == ("paused", 1, 100)
    done = await import_legacy(request, engine, "ref", records)
    assert done.status == "completed" and done.replayed == 0 and done.runs == 2 and done.batches > 1


async def test_an_unreadable_record_starts_the_import_over(ws: V1Workspace, tmp_path: Path) -> None:
    records = LegacyImports(tmp_path)
    request = LegacyImportRequest(path=str(ws.root))
    first = await import_legacy(request, ReferenceEngine(), "ref", records)
    (records.folder / f"{first.id}.json").write_text("{not json")
    again = await import_legacy(request, ReferenceEngine(), "ref", records)
    assert again.status == "completed" and again.stored == first.stored and again.runs == 1


async def test_paths_that_are_no_workspace_fail_with_what_to_do(tmp_path: Path) -> None:
    records = LegacyImports(tmp_path / "data")
    with pytest.raises(NotFoundError, match="no such folder"):
        await import_legacy(LegacyImportRequest(path=str(tmp_path / "nowhere")), ReferenceEngine(), "ref", records)
    with pytest.raises(InvalidRequestError, match=r"is not a v1 workspace: memory/memory\.db is missing"):
        await import_legacy(LegacyImportRequest(path=str(tmp_path)), ReferenceEngine(), "ref", records)
    with pytest.raises(InvalidRequestError, match="namespace"):
        await import_legacy(LegacyImportRequest(path=str(tmp_path), namespace="x:y"), ReferenceEngine(), "ref", records)
    failed = {json.loads(path.read_text())["status"] for path in records.folder.glob("*.json")}
    assert failed == {"failed"}
