"""Erasures against the CortexDB engine on its double (both wires, on loopback): an account by the engine's own
erase and by the forget fallback, and a source, which is always forgotten."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engines.contract import (
    Document,
    EraseReport,
    EraseRequest,
    ListRequest,
    MemoryEngine,
    MemoryMeta,
    MetaFilter,
    Namespace,
    SourceKind,
    SourceRef,
)
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.settings import EngineCredential
from sources import SourceEntry
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve
from worker import control
from worker.erasure.job import ErasureSettings
from worker.erasure.request import ErasureReceipt, ErasureTarget
from worker.erasure.runner import InProcessErasures
from worker.records import ManifestEntry
from worker.state.sqlite import SqliteStateStore

pytestmark = pytest.mark.integration

FAST = ErasureSettings(backoff_s=0.001, backoff_max_s=0.002, poll_s=0.01, verify_backoff_s=0.05)


class ForgettingCortex(CortexEngine):
    """The same engine answering Unsupported to erase, as an engine without it does."""

    async def erase(self, req: EraseRequest) -> EraseReport:
        return await MemoryEngine.erase(self, req)


@pytest.fixture(params=["direct", "hosted"])
async def cortex(request: pytest.FixtureRequest) -> AsyncIterator[Engines]:
    double = CortexDouble(DoubleConfig(wire=request.param, rate_limit_per_minute=None))
    with serve(double) as url:
        engines = Engines(CortexWire.TINYHUMANS if request.param == "hosted" else CortexWire.DIRECT, url)
        yield engines
        for engine in engines.opened:
            await engine.aclose()


@dataclass
class Engines:
    """Engines on one double's wire, closed after the test."""

    wire: CortexWire
    url: str
    opened: list[CortexEngine] = field(default_factory=list)

    def engine(self, erases: bool) -> CortexEngine:
        kind = CortexEngine if erases else ForgettingCortex
        self.opened.append(kind(self.wire, self.url, EngineCredential.of("test-key"), timing=Timing.fast()))
        return self.opened[-1]


async def _store(engine: MemoryEngine, place: str, text: str, source_id: str | None = None) -> str:
    ref = SourceRef(kind=SourceKind.FOLDER, id=source_id) if source_id else SourceRef()
    meta = MemoryMeta(namespace=Namespace.parse(place), source=ref)
    return (await engine.store(Document.from_text(text, meta=meta))).id


async def _texts(engine: MemoryEngine) -> list[str]:
    return sorted(hit.text for hit in (await engine.list(ListRequest(limit=100, filter=MetaFilter()))).items)


async def _erase(state: SqliteStateStore, engine: MemoryEngine, target: ErasureTarget) -> ErasureReceipt:
    runner = InProcessErasures.over(state, engine, FAST)
    receipt = await control.request_erasure(state, runner, target, "ops")
    await runner.drain()
    done = state.get_erasure(receipt.id)
    assert done is not None
    return done


@pytest.mark.parametrize("erases", [True, False], ids=["erase", "forget"])
async def test_an_account_is_erased_on_cortexdb(cortex: Engines, erases: bool, tmp_path: Path) -> None:
    engine = cortex.engine(erases)
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    for place in ("", "user:a", "user:a/agent:helper", "user:b"):
        await _store(engine, place, f"a note at {place or 'root'}")
    receipt = await _erase(state, engine, ErasureTarget(namespace=Namespace.parse("user:a")))
    assert receipt.status == "completed", receipt.reason
    assert receipt.method == ("erase" if erases else "forget")
    if erases:  # CortexDB's own erasure ids, one per scope it erased (user:a and the agent below it)
        assert (len(receipt.engine_receipts), receipt.erased_scopes, receipt.forgotten) == (2, 2, 0)
    else:
        assert (receipt.engine_receipts, receipt.forgotten) == ([], 2)
    assert receipt.verification is not None and receipt.verification.passed
    assert await _texts(engine) == ["a note at root", "a note at user:b"]
    state.close()


async def test_a_source_is_forgotten_on_cortexdb(cortex: Engines, tmp_path: Path) -> None:
    engine = cortex.engine(erases=True)
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    state.put_source(SourceEntry(id="notes", kind="folder", label="notes", path="/notes"))
    ids = [await _store(engine, "", f"note {n} of the folder", source_id="notes") for n in range(3)]
    state.commit("notes", {f"n{n}.md": ManifestEntry(version="1", item_ids=[i]) for n, i in enumerate(ids)})
    await _store(engine, "", "an agent's own note")
    receipt = await _erase(state, engine, ErasureTarget(source_id="notes"))
    assert (receipt.status, receipt.method, receipt.forgotten) == ("completed", "forget", 3), receipt.reason
    assert await _texts(engine) == ["an agent's own note"]
    state.close()
