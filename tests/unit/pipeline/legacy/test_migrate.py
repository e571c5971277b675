"""Checkpoints, resume and `migrate` into the reference engine (docs/spec/legacy-import.md §9, §10, §12)."""

from __future__ import annotations

import asyncio
import pickle
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from engines.contract import (
    Document,
    EngineError,
    Item,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    Namespace,
    Reach,
    StoreReceipt,
    UnavailableError,
)
from engines.reference import ReferenceEngine
from pipeline.legacy import (
    Checkpoint,
    ChunkKey,
    LegacyJsonError,
    LegacySqliteError,
    LegacyWorkspace,
    MigrationFailed,
    MigrationReport,
    ReadStats,
    migrate,
    migrate_with,
    prepared_items,
)
from tests.conformance.delegating import DelegatingEngine
from tests.fixtures.legacy_workspace import V1Workspace, freeze, generated_workspace, sample_workspace, snapshot


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> V1Workspace:
    """About 400 items over every section: five batches."""
    return generated_workspace(tmp_path_factory.mktemp("big") / "ws", 600)


def wire(items: list[Item]) -> list[str]:
    return [item.wire_json() for item in items]


async def held(engine: MemoryEngine, reach: Reach | None = None) -> dict[str, str]:
    """Every item the engine holds: id → wire JSON."""
    found: dict[str, str] = {}
    cursor = None
    while True:
        page = await engine.export(ListRequest(limit=500, cursor=cursor, filter=MetaFilter(reach=reach)))
        found.update((entry.id, entry.item.wire_json()) for entry in page.items)
        if page.next_cursor is None:
            return found
        cursor = page.next_cursor


@pytest.mark.parametrize("page_size", [1, 3, 256])
def test_every_prefix_resumes_to_exactly_the_rest(tmp_path: Path, page_size: int) -> None:
    ws = sample_workspace(tmp_path / "ws")
    with LegacyWorkspace.open(ws.root) as opened:
        everything = list(opened.items(page_size))
        whole = wire([i.item for i in everything])
        assert wire([i.item for i in opened.items_from(Checkpoint(), page_size)]) == whole
        for n, imported in enumerate(everything):
            rest = wire([i.item for i in opened.items_from(imported.checkpoint, page_size)])
            assert rest == whole[n + 1 :], f"after item {n}"


def test_each_checkpoint_holds_the_last_key_of_every_section_so_far(tmp_path: Path) -> None:
    with LegacyWorkspace.open(sample_workspace(tmp_path / "ws").root) as opened:
        last = list(opened.items())[-1].checkpoint
    assert last == Checkpoint(
        documents="d3b",
        chunks=ChunkKey(source_kind="email", source_id="thread-1"),
        conversations="s1",
        learnings="db",
        profile="f5",
    )
    assert last.to_json() == (
        '{"documents":"d3b","chunks":{"source_kind":"email","source_id":"thread-1"},'
        '"conversations":"s1","learnings":"db","profile":"f5"}'
    )


def test_checkpoint_json() -> None:
    start = Checkpoint()
    assert start.to_json() == "{}" and start.is_start()
    partial = Checkpoint(documents="d1", chunks=ChunkKey(source_kind="chat", source_id="x"))
    assert partial.to_json() == '{"documents":"d1","chunks":{"source_kind":"chat","source_id":"x"}}'
    assert Checkpoint.from_json(partial.to_json()) == partial and not partial.is_start()
    for bad in ["", "[]", "nope", '{"documents": 5}', '{"chunks": {"source_kind": "chat"}}', '{"profile": null, "x']:
        with pytest.raises(LegacyJsonError):
            Checkpoint.from_json(bad)


