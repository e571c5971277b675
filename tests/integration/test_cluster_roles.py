"""Beat, the watcher, metrics and structured logs of the distributed pipeline, on real Redis."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.cluster import TINYMEMORY, Cluster, write_notes
from worker.cluster import tasks
from worker.cluster.celery_app import create_app
from worker.cluster.queues import SYNC_TASK
from worker.cluster.watchers import SourceWatchers
from worker.records import SyncReport

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    made = Cluster(tmp_path)
    try:
        yield made
    finally:
        tasks._runtime = None  # the beat test built one in this process
        made.stop()


class SentTasks:
    """Stands in for `Celery.send_task`, recording what would have been queued."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, list[Any]]] = []

    def __call__(self, name: str, args: list[Any] | None = None, **options: Any) -> None:
        self.sent.append((name, list(args or [])))

    def syncs(self) -> list[str]:
        return [args[0] for name, args in self.sent if name == SYNC_TASK]


def test_beat_queues_a_sync_of_each_source_whose_interval_passed(cluster: Cluster, tmp_path: Path) -> None:
    app = create_app(cluster.settings())
    sent = SentTasks()
    app.send_task = sent  # type: ignore[method-assign]
    state = cluster.state()
    for source_id, interval, last in (
        ("due", 60.0, 120),
        ("fresh", 600.0, 120),
        ("never", 60.0, None),
        ("manual", None, None),
    ):
        entry = cluster.add_folder(source_id, tmp_path)
        state.put_source(entry.model_copy(update={"interval_s": interval}))
        if last is not None:
            state.record_sync(SyncReport(source_id=source_id, finished_at=datetime.now(UTC) - timedelta(seconds=last)))
    tasks._runtime = None
    assert tasks.run_beat_tick(app) == 2
    assert sorted(sent.syncs()) == ["due", "never"]
    assert tasks.run_beat_tick(app) == 0  # already queued: the lease holds them


def test_the_watcher_queues_targeted_syncs_as_files_change(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "watched"
    folder.mkdir()
    cluster.add_folder("watched", folder)
    app = create_app(cluster.settings())
    sent = SentTasks()
    app.send_task = sent  # type: ignore[method-assign]
    watchers = SourceWatchers(cluster.settings(), app)
    try:
        assert sent.syncs() == ["watched"]  # a reconciling sync when the watch starts
        cluster.client().delete(f"{cluster.prefix}lease:sync:watched")  # as if that sync had run
        (folder / "new.md").write_text("fresh\n")
        cluster.wait(lambda: len(sent.syncs()) == 2, 10, "a sync for the new file")
        hints = [args[1] for name, args in sent.sent if name == SYNC_TASK][-1]
        assert hints == ["new.md"]
    finally:
        watchers.stop()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_a_worker_serves_metrics_and_logs_json_with_source_and_batch(cluster: Cluster, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    write_notes(folder, 120)
    cluster.add_folder("notes", folder)
    port = _free_port()
    log = cluster.root / "worker-0.log"
    worker = _worker_with_metrics(cluster, port)
    assert cluster.sync("notes")
    cluster.wait_done("notes", 120, within_s=90)
    body = _scrape(port)
    stored = [line for line in body.splitlines() if line.startswith("tinymemory_items_stored_total")]
    assert stored and float(stored[0].split()[-1]) == 120
    assert 'tinymemory_queue_depth{queue="tm.backfill"} 0.0' in body
    assert "tinymemory_batch_seconds_count" in body
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    batches = [line for line in lines if line["message"].startswith("batch done")]
    assert batches and all(line["source_id"] == "notes" and line.get("batch_id") for line in batches)
    assert worker.poll() is None


def _worker_with_metrics(cluster: Cluster, port: int) -> subprocess.Popen[bytes]:
    log = (cluster.root / "worker-0.log").open("wb")
    cluster.logs.append(log)
    command = [TINYMEMORY, "worker", "--concurrency", "1", "--metrics-port", str(port)]
    process = subprocess.Popen(command, env=cluster.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    cluster.workers.append(process)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            _scrape(port)
            return process
        except OSError:
            time.sleep(0.2)
    raise AssertionError("the metrics port never answered")


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
        return str(response.read().decode())
