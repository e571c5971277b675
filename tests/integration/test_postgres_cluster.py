"""The distributed pipeline on one PostgreSQL database: two Celery workers and the watcher with
`TINYMEMORY_ENGINE=postgres`, pool processes SIGKILLed mid-batch, and the database restarted during a backfill;
every run ends with each file stored exactly once and every passage embedded once."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from engines.contract import ListRequest, MetaFilter
from engines.postgres import PostgresEngine
from tests.fixtures import postgres
from tests.integration.cluster import TINYMEMORY, Cluster, worker_children, write_notes
from tests.reliability.figures import exactly_once, print_figures

pytestmark = [pytest.mark.integration, pytest.mark.slow]

EMBEDDER = "static"


class PostgresCluster(Cluster):
    """A cluster whose every role stores in one PostgreSQL database."""

    url: str = ""

    def read_engine(self) -> PostgresEngine:
        from engines.local.factory import build_embedder
        from engines.settings import EmbedderSettings

        return PostgresEngine(self.url, embedder=build_embedder(EmbedderSettings(kind=EMBEDDER), None))

    def texts(self, source_id: str) -> list[tuple[str, str]]:
        async def read() -> list[tuple[str, str]]:
            engine = self.read_engine()
            try:
                found, cursor = [], None
                while True:
                    request = ListRequest(limit=500, cursor=cursor, filter=MetaFilter(source_id=source_id))
                    page = await engine.list(request)
                    found.extend((hit.meta.file_path or "", hit.text) for hit in page.items)
                    if page.next_cursor is None:
                        return found
                    cursor = page.next_cursor
            finally:
                engine.close()

        return asyncio.run(read())

    def start_watcher(self) -> subprocess.Popen[bytes]:
        log = (self.root / "watch.log").open("wb")
        self.logs.append(log)
        process = subprocess.Popen(
            [TINYMEMORY, "watch"], env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.others.append(process)
        return process

    def count(self, sql: str) -> int:
        with psycopg.connect(self.url) as conn:
            row = conn.execute(sql.encode()).fetchone()
            return int(row[0]) if row else -1

    def vectors_settled(self) -> bool:
        return self.count("SELECT count(*) FROM pending_vectors") == 0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[PostgresCluster]:
    server = postgres.shared_server()
    cluster = PostgresCluster(tmp_path)
    cluster.url = server.fresh_database()
    cluster.extra_env = {
        "TINYMEMORY_ENGINE": "postgres",
        "TINYMEMORY_ENGINES__POSTGRES__ENDPOINT": cluster.url,
        "TINYMEMORY_ENGINES__POSTGRES__EMBEDDER__KIND": EMBEDDER,
    }
    try:
        yield cluster
    finally:
        cluster.stop()


def _exactly_once(cluster: PostgresCluster, source_id: str, folder: Path, request: pytest.FixtureRequest) -> None:
    expected = [str(p.resolve()) for p in folder.rglob("*.md")]
    lost, duplicated = exactly_once(expected, cluster.items(source_id))
    letters = cluster.state().dead_letters(source_id)
    cluster.wait(cluster.vectors_settled, 120, "every passage embedded")
    passages = cluster.count("SELECT count(*) FROM passages")
    vectors = cluster.count("SELECT count(*) FROM passage_vectors")
    print_figures(
        request,
        f"items lost: {lost}; duplicated: {duplicated}; dead letters: {len(letters)}",
        f"{len(expected)} files; {passages} passages, {vectors} vectors",
    )
    assert (lost, duplicated, letters) == (0, 0, [])
    assert cluster.count("SELECT count(*) FROM items") == len(expected)
    assert vectors == passages  # one vector per passage: none missing, none twice (passage is the key)


def test_two_workers_and_the_watcher_share_one_database(
    cluster: PostgresCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    folder = tmp_path / "notes"
    write_notes(folder, 100)
    cluster.add_folder("notes", folder)
    cluster.start_worker()
    cluster.start_worker()
    cluster.start_watcher()  # its reconciling sync backfills the folder
    cluster.wait_done("notes", 100, within_s=120)
    (folder / "late.md").write_text("# late\n\na late note, tokenlatex\n")
    started = time.monotonic()
    cluster.wait_done("notes", 101, within_s=60)
    seen_after = time.monotonic() - started
    _exactly_once(cluster, "notes", folder, request)
    print_figures(request, f"a new file stored {seen_after:.1f} s after it was written, through the watcher")


def test_writers_killed_mid_batch_lose_and_duplicate_nothing(
    cluster: PostgresCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    files = 600
    folder = tmp_path / "notes"
    write_notes(folder, files)
    cluster.add_folder("notes", folder)
    workers = [cluster.start_worker(concurrency=2), cluster.start_worker(concurrency=1)]
    cluster.wait(lambda: all(worker_children(w) for w in workers), 60, "workers started")
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.committed("notes") > 0, 60, "the backfill under way")
    rng = random.Random(11)
    kills = 0
    while kills < 4 and cluster.committed("notes") < files:
        children = [pid for w in workers for pid in worker_children(w)]
        if children:
            os.kill(rng.choice(children), signal.SIGKILL)  # mid-batch: its transaction rolls back, the task returns
            kills += 1
        time.sleep(rng.uniform(0.1, 0.4))
    assert kills >= 3, "the backfill ended before three kills: the test proves little"
    cluster.wait_done("notes", files, within_s=240)
    _exactly_once(cluster, "notes", folder, request)


def test_the_database_restarted_during_a_backfill_loses_nothing(
    cluster: PostgresCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    files = 400
    folder = tmp_path / "notes"
    write_notes(folder, files)
    cluster.add_folder("notes", folder)
    cluster.start_worker(concurrency=2)
    assert cluster.sync("notes")
    cluster.wait(lambda: cluster.committed("notes") >= 50, 90, "the backfill under way")
    server = postgres.shared_server()
    server.stop()
    stopped_at = cluster.committed("notes")
    time.sleep(2)
    server.start()
    assert stopped_at < files, "the backfill ended before the restart: the test proves nothing"
    cluster.wait_done("notes", files, within_s=240)
    _exactly_once(cluster, "notes", folder, request)