async def test_migrate_stores_every_item_then_replays_them_all(big: V1Workspace) -> None:
    engine = ReferenceEngine()
    with LegacyWorkspace.open(big.root) as opened:
        expected = list(prepared_items(opened))
        first = await migrate(engine, opened)
        assert (first.stored, first.replayed, first.batches) == (len(expected), 0, -(-len(expected) // 100))
        assert first.checkpoint == list(opened.items())[-1].checkpoint
        again = await migrate(engine, opened)
    assert (again.stored, again.replayed, again.batches) == (0, len(expected), first.batches)
    assert sorted((await held(engine)).values()) == sorted(wire(expected))


async def test_on_batch_hears_each_checkpoint_after_its_batch_is_stored(big: V1Workspace) -> None:
    engine = ReferenceEngine()
    heard: list[tuple[Checkpoint, int]] = []

    async def on_batch(checkpoint: Checkpoint) -> None:
        heard.append((checkpoint, len(await held(engine))))

    with LegacyWorkspace.open(big.root) as opened:
        report = await migrate_with(engine, opened, None, on_batch)
        checkpoints = [i.checkpoint for i in opened.items()]
    assert [count for _, count in heard] == [min(100 * n, len(checkpoints)) for n in range(1, report.batches + 1)]
    assert [cp for cp, _ in heard] == [
        checkpoints[min(100 * n, len(checkpoints)) - 1] for n in range(1, report.batches + 1)
    ]


async def test_a_sync_on_batch_works_and_its_failure_propagates(tmp_path: Path) -> None:
    heard: list[Checkpoint] = []
    with LegacyWorkspace.open(sample_workspace(tmp_path / "ws").root) as opened:
        await migrate_with(ReferenceEngine(), opened, None, heard.append)
        assert len(heard) == 1

        def refuse(_: Checkpoint) -> None:
            raise RuntimeError("the host could not save it")

        with pytest.raises(RuntimeError, match="could not save"):
            await migrate_with(ReferenceEngine(), opened, None, refuse)


class FailingSecondBatch(DelegatingEngine):
    """Stores the first 10 items of the second `store_many`, then answers Unavailable."""

    def __init__(self, inner: MemoryEngine) -> None:
        super().__init__(inner)
        self.calls = 0

    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        self.calls += 1
        if self.calls == 2:
            await self.inner.store_many(items[:10])
            raise UnavailableError("engine went away")
        return await self.inner.store_many(items)


async def test_a_failed_batch_resumes_from_the_checkpoint_before_it(big: V1Workspace) -> None:
    inner = ReferenceEngine()
    engine = FailingSecondBatch(inner)
    saved: list[Checkpoint] = []
    with LegacyWorkspace.open(big.root) as opened:
        total = len(list(opened.items()))
        first_batch = list(opened.items())[99].checkpoint
        with pytest.raises(MigrationFailed) as caught:
            await migrate_with(engine, opened, None, saved.append)
        failed = caught.value
        assert isinstance(failed, EngineError)
        assert failed.checkpoint == first_batch == saved[-1]
        assert (
            failed.message
            == f"legacy import stopped; resume from {first_batch.to_json()}: unavailable: engine went away"
        )
        assert isinstance(failed.__cause__, UnavailableError)
        resumed = await migrate(engine, opened, failed.checkpoint)
    assert (resumed.stored, resumed.replayed) == (total - 110, 10)
    assert len(await held(inner)) == total


def test_migration_failed_pickles_with_its_checkpoint() -> None:
    failed = MigrationFailed.stopped_at(Checkpoint(profile="f1"), UnavailableError("down"))
    copy = pickle.loads(pickle.dumps(failed))
    assert (type(copy), copy.message, copy.checkpoint) == (MigrationFailed, failed.message, Checkpoint(profile="f1"))


class AfterStoring(DelegatingEngine):
    """Runs `then` after each batch is stored (closing the workspace, say, so the next page read fails)."""

    def __init__(self, inner: MemoryEngine, then: Callable[[], object]) -> None:
        super().__init__(inner)
        self.then = then

    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        receipts = await self.inner.store_many(items)
        self.then()
        return receipts


async def test_a_read_failure_propagates_and_leaves_what_was_stored(big: V1Workspace) -> None:
    inner = ReferenceEngine()
    saved: list[Checkpoint] = []
    opened = LegacyWorkspace.open(big.root)
    with pytest.raises(LegacySqliteError):
        await migrate_with(AfterStoring(inner, opened.close), opened, None, saved.append)
    # The failure comes at the next page read: every batch before it is stored and was checkpointed.
    assert saved and len(await held(inner)) == 100 * len(saved)
    with LegacyWorkspace.open(big.root) as reopened:
        total = len(list(reopened.items()))
        resumed = await migrate(inner, reopened, saved[-1])
    assert (resumed.stored, resumed.replayed) == (total - 100 * len(saved), 0)


class OverNetwork(DelegatingEngine):
    """A store that waits as a server's would, noting the rows read before and after each one."""

    def __init__(self, stats: ReadStats) -> None:
        super().__init__(ReferenceEngine())
        self.stats = stats
        self.rows_around: list[tuple[int, int]] = []

    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        before = self.stats.rows
        await asyncio.sleep(0.01)
        receipts = await self.inner.store_many(items)
        self.rows_around.append((before, self.stats.rows))
        return receipts


class InProcess(OverNetwork):
    stores_in_process = True


@pytest.mark.parametrize("engine_kind", [OverNetwork, InProcess])
async def test_the_next_batch_is_read_during_a_store_only_when_the_store_waits_on_a_server(
    big: V1Workspace, engine_kind: type[OverNetwork]
) -> None:
    stats = ReadStats()
    engine = engine_kind(stats)
    with LegacyWorkspace.open(big.root) as opened:
        report = await migrate_with(engine, opened, None, lambda _: None, stats=stats, helper_from=None)
    assert report.batches == len(engine.rows_around) > 2
    # Every batch but the last: a remote store overlaps the next read, an in-process one never does (the two
    # would only take turns on the GIL).
    read_meanwhile = [after > before for before, after in engine.rows_around[:-1]]
    assert read_meanwhile == [not engine.stores_in_process] * len(read_meanwhile)


class Untouchable(DelegatingEngine):
    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        raise AssertionError("the engine was called")


async def test_nothing_to_store_calls_no_engine(tmp_path: Path, big: V1Workspace) -> None:
    empty = V1Workspace(tmp_path / "empty").create()
    with LegacyWorkspace.open(empty.root) as opened:
        assert await migrate(Untouchable(ReferenceEngine()), opened) == MigrationReport()
    with LegacyWorkspace.open(big.root) as opened:
        end = list(opened.items())[-1].checkpoint
        report = await migrate(Untouchable(ReferenceEngine()), opened, end)
    assert report == MigrationReport(checkpoint=end)


async def test_items_are_scrubbed_before_they_are_stored(tmp_path: Path) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    ws = V1Workspace(tmp_path / "ws").create()
    ws.doc("d1", "notes", f"deploy with {token} tonight")
    ws.turn("s1", 1.0, "user", f"my token is {token}")
    engine = ReferenceEngine()
    with LegacyWorkspace.open(ws.root) as opened:
        raw = [i.item.render_text() for i in opened.items()]
        await migrate(engine, opened)
    assert all(token in text for text in raw)
    stored = list((await held(engine)).values())
    assert len(stored) == 2
    assert all(token not in text and "[REDACTED]" in text for text in stored)


async def test_a_host_may_store_everything_under_one_namespace(tmp_path: Path) -> None:
    ws = sample_workspace(tmp_path / "ws")
    team = Namespace.parse("team:acme")
    engine = ReferenceEngine()
    with LegacyWorkspace.open(ws.root) as opened:
        report = await migrate(engine, opened, namespace=team)
    placed = await held(engine, Reach.exact(team))
    assert len(placed) == report.stored > 0
    assert await held(engine, Reach.exact(Namespace.ROOT)) == {}


async def test_a_read_only_workspace_is_never_written(tmp_path: Path) -> None:
    ws = sample_workspace(tmp_path / "ws")
    before = freeze(ws)
    with LegacyWorkspace.open(ws.root) as opened:
        list(opened.items(page_size=2))
        opened.counts()
        await migrate(ReferenceEngine(), opened)
    # Not even SQLite's side files: a WAL database nobody holds open is read as immutable.
    assert snapshot(ws) == before


def test_rows_still_in_the_log_of_an_open_wal_database_are_read(tmp_path: Path) -> None:
    ws = V1Workspace(tmp_path / "ws").create(chunks=False)
    ws.doc("d1", "notes", "in the main file")
    writer = sqlite3.connect(ws.memory_db)  # v1 still running: its log stays, unmerged
    try:
        writer.execute("PRAGMA wal_autocheckpoint = 0")
        writer.execute("SELECT count(*) FROM memory_docs").fetchall()
        ws.doc("d2", "notes", "only in the write-ahead log")
        assert ws.memory_db.with_name("memory.db-wal").stat().st_size > 0
        before = freeze(ws)
        with LegacyWorkspace.open(ws.root) as opened:
            texts = [i.item.render_text() for i in opened.items()]
        assert texts == ["in the main file", "only in the write-ahead log"]
        # The database and its log are untouched; the `-shm` index is SQLite's shared memory, which readers use.
        assert {p: v for p, v in snapshot(ws).items() if p.suffix != ".db-shm"} == {
            p: v for p, v in before.items() if p.suffix != ".db-shm"
        }
    finally:
        writer.close()


def test_documents_kept_are_documents(tmp_path: Path) -> None:
    with LegacyWorkspace.open(sample_workspace(tmp_path / "ws").root) as opened:
        first = next(opened.items())
    assert isinstance(first.item, Document)


async def test_keep_leaves_items_out_and_the_checkpoint_still_moves_past_them(big: V1Workspace) -> None:
    engine = ReferenceEngine()
    asked: list[int] = []

    def documents_only(items: list[Item]) -> list[Item]:
        asked.append(len(items))
        return [item for item in items if isinstance(item, Document)]

    with LegacyWorkspace.open(big.root) as opened:
        every = list(prepared_items(opened))
        expected: list[Item] = [item for item in every if isinstance(item, Document)]
        report = await migrate_with(engine, opened, None, lambda _: None, keep=documents_only)
        assert report.checkpoint == list(opened.items())[-1].checkpoint
        # A batch with nothing left to send moves the checkpoint without calling the engine.
        nothing = await migrate_with(Untouchable(ReferenceEngine()), opened, None, lambda _: None, keep=lambda _: [])
    assert sum(asked) == len(every) and report.batches == -(-len(every) // 100)
    assert report.stored == len(expected) < len(every)
    assert sorted((await held(engine)).values()) == sorted(wire(expected))
    assert (nothing.stored, nothing.batches, nothing.checkpoint) == (0, report.batches, report.checkpoint)


async def test_what_keep_raises_stops_the_migration_once_the_batch_before_is_stored(big: V1Workspace) -> None:
    engine = ReferenceEngine()
    saved: list[Checkpoint] = []

    def refuse_the_third(items: list[Item]) -> list[Item]:
        if len(saved) == 2:
            raise RuntimeError("erased meanwhile")
        return items

    with LegacyWorkspace.open(big.root) as opened:
        with pytest.raises(RuntimeError, match="erased meanwhile"):
            await migrate_with(engine, opened, None, saved.append, keep=refuse_the_third)
        assert saved[-1] == list(opened.items())[199].checkpoint
    assert len(await held(engine)) == 200
