"""A source kind defined only in the tests goes through both runtimes with no change under `worker/`.

The kinds (`tests.fixtures.memory_source`, and `tests.fixtures.memory_incremental` with the incremental
ability) are registered the way a kind from an uninstalled tree is: by the `source_kinds` setting, in the
embedded process, in its text preparation processes and in every Celery worker (an installed distribution
declares its kinds by entry point instead: tests/e2e/test_plugin_distribution.py). Each runtime syncs,
changes, deletes and dead-letters their units exactly as it does a folder's.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import Hit, ListRequest, MetaFilter
from engines.local import LocalEngine
from sources import REGISTRY, SourceRequest
from tests.fixtures import memory_incremental, memory_source
from tests.fixtures.memory_source import MemoryUnits
from tests.integration.cluster import Cluster, cluster_fixture
from worker import control
from worker.embedded import EmbeddedRuntime, TextPool
from worker.jobs import Prepared, TextJob
from worker.settings import Settings
from worker.state.base import StateStore

PLUGINS = {memory_source.KIND: memory_source.MODULE, memory_incremental.KIND: memory_incremental.MODULE}
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def plugins() -> Iterator[None]:
    yield
    for kind in PLUGINS:
        REGISTRY.unregister(kind)


def _texts(hits: list[Hit]) -> dict[str, str]:
    """unit id → the item's text, from the url the memory reader gives each item."""
    return {(h.meta.url or "").rpartition("/")[2]: h.text for h in hits}


async def _items(engine: LocalEngine, source_id: str) -> dict[str, str]:
    page = await engine.list(ListRequest(limit=500, filter=MetaFilter(source_id=source_id)))
    assert page.next_cursor is None
    return _texts(page.items)


def _letters(state: StateStore, source_id: str) -> dict[str, tuple[str, str]]:
    return {d.unit_id: (d.stage, d.message) for d in state.dead_letters(source_id)}


@pytest.mark.e2e
async def test_a_plugin_kind_in_the_embedded_runtime(
    tmp_path: Path, plugins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    prepared_there: list[str] = []
    original = TextPool.prepare

    async def spied(self: TextPool, job: TextJob) -> list[Prepared] | None:
        done = await original(self, job)
        prepared_there.extend(unit.change.unit_id for unit in done or [] if unit.reading or unit.failure)
        return done

    monkeypatch.setattr(TextPool, "prepare", spied)
    units = MemoryUnits(tmp_path / "units.json")
    for n in range(40):  # enough text units for the text preparation processes to take them
        units.put(f"n{n:02}.md", f"note {n} about zeolites", version="1")
    units.put("broken.md", "never read", version="1", broken=True)
    units.put("huge.md", "refused at listing", version="1", refused="too large for this test")
    settings = Settings(data_dir=tmp_path / "data", convert_workers=2, source_kinds=PLUGINS)
    with EmbeddedRuntime(settings) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind=memory_source.KIND, target=str(units.path)))
        runtime.text_pool.warm(wait=True)
        report, batches = await runtime.sync(entry.id)
        assert (report.listed, report.upserts, report.skipped) == (41, 41, 1)
        stored = await _items(runtime.engine, entry.id)
        assert len(stored) == 40 and stored["n07.md"].endswith("note 7 about zeolites")
        assert sum(b.stored for b in batches) == 40
        assert len(prepared_there) == 41  # read in the text processes, which loaded the kind themselves
        letters = _letters(runtime.state, entry.id)
        assert letters["broken.md"] == ("read", "cannot read 'broken.md': it is broken on purpose")
        assert letters["huge.md"] == ("list", "too large for this test")

        again, _ = await runtime.sync(entry.id)  # unchanged: nothing read, the broken unit held back
        assert (again.upserts, again.deletes, again.held_back) == (0, 0, 1)

        units.put("n01.md", "note 1, rewritten", version="2")
        units.remove("n02.md")
        units.put("broken.md", "readable now", version="2")
        changed, batches = await runtime.sync(entry.id)
        assert (changed.upserts, changed.deletes) == (2, 1)
        stored = await _items(runtime.engine, entry.id)
        assert stored["n01.md"].endswith("note 1, rewritten") and "n02.md" not in stored
        assert stored["broken.md"].endswith("readable now") and len(stored) == 40
        assert sum(b.forgotten for b in batches) == 2  # the old n01.md, and n02.md
        assert set(_letters(runtime.state, entry.id)) == {"huge.md"}


