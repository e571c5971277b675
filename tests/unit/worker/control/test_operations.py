"""`worker.control` on real parts: a SQLite state store, real folders, the reference and local engines, and the
embedded runtime (or a runner that records what it was asked); `worker.control.Services` with SQLite state."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engines.contract import (
    Error,
    InvalidRequestError,
    ListRequest,
    MemoryEngine,
    MetaFilter,
    Namespace,
    NotFoundError,
    Reach,
)
from engines.reference import ReferenceEngine
from sources import SourceEntry, SourceRequest, source_id_for
from worker import control
from worker.control import Services
from worker.embedded import EmbeddedRuntime
from worker.records import DeadLetter, ManifestEntry, SyncOutcome, SyncReport
from worker.settings import Settings
from worker.state.base import StateStore
from worker.state.sqlite import SqliteStateStore

GOOD = b"# Plan\n\nThe quarzite launch is on Friday.\n"
NOT_UTF8 = b"\xff\xfe not text"


@dataclass
class RecordingRunner:
    """A `SyncRunner` that only records what it was asked and answers `queued`."""

    calls: list[tuple[str, list[str] | None]] = field(default_factory=list)

    async def request_sync(self, source_id: str, hints: Sequence[str] | None = None) -> SyncOutcome:
        self.calls.append((source_id, None if hints is None else list(hints)))
        return SyncOutcome(source_id=source_id, status="queued")


class FixedProbe:
    """A `ClusterProbe` with fixed answers."""

    def queue_depths(self) -> dict[str, int]:
        return {"sync": 2, "ingest": 0}

    def workers(self) -> list[str]:
        return ["celery@one", "celery@two"]


@pytest.fixture
def state(tmp_path: Path) -> Iterator[SqliteStateStore]:
    store = SqliteStateStore(tmp_path / "state.sqlite3")
    yield store
    store.close()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # Settings read the environment: only the arguments given here may count.
    for name in [n for n in os.environ if n.startswith("TINYMEMORY_")]:
        monkeypatch.delenv(name)
    return tmp_path / "data"


@pytest.fixture
def runtime(data_dir: Path) -> Iterator[EmbeddedRuntime]:
    with EmbeddedRuntime(Settings(data_dir=data_dir, convert_workers=1, engine="reference")) as opened:
        yield opened


def _folder(root: Path, name: str, files: dict[str, bytes]) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    for unit, data in files.items():
        (folder / unit).write_bytes(data)
    return folder


def _entry(source_id: str, root: Path) -> SourceEntry:
    return SourceEntry(id=source_id, kind="folder", label=source_id, path=str(root))


def _letter(source_id: str, unit_id: str, stage: str = "convert") -> DeadLetter:
    return DeadLetter(source_id=source_id, unit_id=unit_id, stage=stage, error="InvalidRequestError", message="bad")


async def _paths(engine: MemoryEngine, source_id: str, at: Namespace = Namespace.ROOT) -> list[str]:
    """The file paths of a source's items at `at` and below (a sandbox only when `at` is in it)."""
    below = Reach.subtree(at)
    page = await engine.list(ListRequest(limit=100, filter=MetaFilter(source_id=source_id, reach=below)))
    return sorted(str(hit.meta.file_path) for hit in page.items)


# -- add_source -----------------------------------------------------------------------------------------


