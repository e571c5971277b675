"""`sync_source` and `ingest_batch` on in-memory parts: diffs, write-first order, crash points, retries."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest

from engines.contract import (
    EngineError,
    ForgetReport,
    ForgetTarget,
    Hit,
    Item,
    ListRequest,
    MetaFilter,
    Role,
    SourceKind,
    StoreReceipt,
    Turn,
    UnavailableError,
)
from engines.reference import ReferenceEngine
from pipeline.convert import ConvertedDocument, RawDocument, native_chain
from sources import (
    Delta,
    Listing,
    ReaderOptions,
    Skipped,
    SourceEntry,
    SourceKindEntry,
    SourceReader,
    Unit,
    UnitContent,
)
from worker.embedded.dispatch import InProcessDispatcher
from worker.jobs import JobContext, PipelineSettings, diff_delta, diff_units, due_sources, sync_source
from worker.records import SOURCE_UNIT, Change
from worker.state.base import UnitState
from worker.state.sqlite import SqliteStateStore


@dataclass
class MemoryReader:
    """A folder held in a dict: unit id -> (bytes, version)."""

    root: Path
    kind: str = "folder"
    files: dict[str, tuple[bytes, str]] = field(default_factory=dict)
    skipped: list[Skipped] = field(default_factory=list)
    reads: int = 0

    def put(self, unit_id: str, text: str | bytes, mtime: int = 1) -> None:
        data = text.encode() if isinstance(text, str) else text
        self.files[unit_id] = (data, f"{len(data)}:{mtime}")

    def list_units(self) -> Listing:
        units = tuple(Unit(u, version, len(data)) for u, (data, version) in sorted(self.files.items()))
        return Listing(units=units, skipped=tuple(self.skipped))

    def read(self, unit_id: str) -> UnitContent:
        self.reads += 1
        data, version = self.files[unit_id]
        origin = SourceEntry(id="src", kind="folder", label="src").origin(
            SourceKind.FOLDER, file_path=f"{self.root}/{unit_id}", folder=str(self.root), workspace=str(self.root)
        )
        return UnitContent(unit_id, version, origin, data=data, name=unit_id)


class CountingConverter:
    def __init__(self) -> None:
        self.calls = 0
        self.chain = native_chain()

    async def aconvert(self, raw: RawDocument) -> ConvertedDocument:
        self.calls += 1
        return self.chain.convert(raw)


class FaultyEngine(ReferenceEngine):
    """A reference engine whose store_many or forget fail a set number of times."""

    def __init__(self) -> None:
        super().__init__()
        self.store_failures: list[Exception] = []
        self.forget_failures: list[Exception] = []
        self.store_calls = 0

    async def store_many(self, items: list[Item]) -> list[StoreReceipt]:
        self.store_calls += 1
        if self.store_failures:
            raise self.store_failures.pop(0)
        return await super().store_many(items)

    async def forget(self, target: ForgetTarget) -> ForgetReport:
        if self.forget_failures:
            raise self.forget_failures.pop(0)
        return await super().forget(target)


class FixedReaders:
    def __init__(self, reader: SourceReader) -> None:
        self.reader = reader
        self.options = ReaderOptions()

    def reader_for(self, entry: SourceEntry) -> SourceReader:
        return self.reader

    def kind_entry(self, kind: str) -> SourceKindEntry:
        raise AssertionError("these tests prepare every unit in place")


@dataclass
class World:
    ctx: JobContext
    reader: MemoryReader
    engine: FaultyEngine
    converter: CountingConverter
    state: SqliteStateStore

    async def sync(self) -> None:
        await sync_source(self.ctx, "src")
        await self.ctx.dispatcher.drain()  # type: ignore[attr-defined]

    async def items(self) -> list[Hit]:
        page = await self.engine.list(ListRequest(limit=1000, filter=MetaFilter(source_id="src")))
        return page.items


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    state = SqliteStateStore(tmp_path / "state.sqlite3")
    state.put_source(SourceEntry(id="src", kind="folder", label="src", path=str(tmp_path)))
    reader, engine, converter = MemoryReader(tmp_path), FaultyEngine(), CountingConverter()
    dispatcher = InProcessDispatcher()
    settings = PipelineSettings(store_attempts=3, store_backoff_s=0.001, store_backoff_max_s=0.002)
    ctx = JobContext(state, engine, converter, dispatcher, FixedReaders(reader), settings)
    dispatcher.bind(ctx)
    yield World(ctx, reader, engine, converter, state)
    state.close()


def _unit(unit_id: str, version: str = "v1") -> Unit:
    return Unit(id=unit_id, version=version)


def test_diff_units_finds_new_moved_unfinished_and_gone_units() -> None:
    states = {
        "same": UnitState("v1", deleted=False, has_stale=False),
        "moved": UnitState("v1", deleted=False, has_stale=False),
        "stale": UnitState("v1", deleted=False, has_stale=True),
        "marked": UnitState("v1", deleted=True, has_stale=True),
        "gone": UnitState("v1", deleted=False, has_stale=False),
    }
    units = [_unit("same"), _unit("moved", "v2"), _unit("stale"), _unit("marked"), _unit("new")]
    changes = diff_units(units, states, hints=None)
    assert [(c.unit_id, c.action) for c in changes] == [
        ("moved", "upsert"),
        ("stale", "upsert"),
        ("marked", "upsert"),
        ("new", "upsert"),
        ("gone", "delete"),
    ]
    assert changes[0].version == "v2"
    hinted = diff_units(units, states, hints={"same"})
    # A hint narrows the version comparison only; unfinished work and new units are always done.
    assert [c.unit_id for c in hinted] == ["stale", "marked", "new", "gone"]


def test_diff_delta_asks_for_what_changed_and_finishes_unfinished_work_outside_it() -> None:
    states = {
        "kept": UnitState("v1", deleted=False, has_stale=False),
        "edited": UnitState("v1", deleted=False, has_stale=False),
        "same": UnitState("v1", deleted=False, has_stale=False),
        "removed": UnitState("v1", deleted=False, has_stale=False),
        "stale": UnitState("v1", deleted=False, has_stale=True),
        "marked": UnitState("v1", deleted=True, has_stale=True),
    }
    delta = Delta(cursor="c2", units=(_unit("edited", "v2"), _unit("same"), _unit("new")), removed=("removed", "never"))
    changes = diff_delta(delta, states)
    assert [(c.unit_id, c.action, c.version) for c in changes] == [
        ("edited", "upsert", "v2"),
        ("new", "upsert", "v1"),
        ("removed", "delete", None),
        ("stale", "upsert", "v1"),
        ("marked", "delete", None),
    ]


async def test_first_sync_then_edit_stores_new_before_forgetting_old(world: World) -> None:
    world.reader.put("a.md", "alpha one")
    world.reader.put("b.md", "beta one")
    await world.sync()
    first = {h.meta.file_path: h.id for h in await world.items()}
    assert len(first) == 2
    world.reader.put("a.md", "alpha two", mtime=2)
    await world.sync()
    after = {h.meta.file_path: h.id for h in await world.items()}
    assert after.keys() == first.keys()
    changed = next(p for p in after if p.endswith("a.md"))
    assert after[changed] != first[changed]
    (entry,) = world.state.manifest_entries("src", ["a.md"]).values()
    assert entry.item_ids == [after[changed]] and entry.stale == []


async def test_a_touched_file_is_read_but_not_converted_again(world: World) -> None:
    world.reader.put("a.md", "alpha")
    await world.sync()
    calls, reads = world.converter.calls, world.reader.reads
    world.reader.put("a.md", "alpha", mtime=99)
    await world.sync()
    assert world.reader.reads == reads + 1
    assert world.converter.calls == calls
    assert world.state.unit_states("src")["a.md"].version == "5:99"
    assert len(await world.items()) == 1


async def test_crash_between_store_and_checkpoint_is_a_replay_next_time(world: World, tmp_path: Path) -> None:
    world.reader.put("a.md", "alpha")
    failing_commit = world.state.commit

    def crash(source_id: str, entries: object) -> None:
        raise RuntimeError("killed right after the engine acknowledged")

    world.state.commit = crash  # type: ignore[method-assign]
    with pytest.raises(RuntimeError):
        await world.sync()
    assert len(await world.items()) == 1 and world.state.unit_states("src") == {}
    world.state.commit = failing_commit  # type: ignore[method-assign]
    await world.sync()
    assert len(await world.items()) == 1
    assert list(world.state.unit_states("src")) == ["a.md"]


async def test_crash_before_forgetting_leaves_stale_ids_the_next_sync_sweeps(world: World) -> None:
    world.reader.put("a.md", "alpha one")
    await world.sync()
    world.reader.put("a.md", "alpha two", mtime=2)
    world.engine.forget_failures = [RuntimeError("killed before forgetting")]
    with pytest.raises(RuntimeError):
        await world.sync()
    assert len(await world.items()) == 2  # both copies findable for a moment, never none
    assert world.state.unit_states("src")["a.md"].has_stale
    await world.sync()  # nothing changed on disk: the stale ids alone make it redo the unit
    items = await world.items()
    assert [h.text.endswith("alpha two") for h in items] == [True]
    assert not world.state.unit_states("src")["a.md"].has_stale


async def test_deleted_unit_items_are_forgotten_and_entry_dropped(world: World) -> None:
    world.reader.put("a.md", "alpha")
    world.reader.put("b.md", "beta")
    await world.sync()
    del world.reader.files["a.md"]
    await world.sync()
    assert [h.text.endswith("beta") for h in await world.items()] == [True]
    assert list(world.state.unit_states("src")) == ["b.md"]


async def test_a_crash_while_deleting_finishes_on_the_next_sync(world: World) -> None:
    world.reader.put("a.md", "alpha")
    await world.sync()
    del world.reader.files["a.md"]
    world.engine.forget_failures = [RuntimeError("killed mid-delete")]
    with pytest.raises(RuntimeError):
        await world.sync()
    assert world.state.unit_states("src")["a.md"].deleted
    await world.sync()
    assert await world.items() == [] and world.state.unit_states("src") == {}


async def test_one_bad_unit_is_a_dead_letter_and_the_rest_is_stored(world: World) -> None:
    world.reader.put("good.md", "fine text")
    world.reader.put("bad.md", b"\xff\xfe\x00 not utf-8")
    world.reader.skipped.append(Skipped(unit_id="big.log", reason="1.0 GiB is over the 10 MiB file limit"))
    await world.sync()
    assert [h.text for h in await world.items()] == ["# good.md\n\nfine text"]  # titled by its file name
    letters = {d.unit_id: d for d in world.state.dead_letters("src")}
    assert letters["bad.md"].stage == "convert"
    assert letters["big.log"].stage == "list" and "10 MiB" in letters["big.log"].message
    convert_calls = world.converter.calls
    await world.sync()  # unchanged and still broken: not tried again
    assert world.converter.calls == convert_calls
    assert {d.unit_id: d.attempts for d in world.state.dead_letters("src")}["bad.md"] == 1
    world.reader.put("bad.md", "fixed now", mtime=2)
    await world.sync()
    assert "bad.md" not in {d.unit_id for d in world.state.dead_letters("src")}


async def test_transient_engine_errors_are_retried_then_dead_lettered(world: World) -> None:
    world.reader.put("a.md", "alpha")
    world.engine.store_failures = [UnavailableError("503"), UnavailableError("503")]
    await world.sync()
    assert len(await world.items()) == 1 and world.state.dead_letters("src") == []
    world.reader.put("b.md", "beta")
    world.engine.store_failures = [UnavailableError("503")] * 3
    await world.sync()
    (letter,) = world.state.dead_letters("src")
    assert (letter.unit_id, letter.stage, letter.error) == ("b.md", "store", "UnavailableError")
    await world.sync()  # the engine is back: the unit was not committed, so it is simply done now
    assert len(await world.items()) == 2 and world.state.dead_letters("src") == []


async def test_an_engine_refusal_is_dead_lettered_at_once(world: World) -> None:
    world.reader.put("a.md", "alpha")
    world.engine.store_failures = [EngineError("item refused"), EngineError("item refused")]
    await world.sync()
    (letter,) = world.state.dead_letters("src")
    assert (letter.stage, letter.message) == ("store", "item refused")
    assert world.engine.store_calls == 2  # the batch, then the unit alone: no retries for a refusal


async def test_batches_hold_at_most_100_changes(world: World) -> None:
    for n in range(250):
        world.reader.put(f"n{n:03}.md", f"note {n}")
    sizes: list[int] = []
    ingest = world.ctx.dispatcher.ingest

    bulks: list[bool] = []

    async def spy(source_id: str, changes: list[Change], *, bulk: bool = False) -> None:
        sizes.append(len(changes))
        bulks.append(bulk)
        await ingest(source_id, changes, bulk=bulk)

    world.ctx.dispatcher.ingest = spy  # type: ignore[method-assign]
    await world.sync()
    assert sizes == [100, 100, 50]
    assert bulks == [True, True, True]  # a sync of several batches is a backfill
    assert len(await world.items()) == 250
    assert os.path.basename((await world.items())[0].meta.file_path or "") == "n000.md"


async def test_letters_follow_the_folder_gone_files_lose_theirs_skips_are_not_recounted(world: World) -> None:
    world.reader.put("bad.md", b"\xff not text")
    world.reader.skipped.append(Skipped(unit_id="big.log", reason="too big"))
    await world.sync()
    await world.sync()
    letters = {d.unit_id: d for d in world.state.dead_letters("src")}
    assert letters["big.log"].attempts == 1  # the same skip seen twice is one failure
    del world.reader.files["bad.md"]
    world.reader.skipped.clear()
    await world.sync()
    assert world.state.dead_letters("src") == []


@dataclass
class ThreadReader:
    """A source whose units are conversation threads, read as turns (no bytes to convert)."""

    threads: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    kind: str = "conversation"

    def list_units(self) -> Listing:
        return Listing(units=tuple(Unit(t, version) for t, (_, version) in sorted(self.threads.items())))

    def read(self, unit_id: str) -> UnitContent:
        texts, version = self.threads[unit_id]
        turns = tuple(Turn(role=Role.USER if n % 2 == 0 else Role.ASSISTANT, text=text) for n, text in enumerate(texts))
        origin = SourceEntry(id="src", kind="conversation", label="threads").origin(
            SourceKind.CONVERSATION, thread_id=unit_id
        )
        return UnitContent(unit_id, version, origin, turns=turns)


async def test_a_reader_hands_over_turns_and_they_are_stored_as_a_conversation(world: World) -> None:
    threads = ThreadReader({"t1": (["when is the freeze?", "thursday at five"], "v1")})
    world.ctx.readers = FixedReaders(threads)
    await world.sync()
    (hit,) = await world.items()
    assert (hit.kind.value, hit.meta.thread_id) == ("conversation", "t1")
    assert world.converter.calls == 0  # turns need no converter
    threads.threads["t1"] = (["when is the freeze?", "thursday at five", "thanks"], "v2")
    await world.sync()
    (grown,) = await world.items()
    assert grown.id != hit.id and grown.text.endswith("user: thanks")


class FailingListing(MemoryReader):
    """A reader whose listing fails while `down` holds an error (an unreachable host, a feed gone bad)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.down: Exception | None = None

    def list_units(self) -> Listing:
        if self.down is not None:
            raise self.down
        return super().list_units()


