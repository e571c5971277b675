"""`run_erasure` over real parts: a source and an account erased on the local and the reference engine, by the
engine's own erase and by the forget fallback, kinds, idempotence, resumption, running jobs, lagging reads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from engines.contract import (
    ConflictError,
    Document,
    EraseReport,
    EraseRequest,
    Hit,
    Item,
    ItemKind,
    Learning,
    LearningKind,
    ListPage,
    ListRequest,
    MemoryEngine,
    MemoryMeta,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
    SourceKind,
    SourceRef,
    StoreReceipt,
    UnavailableError,
)
from engines.local import LocalEngine
from engines.reference import ReferenceEngine
from pipeline.convert import ConvertedDocument, RawDocument, native_chain
from sources import SourceEntry, SourceReaders
from worker import control
from worker.embedded.dispatch import InProcessDispatcher
from worker.erasure.job import ErasureSettings, run_erasure
from worker.erasure.request import ErasureReceipt, ErasureTarget, Tombstone
from worker.erasure.runner import InProcessErasures
from worker.jobs import JobContext, ingest_batch, job_lease, sync_source
from worker.records import Change
from worker.state.sqlite import SqliteStateStore

FAST = ErasureSettings(backoff_s=0.001, backoff_max_s=0.002, poll_s=0.01, verify_backoff_s=0.001, drain_timeout_s=5)


class _Chain:
    def __init__(self) -> None:
        self.chain = native_chain()

    async def aconvert(self, raw: RawDocument) -> ConvertedDocument:
        return self.chain.convert(raw)


class ForgettingReference(ReferenceEngine):
    """A reference engine that does not erase: the contract's default, Unsupported."""

    async def erase(self, req: EraseRequest) -> EraseReport:
        return await MemoryEngine.erase(self, req)


class ForgettingLocal(LocalEngine):
    async def erase(self, req: EraseRequest) -> EraseReport:
        return await MemoryEngine.erase(self, req)


ENGINES: dict[str, Callable[[Path], MemoryEngine]] = {
    "reference": lambda _: ReferenceEngine(),
    "reference-forget": lambda _: ForgettingReference(),
    "local": lambda tmp: LocalEngine(tmp / "memory.sqlite3"),
    "local-forget": lambda tmp: ForgettingLocal(tmp / "memory.sqlite3"),
}


@dataclass
class Memory:
    tmp: Path
    state: SqliteStateStore
    engine: MemoryEngine
    ctx: JobContext
    dispatcher: InProcessDispatcher

    def folder(self, source_id: str, files: int, namespace: str | None = None) -> SourceEntry:
        root = self.tmp / source_id
        root.mkdir()
        for n in range(files):
            (root / f"n{n:03}.md").write_text(f"# {source_id} {n}\n\nthe {source_id} note number {n}\n")
        entry = SourceEntry(id=source_id, kind="folder", label=source_id, path=str(root), namespace=namespace)
        self.state.put_source(entry)
        return entry

    async def sync(self, source_id: str) -> None:
        await sync_source(self.ctx, source_id)
        await self.dispatcher.drain()

    async def listed(self, flt: MetaFilter | None = None) -> list[str]:
        page = await self.engine.list(ListRequest(limit=1000, filter=flt or MetaFilter()))
        return sorted(hit.text.splitlines()[0] for hit in page.items)

    async def store(self, place: str, text: str, kind: ItemKind = ItemKind.DOCUMENT) -> None:
        meta = MemoryMeta(namespace=Namespace.parse(place), source=SourceRef(kind=SourceKind.AGENT))
        item: Item
        if kind is ItemKind.LEARNING:
            item = Learning(text=text, kind=LearningKind.FACT, confidence=0.9, meta=meta)
        else:
            item = Document.from_text(text, meta=meta)
        await self.engine.store(item)

    async def erase(self, *, by: str = "tester", settings: ErasureSettings = FAST, **target: object) -> ErasureReceipt:
        runner = InProcessErasures(self.ctx, settings)
        receipt = await control.request_erasure(self.state, runner, ErasureTarget.model_validate(target), by)
        await runner.drain()
        done = self.state.get_erasure(receipt.id)
        assert done is not None
        return done


