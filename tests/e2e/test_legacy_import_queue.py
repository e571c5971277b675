"""`tinymemory import-legacy PATH --queue`: the import on a real Celery worker (real Redis), in time slices
that each resume from the record's checkpoint, ending with exactly the items of an import run here."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from engines.local import LocalEngine
from tests.e2e.test_legacy_import import held
from tests.fixtures.legacy_workspace import generated_workspace
from tests.integration.cluster import Cluster, cluster_fixture
from worker.cluster.app import create_app
from worker.cluster.legacy_tasks import queue_legacy_import
from worker.jobs.legacy import LegacyImportRequest, LegacyImports, import_legacy

pytestmark = [pytest.mark.e2e, pytest.mark.integration]

# A worker of this build, with the import task registered when the app does not register it yet.
WORKER = """
from worker.cluster.app import create_app
from worker.cluster.legacy_tasks import LEGACY_TASK, register_legacy_tasks
from worker.settings import Settings

app = create_app(Settings.load())
if LEGACY_TASK not in app.tasks:
    register_legacy_tasks(app)
app.worker_main(["worker", "-Q", "tm.backfill", "-c", "1", "-n", "legacy-test@%h", "--loglevel", "INFO"])
"""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    # Slices of half a second (half the soft limit): a few thousand rows take several.
    limits = {"TINYMEMORY_TASK_SOFT_LIMIT_S": "1", "TINYMEMORY_TASK_HARD_LIMIT_S": "30"}
    for cluster in cluster_fixture(tmp_path):
        cluster.extra_env.update(limits)
        yield cluster


def start_worker(cluster: Cluster) -> None:
    log = (cluster.root / "legacy-worker.log").open("wb")
    cluster.logs.append(log)
    command = [sys.executable, "-c", WORKER]
    process = subprocess.Popen(command, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster.workers.append(process)


def test_a_queued_import_runs_in_slices_to_the_items_of_an_import_run_here(cluster: Cluster, tmp_path: Path) -> None:
    ws = generated_workspace(tmp_path / "v1", 1_600)
    here = tmp_path / "here"
    engine = LocalEngine(here / "memory.sqlite3")
    try:
        direct = asyncio.run(
            import_legacy(LegacyImportRequest(path=str(ws.root)), engine, "local", LegacyImports(here))
        )
    finally:
        engine.close()

    start_worker(cluster)
    record = queue_legacy_import(
        create_app(cluster.settings()), cluster.settings(), LegacyImportRequest(path=str(ws.root))
    )
    assert record.status == "queued" and record.engine == "local"
    records = LegacyImports(cluster.data_dir)
    cluster.wait(lambda: records.require(record.id).status == "completed", 90, "the queued import completed")

    done = records.require(record.id)
    assert done.runs >= 2, "the import was not sliced"
    assert (done.stored, done.checkpoint) == (direct.stored, direct.checkpoint)
    assert held(cluster.data_dir) == held(here)
    # Asked for again once complete, it starts over, and every item is a replay.
    again = queue_legacy_import(
        create_app(cluster.settings()), cluster.settings(), LegacyImportRequest(path=str(ws.root))
    )
    assert again.status == "queued" and again.stored == 0
    cluster.wait(lambda: records.require(record.id).status == "completed", 90, "the second import completed")
    assert json.loads(records.require(record.id).model_dump_json())["replayed"] == direct.stored