async def test_a_failed_listing_is_recorded_changes_nothing_and_clears_when_it_lists_again(world: World) -> None:
    reader = FailingListing(world.reader.root)
    reader.files = {"a.md": (b"# A\n\nalpha\n", "v1")}
    world.ctx.readers = FixedReaders(reader)
    await world.sync()
    reader.down = UnavailableError("feed.example: connection refused")
    with pytest.raises(UnavailableError):
        await sync_source(world.ctx, "src")
    (letter,) = world.state.dead_letters("src")
    assert (letter.unit_id, letter.stage, letter.error) == (SOURCE_UNIT, "list", "UnavailableError")
    last = world.state.last_sync("src")
    assert last is not None and last.error == "UnavailableError: feed.example: connection refused"
    assert len(await world.items()) == 1, "a failing listing is never taken for a deletion"
    # Beat waits the interval after a failure, rather than asking the failing server at every tick.
    world.state.put_source(SourceEntry(id="src", kind="folder", label="src", interval_s=60))
    assert due_sources(world.state, last.finished_at + timedelta(seconds=59)) == []
    assert due_sources(world.state, last.finished_at + timedelta(seconds=61)) == ["src"]
    reader.down = None
    await world.sync()
    assert world.state.dead_letters("src") == []
    last = world.state.last_sync("src")
    assert last is not None and last.error is None