@pytest.fixture(params=sorted(ENGINES))
async def memory(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Memory]:
    yield await _memory(tmp_path, ENGINES[request.param](tmp_path))


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[Memory]:
    yield await _memory(tmp_path, LocalEngine(tmp_path / "memory.sqlite3"))


async def _memory(tmp_path: Path, engine: MemoryEngine) -> Memory:
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    dispatcher = InProcessDispatcher()
    ctx = JobContext(state, engine, _Chain(), dispatcher, SourceReaders())
    dispatcher.bind(ctx)
    return Memory(tmp_path, state, engine, ctx, dispatcher)


async def test_a_source_is_erased_and_stays_erased(memory: Memory) -> None:
    memory.folder("notes", 12)
    memory.folder("other", 3)
    await memory.sync("notes")
    await memory.sync("other")
    await memory.store("", "an agent's own note at the root")
    receipt = await memory.erase(source_id="notes", by="admin-token")

    assert receipt.status == "completed", receipt.reason
    assert (receipt.requested_by, receipt.method, receipt.forgotten, receipt.sources) == (
        "admin-token",
        "forget",
        12,
        ["notes"],
    )
    assert receipt.verification is not None and receipt.verification.passed
    assert receipt.started_at and receipt.finished_at and receipt.requested_at <= receipt.started_at
    assert "note number" not in receipt.model_dump_json()  # no item text in the audit record
    assert await memory.listed(MetaFilter(source_id="notes")) == []
    assert len(await memory.listed()) == 4  # the other source and the agent's note are untouched
    # The state is purged; the receipt and the tombstone outlive it.
    state = memory.state
    assert (state.get_source("notes"), state.unit_states("notes"), state.last_sync("notes")) == (None, {}, None)
    assert state.tombstones(["source:notes"])[0].erasure_id == receipt.id
    # A sync asked for again, and a batch queued before the erasure, store nothing.
    state.put_source(SourceEntry(id="notes", kind="folder", label="notes", path=str(memory.tmp / "notes")))
    report = await sync_source(memory.ctx, "notes")
    assert (report.listed, state.last_sync("notes")) == (0, None)
    batch = await ingest_batch(memory.ctx, "notes", [Change(unit_id="n001.md", action="upsert", version="x")])
    assert (batch.dropped, batch.stored) == (1, 0)
    assert await memory.listed(MetaFilter(source_id="notes")) == []


async def test_an_account_is_erased_below_it_and_nothing_beside_or_above(memory: Memory) -> None:
    for place in ("", "user:a", "user:a/agent:helper", "user:a/ws:w1/agent:deep", "user:b", "user:ab"):
        await memory.store(place, f"kept-or-not at {place or 'root'}")
    await memory.store("user:a", "alice is allergic to nuts", ItemKind.LEARNING)
    memory.folder("alice-notes", 3, namespace="user:a/ws:notes")
    await memory.sync("alice-notes")
    receipt = await memory.erase(namespace="user:a")

    assert receipt.status == "completed", receipt.reason
    expected = "forget" if "forget" in type(memory.engine).__name__.lower() else "erase"
    assert receipt.method == expected and receipt.sources == ["alice-notes"]
    assert receipt.scopes == [Namespace.parse("user:a")]
    assert await memory.listed(MetaFilter(reach=Reach.subtree(Namespace.parse("user:a")))) == []
    assert await memory.listed() == ["kept-or-not at root", "kept-or-not at user:ab", "kept-or-not at user:b"]
    assert memory.state.get_source("alice-notes") is None  # a source placed inside the account went with it


async def test_only_the_kinds_named_are_erased_and_the_sources_go_on(local: Memory) -> None:
    await local.store("user:a", "alice prefers tea", ItemKind.LEARNING)
    local.folder("alice-notes", 2, namespace="user:a")
    await local.sync("alice-notes")
    receipt = await local.erase(namespace="user:a", kinds=["learning"])

    assert receipt.status == "completed" and receipt.target.kinds == [ItemKind.LEARNING]
    assert len(await local.listed()) == 2  # the documents stay
    assert local.state.get_source("alice-notes") is not None  # and so does the source, still enabled
    assert local.state.get_source("alice-notes").enabled  # type: ignore[union-attr]
    await local.store("user:a/agent:x", "a new document")  # a kind the erasure did not name
    assert len(await local.listed()) == 3


