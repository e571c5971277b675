"""`tinymemory import-legacy PATH --queue`: the import on a real Celery worker (real Redis) into CortexDB (its
double), in time slices that each resume from the record's checkpoint, ending with exactly the workspace's
items."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.contract import ListRequest, MetaFilter
from engines.cortex import CortexEngine, CortexWire, Timing
from engines.settings import EngineCredential
from pipeline.legacy import LegacyWorkspace, prepared_items
from tests.fixtures.legacy_workspace import generated_workspace
from tests.integration.cluster import Cluster, cluster_fixture
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, serve
from worker.cluster.celery_app import create_app
from worker.legacy.job import LegacyImportRequest, LegacyImports
from worker.legacy.tasks import queue_legacy_import

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

# A worker of this build, with the import task registered when the app does not register it yet.
WORKER = """
from worker.cluster.celery_app import create_app
from worker.legacy.tasks import LEGACY_TASK, register_legacy_tasks
from worker.settings import Settings

app = create_app(Settings.load())
if LEGACY_TASK not in app.tasks:
    register_legacy_tasks(app)
app.worker_main(["worker", "-Q", "tm.backfill", "-c", "1", "-n", "legacy-test@%h", "--loglevel", "INFO"])
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from cluster_fixture(tmp_path)


def start_worker(cluster: Cluster) -> None:
    log = (cluster.root / "legacy-worker.log").open("wb")
    cluster.logs.append(log)
    command = [sys.executable, "-c", WORKER]
    process = subprocess.Popen(command, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster.workers.append(process)


async def listed(url: str) -> set[str]:
    engine = CortexEngine(CortexWire.DIRECT, url, EngineCredential.of("k"), timing=Timing.fast())
    ids: set[str] = set()
    cursor = None
    try:
        while True:
            page = await engine.list(ListRequest(limit=100, cursor=cursor, filter=MetaFilter()))
            ids.update(hit.id for hit in page.items)
            if page.next_cursor is None:
                return ids
            cursor = page.next_cursor
    finally:
        await engine.aclose()


def test_a_queued_import_runs_in_slices_into_cortexdb(cluster: Cluster, tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "v1", 1_100)
    with LegacyWorkspace.open(ws.root) as opened:
        expected = {item.fingerprint() for item in prepared_items(opened)}
    double = CortexDouble(DoubleConfig(rate_limit_per_minute=None))
    # Every write waits: each batch takes a while however fast the machine, so the import needs several slices
    # of half a second (half the soft limit).
    double.faults.delay(0.15, match="v1/experience*")
    with serve(double) as url:
        cluster.extra_env.update(
            {
                "TINYMEMORY_ENGINE": "cortexdb",
                "TINYMEMORY_ENGINES__CORTEXDB__ENDPOINT": url,
                "TINYMEMORY_ENGINE_KEY": "k",
                "TINYMEMORY_TASK_SOFT_LIMIT_S": "1",
                "TINYMEMORY_TASK_HARD_LIMIT_S": "30",
            }
        )
        start_worker(cluster)
        settings = cluster.settings().model_copy(update={"engine": "cortexdb"})
        record = queue_legacy_import(create_app(settings), settings, LegacyImportRequest(path=str(ws.root)))
        assert record.status == "queued" and record.engine == "cortexdb"
        records = LegacyImports(cluster.data_dir)
        cluster.wait(lambda: records.require(record.id).status == "completed", 120, "the queued import completed")
        done = records.require(record.id)
        assert done.runs >= 2, "the import was not sliced"
        # A slice the time limit stopped between the engine's acknowledgement and the record re-sends that batch
        # in the next one, as replays: at most one batch a slice.
        assert 0 <= len(expected) - done.stored <= done.replayed <= 100 * (done.runs - 1)
        assert asyncio.run(listed(url)) == expected

        double.faults.clear()
        again = queue_legacy_import(create_app(settings), settings, LegacyImportRequest(path=str(ws.root)))
        assert again.status == "queued" and again.stored == 0  # a finished import queued again starts over
        cluster.wait(lambda: records.require(record.id).status == "completed", 120, "the second import completed")
        second = records.require(record.id)
        assert second.stored == 0 and second.replayed >= len(expected)