def test_add_source_gives_the_registry_defaults_and_stores_the_entry(state: StateStore, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    entry = control.add_source(state, SourceRequest(kind="folder", target=str(folder)))
    assert entry == SourceEntry(
        id=source_id_for(folder), kind="folder", label=str(folder), path=os.path.realpath(folder)
    )
    assert (entry.enabled, entry.namespace, entry.include, entry.interval_s) == (True, None, [], None)
    assert state.get_source(entry.id) == entry
    assert control.list_sources(state) == [entry]


def test_add_source_again_with_the_same_request_returns_the_same_entry(state: StateStore, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    request = SourceRequest(kind="folder", target=str(folder), id="notes", namespace="team:acme")
    first = control.add_source(state, request)
    assert control.add_source(state, request) == first
    assert control.list_sources(state) == [first]


@pytest.mark.parametrize("other", ["namespace", "target"])
def test_add_source_refuses_another_source_under_a_taken_id(state: StateStore, tmp_path: Path, other: str) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    first = control.add_source(state, SourceRequest(kind="folder", target=str(folder), id="notes"))
    elsewhere = _folder(tmp_path, "elsewhere", {"b.md": GOOD})
    changed = {"namespace": {"namespace": "team:acme"}, "target": {"target": str(elsewhere)}}[other]
    request = SourceRequest.model_validate({"kind": "folder", "target": str(folder), "id": "notes"} | changed)
    with pytest.raises(InvalidRequestError, match=r"a source 'notes' exists with other settings.*--id"):
        control.add_source(state, request)
    assert control.list_sources(state) == [first]


@pytest.mark.parametrize(
    ("kind", "target", "error", "message"),
    [
        ("folder", "MISSING", NotFoundError, "does not exist"),
        ("link", "file:///etc/passwd", InvalidRequestError, "is not http or https"),
        ("github", "https://gitlab.com/acme/widgets", InvalidRequestError, "github"),
        ("telepathy", "NOTES", InvalidRequestError, "unknown source kind 'telepathy'"),
    ],
)
def test_add_source_refusals_are_contract_errors_and_store_nothing(
    state: StateStore, tmp_path: Path, kind: str, target: str, error: type[Error], message: str
) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    target = {"MISSING": str(tmp_path / "missing"), "NOTES": str(folder)}.get(target, target)
    with pytest.raises(Error, match=message) as raised:
        control.add_source(state, SourceRequest(kind=kind, target=target))
    assert type(raised.value) is error
    assert control.list_sources(state) == []


# -- ensure_local_source ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_ensure_local_source_configures_a_folder_or_a_file_once(state: StateStore, tmp_path: Path, kind: str) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    path = folder if kind == "folder" else folder / "a.md"
    entry = control.ensure_local_source(state, path)
    assert (entry.id, entry.kind, entry.path) == (source_id_for(path), kind, os.path.realpath(path))
    assert control.ensure_local_source(state, path) == entry
    assert control.list_sources(state) == [entry]


def test_ensure_local_source_returns_the_stored_entry_even_with_other_settings(
    state: StateStore, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    added = control.add_source(state, SourceRequest(kind="folder", target=str(folder), namespace="team:acme"))
    ensured = control.ensure_local_source(state, folder)
    assert ensured == added and ensured.namespace == "team:acme"
    assert control.list_sources(state) == [added]


# -- get_source, show_source, dead_letters: unknown ids ---------------------------------------------------


@pytest.mark.parametrize("lookup", [control.get_source, control.show_source, control.dead_letters])
def test_an_unknown_source_id_is_not_found_naming_it(
    state: StateStore, tmp_path: Path, lookup: Callable[[StateStore, str], object]
) -> None:
    state.put_source(_entry("notes", tmp_path))
    with pytest.raises(NotFoundError, match="no source 'nope'"):
        lookup(state, "nope")


def test_get_source_returns_the_stored_entry(state: StateStore, tmp_path: Path) -> None:
    state.put_source(_entry("notes", tmp_path))
    state.put_source(_entry("other", tmp_path))
    assert control.get_source(state, "notes") == _entry("notes", tmp_path)


# -- a real sync through the embedded runtime -------------------------------------------------------------


async def test_show_source_counts_units_and_letters_after_a_real_sync_and_replay_retries(
    runtime: EmbeddedRuntime, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, "notes", {"good.md": GOOD, "bad.md": NOT_UTF8})
    entry = control.add_source(runtime.state, SourceRequest(kind="folder", target=str(folder), id="notes"))
    before = control.show_source(runtime.state, "notes")
    assert (before.units, before.last_sync, before.dead_letters) == (0, None, 0)

    outcome = await control.sync_now(runtime.state, runtime, "notes")
    assert outcome.status == "synced" and outcome.report is not None
    detail = control.show_source(runtime.state, "notes")
    assert detail.source == entry
    assert (detail.units, detail.dead_letters) == (1, 1)
    assert detail.last_sync == outcome.report and detail.last_sync.listed == 2
    (letter,) = control.dead_letters(runtime.state, "notes")
    assert (letter.unit_id, letter.stage) == ("bad.md", "convert")

    (folder / "bad.md").write_text("fixed: now readable\n")
    (replay,) = await control.replay_dead_letters(runtime.state, runtime)
    assert (replay.source_id, replay.units, replay.sync.status) == ("notes", ["bad.md"], "synced")
    after = control.show_source(runtime.state, "notes")
    assert (after.units, after.dead_letters) == (2, 0)


async def test_remove_source_forgets_exactly_its_items_and_state(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    # The removed source's items sit below the root (team:acme), not at it.
    mine = _folder(tmp_path, "mine", {"a.md": GOOD, "b.md": b"beta notes\n", "bad.md": NOT_UTF8})
    theirs = _folder(tmp_path, "theirs", {"c.md": b"gamma notes\n"})
    control.add_source(runtime.state, SourceRequest(kind="folder", target=str(mine), id="mine", namespace="team:acme"))
    control.add_source(runtime.state, SourceRequest(kind="folder", target=str(theirs), id="theirs"))
    for source_id in ("mine", "theirs"):
        await control.sync_now(runtime.state, runtime, source_id)
    assert len(await _paths(runtime.engine, "mine")) == 2
    kept = await _paths(runtime.engine, "theirs")

    removal = await control.remove_source(runtime.state, runtime.engine, "mine")
    assert removal == control.SourceRemoval(source_id="mine", forgotten=2, kept_items=False)
    assert await _paths(runtime.engine, "mine") == []
    assert await _paths(runtime.engine, "theirs") == kept == [f"{os.path.realpath(theirs)}/c.md"]
    assert runtime.state.get_source("mine") is None
    assert (runtime.state.unit_states("mine"), runtime.state.last_sync("mine")) == ({}, None)
    assert runtime.state.dead_letters("mine") == []
    assert [e.id for e in control.list_sources(runtime.state)] == ["theirs"]
    assert len(runtime.state.unit_states("theirs")) == 1 and runtime.state.last_sync("theirs") is not None


async def test_remove_source_forgets_the_items_of_a_source_placed_in_a_sandbox(
    runtime: EmbeddedRuntime, tmp_path: Path
) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    request = SourceRequest(kind="folder", target=str(folder), id="notes", namespace="service:bot")
    control.add_source(runtime.state, request)
    await control.sync_now(runtime.state, runtime, "notes")
    sandbox = Namespace.parse("service:bot")
    assert await _paths(runtime.engine, "notes", sandbox) == [f"{os.path.realpath(folder)}/a.md"]

    removal = await control.remove_source(runtime.state, runtime.engine, "notes")
    assert await _paths(runtime.engine, "notes", sandbox) == []
    assert removal.forgotten == 1


async def test_remove_source_keeping_items_needs_no_engine(runtime: EmbeddedRuntime, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    control.add_source(runtime.state, SourceRequest(kind="folder", target=str(folder), id="notes"))
    await control.sync_now(runtime.state, runtime, "notes")

    removal = await control.remove_source(runtime.state, None, "notes", keep_items=True)
    assert removal == control.SourceRemoval(source_id="notes", forgotten=0, kept_items=True)
    assert await _paths(runtime.engine, "notes") == [f"{os.path.realpath(folder)}/a.md"]
    assert runtime.state.get_source("notes") is None and runtime.state.unit_states("notes") == {}


async def test_remove_source_without_an_engine_is_refused_and_keeps_the_source(
    state: StateStore, tmp_path: Path
) -> None:
    state.put_source(_entry("notes", tmp_path))
    state.commit("notes", {"a.md": ManifestEntry(version="1")})
    with pytest.raises(InvalidRequestError, match="needs the engine"):
        await control.remove_source(state, None, "notes")
    assert state.get_source("notes") == _entry("notes", tmp_path)
    assert list(state.unit_states("notes")) == ["a.md"]


async def test_remove_source_of_an_unknown_id_is_not_found(state: StateStore) -> None:
    with pytest.raises(NotFoundError, match="no source 'nope'"):
        await control.remove_source(state, ReferenceEngine(), "nope")


# -- sync_now ----------------------------------------------------------------------------------------------


async def test_sync_now_refuses_an_unknown_source_before_asking_the_runner(state: StateStore) -> None:
    runner = RecordingRunner()
    with pytest.raises(NotFoundError, match="no source 'nope'"):
        await control.sync_now(state, runner, "nope")
    assert runner.calls == []


async def test_sync_now_passes_hints_to_the_runner_and_returns_its_outcome(state: StateStore, tmp_path: Path) -> None:
    state.put_source(_entry("notes", tmp_path))
    runner = RecordingRunner()
    outcome = await control.sync_now(state, runner, "notes", ["a.md", "sub/b.md"])
    assert outcome == SyncOutcome(source_id="notes", status="queued")
    await control.sync_now(state, runner, "notes")
    assert runner.calls == [("notes", ["a.md", "sub/b.md"]), ("notes", None)]


# -- status ------------------------------------------------------------------------------------------------


def _synced_world(state: StateStore, tmp_path: Path) -> datetime:
    finished = datetime(2026, 5, 4, 3, 2, 1, tzinfo=UTC)
    state.put_source(_entry("a", tmp_path))
    state.put_source(_entry("b", tmp_path).model_copy(update={"enabled": False}))
    x = ManifestEntry(version="1", item_ids=["x-part-1", "x-part-2"])
    state.commit("a", {"x.md": x, "y.md": ManifestEntry(version="1", item_ids=["y-part-1"])})
    started = finished - timedelta(minutes=1)
    state.record_sync(SyncReport(source_id="a", started_at=started, finished_at=finished, upserts=2, deletes=1))
    state.add_dead_letter(_letter("a", "z.md"))
    state.add_dead_letter(_letter("b", "w.md"))
    return finished


def test_status_lists_sources_with_units_and_last_sync_and_counts_letters(state: StateStore, tmp_path: Path) -> None:
    finished = _synced_world(state, tmp_path)
    shown = control.status(state)
    assert shown.sources == [
        control.SourceStatus(
            id="a",
            kind="folder",
            label="a",
            enabled=True,
            units=2,
            last_sync=finished,
            last_changes=3,
            location=str(tmp_path),
            items=3,
            dead_letters=1,
            last_took_s=60.0,
        ),
        control.SourceStatus(
            id="b",
            kind="folder",
            label="b",
            enabled=False,
            units=0,
            last_sync=None,
            last_changes=None,
            location=str(tmp_path),
            dead_letters=1,
        ),
    ]
    assert shown.dead_letters == 2
    assert (shown.queues, shown.workers) == (None, None)


def test_status_with_a_probe_shows_queues_and_workers(state: StateStore, tmp_path: Path) -> None:
    _synced_world(state, tmp_path)
    shown = control.status(state, FixedProbe())
    assert shown.queues == {"sync": 2, "ingest": 0}
    assert shown.workers == ["celery@one", "celery@two"]
    assert [s.id for s in shown.sources] == ["a", "b"] and shown.dead_letters == 2


# -- dead letters ------------------------------------------------------------------------------------------


def _lettered(state: StateStore, tmp_path: Path) -> None:
    """Letters of `a` (one unit at two stages), of `b`, and of `gone`, a source no longer configured."""
    state.put_source(_entry("a", tmp_path))
    state.put_source(_entry("b", tmp_path))
    for letter in (
        _letter("a", "y.md"),
        _letter("a", "x.md"),
        _letter("a", "x.md", stage="store"),
        _letter("b", "z.md"),
        _letter("gone", "w.md"),
    ):
        state.add_dead_letter(letter)


def test_dead_letters_of_one_source_or_all(state: StateStore, tmp_path: Path) -> None:
    _lettered(state, tmp_path)
    assert sorted((d.unit_id, d.stage) for d in control.dead_letters(state, "a")) == [
        ("x.md", "convert"),
        ("x.md", "store"),
        ("y.md", "convert"),
    ]
    assert len(control.dead_letters(state)) == 5
    assert len(control.dead_letters(state, limit=2)) == 2


async def test_replay_clears_letters_and_syncs_each_configured_source_once(state: StateStore, tmp_path: Path) -> None:
    _lettered(state, tmp_path)
    runner = RecordingRunner()
    replays = await control.replay_dead_letters(state, runner)
    assert replays == [
        control.Replay(source_id="a", units=["x.md", "y.md"], sync=SyncOutcome(source_id="a", status="queued")),
        control.Replay(source_id="b", units=["z.md"], sync=SyncOutcome(source_id="b", status="queued")),
    ]
    # `gone` is no longer configured: its letter is cleared, but no sync is asked for it.
    assert runner.calls == [("a", None), ("b", None)]
    assert state.dead_letters() == []


async def test_replay_of_one_source_leaves_the_other_letters(state: StateStore, tmp_path: Path) -> None:
    _lettered(state, tmp_path)
    runner = RecordingRunner()
    (replay,) = await control.replay_dead_letters(state, runner, "b")
    assert (replay.source_id, replay.units) == ("b", ["z.md"])
    assert runner.calls == [("b", None)]
    assert sorted({d.source_id for d in state.dead_letters()}) == ["a", "gone"]
    with pytest.raises(NotFoundError, match="no source 'gone'"):
        await control.replay_dead_letters(state, runner, "gone")


def test_purge_counts_what_it_deletes(state: StateStore, tmp_path: Path) -> None:
    _lettered(state, tmp_path)
    assert control.purge_dead_letters(state, "a") == 3
    assert sorted(d.source_id for d in state.dead_letters()) == ["b", "gone"]
    assert control.purge_dead_letters(state) == 2
    assert control.purge_dead_letters(state) == 0
    assert state.dead_letters() == []


# -- Services ----------------------------------------------------------------------------------------------


def test_services_on_sqlite_sync_here_and_have_no_probe(data_dir: Path) -> None:
    with Services(Settings(data_dir=data_dir, convert_workers=1)) as services:
        runner = services.runner()
        assert isinstance(runner, EmbeddedRuntime)
        assert services.runner() is runner
        assert services.state() is services.state()
        assert services.probe() is None


def test_closing_services_closes_what_they_opened(data_dir: Path, tmp_path: Path) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    services = Services(Settings(data_dir=data_dir, convert_workers=1))
    state, runner = services.state(), services.runner()
    assert isinstance(runner, EmbeddedRuntime)
    entry = control.add_source(state, SourceRequest(kind="folder", target=str(folder), id="notes"))
    services.close()
    with pytest.raises(sqlite3.ProgrammingError):
        state.list_sources()
    with pytest.raises(sqlite3.ProgrammingError):
        runner.state.list_sources()
    with Services(Settings(data_dir=data_dir, convert_workers=1)) as again:
        assert control.list_sources(again.state()) == [entry]


@pytest.mark.parametrize("engine", ["local", "reference"])
async def test_services_remove_forgets_what_their_runner_stored(data_dir: Path, tmp_path: Path, engine: str) -> None:
    folder = _folder(tmp_path, "notes", {"a.md": GOOD})
    with Services(Settings(data_dir=data_dir, convert_workers=1, engine=engine)) as services:
        control.add_source(services.state(), SourceRequest(kind="folder", target=str(folder), id="notes"))
        outcome = await control.sync_now(services.state(), services.runner(), "notes")
        assert outcome.status == "synced"
        # The runtime wrote through its own store: the one the operations read sees it.
        assert control.show_source(services.state(), "notes").units == 1
        removal = await control.remove_source(services.state(), services.engine(), "notes")
        assert removal.forgotten == 1
        assert await _paths(services.engine(), "notes") == []


def test_purging_an_unknown_source_is_not_found(state: StateStore) -> None:
    with pytest.raises(NotFoundError, match="no source 'nope'"):
        control.purge_dead_letters(state, "nope")


def test_a_folder_typed_relative_or_absolute_is_the_same_source(
    state: StateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    monkeypatch.chdir(tmp_path)
    relative = control.add_source(state, SourceRequest(kind="folder", target="notes"))
    absolute = control.add_source(state, SourceRequest(kind="folder", target=str(folder)))
    assert relative == absolute and control.list_sources(state) == [absolute]


def test_closed_services_open_afresh_on_next_use(data_dir: Path) -> None:
    services = Services(Settings(data_dir=data_dir, convert_workers=1))
    first = services.state()
    services.close()
    second = services.state()
    assert second is not first and second.list_sources() == []
    services.close()