async def test_the_same_request_is_answered_with_the_first_receipt(local: Memory) -> None:
    local.folder("notes", 2)
    await local.sync("notes")
    first = await local.erase(source_id="notes")
    again = await local.erase(source_id="notes")
    assert again == first  # completed: nothing more to do, nothing run again
    other_kinds = await local.erase(source_id="notes", kinds=["document"])
    assert other_kinds.id != first.id


async def test_a_failed_request_can_be_asked_again_under_a_new_id(local: Memory) -> None:
    local.folder("notes", 1)
    await local.sync("notes")
    receipt = await local.erase(source_id="notes")
    local.state.put_erasure(receipt.model_copy(update={"status": "failed", "reason": "test"}))
    assert (await local.erase(source_id="notes")).id != receipt.id


async def test_an_unknown_source_and_the_root_are_refused() -> None:
    with pytest.raises(ValueError, match="root namespace"):
        ErasureTarget(namespace=Namespace.ROOT)
    with pytest.raises(ValueError, match="exactly one"):
        ErasureTarget(source_id="a", namespace=Namespace.parse("user:a"))
    with pytest.raises(ValueError, match="exactly one"):
        ErasureTarget()
    assert ErasureTarget(source_id="a", kinds=list(ItemKind)).kinds == []  # every kind, written one way


async def test_erasing_an_unknown_source_is_not_found(local: Memory) -> None:
    with pytest.raises(NotFoundError, match="no source 'nope'"):
        await local.erase(source_id="nope")


async def test_an_interrupted_erasure_resumes_where_it_stopped(local: Memory) -> None:
    local.folder("notes", 5)
    await local.sync("notes")
    runner = InProcessErasures(local.ctx, FAST)
    receipt = await control.request_erasure(local.state, runner, ErasureTarget(source_id="notes"), "t")
    await runner.drain()
    done = local.state.get_erasure(receipt.id)
    assert done is not None and done.status == "completed"
    # As a process killed after its erase step left it: running, the last steps to do.
    local.state.put_erasure(done.model_copy(update={"status": "running", "steps": done.steps[:4], "finished_at": None}))
    assert [r.id for r in local.state.unfinished_erasures()] == [receipt.id]
    resumed = await run_erasure(local.ctx, receipt.id, settings=FAST)
    assert (resumed.status, resumed.runs, resumed.forgotten) == ("completed", 2, done.forgotten)
    assert local.state.unfinished_erasures() == []


async def test_an_erasure_waits_for_the_jobs_running_on_its_source(local: Memory) -> None:
    local.folder("notes", 2)
    await local.sync("notes")
    leases = local.state.leases()
    token = leases.join(job_lease("notes"), 30)  # a job of the source, still running

    async def job_ends() -> None:
        await asyncio.sleep(0.3)
        leases.leave(job_lease("notes"), token)

    ending = asyncio.create_task(job_ends())
    started = time.monotonic()
    receipt = await local.erase(source_id="notes")
    await ending
    assert receipt.status == "completed" and time.monotonic() - started >= 0.3
    assert await local.listed() == []


async def test_an_erasure_whose_jobs_never_end_fails_saying_so(local: Memory) -> None:
    local.folder("notes", 2)
    await local.sync("notes")
    leases = local.state.leases()
    token = leases.join(job_lease("notes"), 30)
    short = replace(FAST, drain_timeout_s=0.2)
    receipt = await local.erase(source_id="notes", settings=short)
    assert receipt.status == "failed" and "running jobs of notes did not end within 0.2 s" in (receipt.reason or "")
    assert receipt.steps == ["tombstoned", "stopped"] and len(await local.listed()) == 2
    leases.leave(job_lease("notes"), token)
    local.state.put_erasure(receipt.model_copy(update={"status": "running"}))
    assert (await run_erasure(local.ctx, receipt.id, settings=FAST)).status == "completed"
    assert await local.listed() == []