class Incremental(MemoryReader):
    """An incremental reader that says nothing changed since any cursor, and counts how it was asked."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.full = self.deltas = 0

    def list_units(self) -> Listing:
        self.full += 1
        listing = super().list_units()
        return Listing(units=listing.units, skipped=listing.skipped, cursor="c1")

    def list_changes(self, cursor: str) -> Delta | None:
        self.deltas += 1
        return Delta(cursor="c1")


async def test_a_unit_that_failed_for_now_is_retried_by_listing_whole_despite_a_cursor(world: World) -> None:
    reader = Incremental(world.reader.root)
    reader.files = {"a.md": (b"# A\n\nalpha\n", "v1"), "b.md": (b"# B\n\nbeta\n", "v1")}
    world.ctx.readers = FixedReaders(reader)
    world.engine.store_failures = [UnavailableError("down")] * 3  # every attempt of the one batch
    await world.sync()
    assert {d.unit_id for d in world.state.dead_letters("src")} == {"a.md", "b.md"}
    assert all(d.version is None for d in world.state.dead_letters("src"))
    await world.sync()  # a delta would say nothing changed: the letters make it list whole
    assert (reader.full, reader.deltas) == (2, 0)
    assert len(await world.items()) == 2 and world.state.dead_letters("src") == []
    await world.sync()  # nothing left to retry: the cursor is used again
    assert (reader.full, reader.deltas) == (2, 1)