@pytest.mark.e2e
async def test_an_incremental_plugin_kind_lists_only_what_changed(tmp_path: Path, plugins: None) -> None:
    units = MemoryUnits(tmp_path / "log.json")
    for n in range(5):
        units.put(f"n{n}.md", f"entry {n}", version="1")
    settings = Settings(data_dir=tmp_path / "data", convert_workers=1, source_kinds=PLUGINS)
    with EmbeddedRuntime(settings) as runtime:
        entry = control.add_source(runtime.state, SourceRequest(kind=memory_incremental.KIND, target=str(units.path)))
        first, _ = await runtime.sync(entry.id)
        assert first.upserts == 5 and first.cursor == "5"
        units.put("n1.md", "entry 1, edited", version="2")
        units.remove("n3.md")
        units.put("n9.md", "entry 9", version="1")
        delta, _ = await runtime.sync(entry.id)
        assert (delta.listed, delta.upserts, delta.deletes, delta.cursor) == (2, 2, 1, "8")
        assert units.listings() == ["list_units", "list_changes"]
        stored = await _items(runtime.engine, entry.id)
        assert sorted(stored) == ["n0.md", "n1.md", "n2.md", "n4.md", "n9.md"]
        assert stored["n1.md"].endswith("entry 1, edited")

        units.forget_history()  # the cursor points into a history that is gone: everything is listed again
        units.remove("n0.md")
        full, _ = await runtime.sync(entry.id)
        assert units.listings()[-2:] == ["list_changes", "list_units"]
        assert (full.upserts, full.deletes) == (0, 1)
        assert sorted(await _items(runtime.engine, entry.id)) == ["n1.md", "n2.md", "n4.md", "n9.md"]


# -- the same kinds in real Celery workers ---------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def _plugin_env(cluster: Cluster) -> None:
    # A plugin's module must be importable where the kind runs: here the tests' own package.
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    cluster.extra_env.update({"TINYMEMORY_SOURCE_KINDS": json.dumps(PLUGINS), "PYTHONPATH": path})


def _stored(cluster: Cluster, source_id: str) -> dict[str, str]:
    async def read() -> dict[str, str]:
        engine = LocalEngine(cluster.data_dir / "memory.sqlite3")
        try:
            return await _items(engine, source_id)
        finally:
            engine.close()

    return asyncio.run(read())


def _settled(cluster: Cluster, source_id: str, units: int, letters: set[str]) -> bool:
    state = cluster.state()
    return len(state.unit_states(source_id)) == units and set(_letters(state, source_id)) == letters and cluster.idle()


@pytest.mark.integration
@pytest.mark.slow
def test_a_plugin_kind_in_celery_workers(cluster: Cluster, tmp_path: Path) -> None:
    _plugin_env(cluster)
    units = MemoryUnits(tmp_path / "units.json")
    for n in range(150):  # two batches: a backfill
        units.put(f"n{n:03}.md", f"note {n} about zeolites", version="1")
    units.put("broken.md", "never read", version="1", broken=True)
    cluster.state().put_source(
        memory_source.configure(SourceRequest(kind=memory_source.KIND, target=str(units.path), id="mem"))
    )
    cluster.start_worker()
    cluster.start_worker()
    assert cluster.sync("mem")
    cluster.wait(lambda: _settled(cluster, "mem", 150, {"broken.md"}), 120, "the first sync")
    stored = _stored(cluster, "mem")
    assert len(stored) == 150 and stored["n042.md"].endswith("note 42 about zeolites")

    units.put("n001.md", "note 1, rewritten", version="2")
    units.remove("n002.md")
    units.put("broken.md", "readable now", version="2")
    assert cluster.sync("mem")
    cluster.wait(lambda: _settled(cluster, "mem", 150, set()), 60, "the change")
    stored = _stored(cluster, "mem")
    assert stored["n001.md"].endswith("note 1, rewritten") and "n002.md" not in stored
    assert stored["broken.md"].endswith("readable now") and len(stored) == 150


@pytest.mark.integration
@pytest.mark.slow
def test_an_incremental_plugin_kind_in_celery_workers(cluster: Cluster, tmp_path: Path) -> None:
    _plugin_env(cluster)
    units = MemoryUnits(tmp_path / "log.json")
    for n in range(5):
        units.put(f"n{n}.md", f"entry {n}", version="1")
    cluster.state().put_source(
        memory_incremental.configure(SourceRequest(kind=memory_incremental.KIND, target=str(units.path), id="log"))
    )
    cluster.start_worker()
    assert cluster.sync("log")
    cluster.wait(lambda: _settled(cluster, "log", 5, set()), 60, "the first sync")
    units.put("n1.md", "entry 1, edited", version="2")
    units.remove("n3.md")
    assert cluster.sync("log")
    cluster.wait(lambda: _settled(cluster, "log", 4, set()) and "n3.md" not in _stored(cluster, "log"), 60, "delta")
    assert units.listings() == ["list_units", "list_changes"]
    assert _stored(cluster, "log")["n1.md"].endswith("entry 1, edited")