async def test_a_transient_engine_failure_is_retried_and_one_that_outlasts_them_is_raised(tmp_path: Path) -> None:
    class Flaky(ReferenceEngine):
        failures = 2

        async def list(self, req: ListRequest) -> ListPage:
            if self.failures:
                self.failures -= 1
                raise UnavailableError("engine is restarting")
            return await super().list(req)

    memory = await _memory(tmp_path, Flaky())
    await memory.store("user:a", "to go")
    assert (await memory.erase(namespace="user:a")).status == "completed"

    engine = Flaky()
    engine.failures = 10**6
    memory.engine = memory.ctx.engine = engine
    runner = InProcessErasures(memory.ctx, FAST)
    receipt = await control.request_erasure(
        memory.state, runner, ErasureTarget(namespace=Namespace.parse("user:b")), "t"
    )
    with pytest.raises(UnavailableError):
        await run_erasure(memory.ctx, receipt.id, settings=FAST, give_up=False)
    left = memory.state.get_erasure(receipt.id)
    assert left is not None and left.status == "running"  # for the caller's own retry
    given_up = await run_erasure(memory.ctx, receipt.id, settings=FAST)
    assert given_up.status == "failed" and "restarting" in (given_up.reason or "")


async def test_reads_that_lag_are_looked_at_again_and_what_stays_fails_the_erasure(tmp_path: Path) -> None:
    class Lagging(ReferenceEngine):
        """Lists an erased item for a few looks after it is gone (a replica catching up)."""

        stale_looks = 2
        ghost: Hit | None = None

        async def list(self, req: ListRequest) -> ListPage:
            page = await super().list(req)
            if self.stale_looks and not page.items and self.ghost is not None:
                self.stale_looks -= 1
                return ListPage(items=[self.ghost])
            return page

    engine = Lagging()
    memory = await _memory(tmp_path, engine)
    await memory.store("user:a", "to go")
    engine.ghost = (await engine.list(ListRequest(limit=1))).items[0]
    receipt = await memory.erase(namespace="user:a")
    assert receipt.status == "completed" and receipt.verification is not None
    assert (receipt.verification.attempts, receipt.forgotten) == (3, 0)

    engine.stale_looks = 10**6  # never catches up: the erasure cannot prove itself
    await memory.store("user:c", "to go too")
    stuck = await memory.erase(namespace="user:c")
    assert stuck.status == "failed" and "1 items were still found after 5 looks" in (stuck.reason or "")


async def test_a_batch_storing_when_the_erasure_begins_stops_before_its_next_call(local: Memory) -> None:
    """The tombstone is looked at right before each store_many: an erasure that began after the batch did
    stops the batch between two calls, and what it stored is the erasure's to erase."""
    entry = local.folder("notes", 250)  # three store_many calls
    calls: list[int] = []
    engine = local.engine
    original = engine.store_many

    async def storing(items: list[Item]) -> list[StoreReceipt]:
        calls.append(len(items))
        if len(calls) == 1:  # the erasure is asked for while the first call is under way
            local.state.put_tombstone(Tombstone(scope="source:notes", erasure_id="e1"))
        return await original(items)

    engine.store_many = storing  # type: ignore[method-assign]
    changes = [Change(unit_id=f"n{n:03}.md", action="upsert", version="1") for n in range(100)]
    changes += [Change(unit_id=f"n{n:03}.md", action="upsert", version="1") for n in range(100, 250)]
    report = await ingest_batch(local.ctx, entry.id, changes)
    assert calls == [100] and (report.units, report.dropped) == (100, 150)
    assert not local.state.leases().holders(job_lease("notes"))  # the job let go of its lease


async def test_a_store_into_an_erased_account_is_refused(local: Memory) -> None:
    await local.erase(namespace="user:a", kinds=["learning"])
    with pytest.raises(ConflictError, match="cannot store a learning at user:a/agent:x: it was erased"):
        control.refuse_erased_store(local.state, Namespace.parse("user:a/agent:x"), ItemKind.LEARNING)
    control.refuse_erased_store(local.state, Namespace.parse("user:a"), ItemKind.DOCUMENT)  # another kind
    control.refuse_erased_store(local.state, Namespace.parse("user:b"), ItemKind.LEARNING)  # another account
