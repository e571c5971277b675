"""The distributed pipeline rides out a Redis restart and an engine that answers 503 for 20 seconds."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest

from engines.local.pending import pending_count as vector_backlog
from tests.integration.cluster import Cluster, write_notes
from tests.reliability.figures import exactly_once, print_figures

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class OwnRedis:
    """A redis-server of the test's own, with the append-only file on, that can be restarted."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--appendonly", "yes"]
        command += ["--appendfsync", "always", "--save", "", "--dir", str(self.directory)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()  # SIGTERM: redis flushes the append-only file and exits
            self.process.wait(timeout=10)


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[OwnRedis]:
    if subprocess.run(["which", "redis-server"], capture_output=True, check=False).returncode != 0:
        pytest.skip("redis-server is not installed")
    server = OwnRedis(tmp_path / "redis")
    server.directory.mkdir()
    server.start()
    yield server
    server.stop()


def test_workers_reconnect_after_a_redis_restart_and_the_backfill_completes(
    tmp_path: Path, own_redis: OwnRedis, request: pytest.FixtureRequest
) -> None:
    files = 1_500  # enough that the restart lands mid-backfill (asserted below)
    folder = tmp_path / "notes"
    write_notes(folder, files)
    cluster = Cluster(tmp_path, redis_url=own_redis.url)
    try:
        cluster.add_folder("notes", folder)
        cluster.start_worker()
        assert cluster.sync("notes")
        cluster.wait(lambda: cluster.committed("notes") >= 300, 60, "the backfill under way")
        own_redis.stop()
        time.sleep(2)
        own_redis.start()
        committed_at_restart = cluster.committed("notes")
        assert committed_at_restart < files, "the backfill ended before the restart"
        cluster.wait(cluster.queues_empty, 90, "the queued batches drained after the restart")
        # The batch that was running when Redis went away is cancelled and redelivered only after the
        # visibility timeout (it would replay); the next sync, beat's, finds its units at once.
        assert cluster.sync("notes")
        cluster.wait(lambda: cluster.committed("notes") == files and cluster.queues_empty(), 90, "every unit")
        paths = cluster.items("notes")
        lost, duplicated = exactly_once((str(p.resolve()) for p in folder.rglob("*.md")), paths)
        letters = cluster.state().dead_letters("notes")
        print_figures(
            request,
            f"items lost: {lost}; duplicated: {duplicated}; stuck: {int(not cluster.queues_empty())}; "
            f"dead letters: {len(letters)}",
            f"{files} files; Redis (append-only file on) restarted with {committed_at_restart} committed",
        )
        assert len(paths) == files == len(set(paths))
        assert letters == []
    finally:
        cluster.stop()


class FlakyEmbeddings(BaseHTTPRequestHandler):
    """An OpenAI-compatible /v1/embeddings that answers 503 until a moment, then works."""

    healthy_at: ClassVar[float] = 0.0
    refused: ClassVar[int] = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if time.monotonic() < self.healthy_at:
            type(self).refused += 1
            self._send(503, {"error": "overloaded"})
            return
        rows = [{"index": i, "embedding": [float(len(t) % 7), 1.0, 0.5, 0.25]} for i, t in enumerate(body["input"])]
        self._send(200, {"data": rows})

    def _send(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def test_an_embedder_unavailable_for_20_seconds_holds_up_nothing_and_its_vectors_follow(tmp_path: Path) -> None:
    """Vectors are off the write path: the items are stored (and keyword-searchable) while the embeddings
    endpoint answers 503, nothing is dead-lettered, and the engine's backlog asks again until every passage
    has its vector."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FlakyEmbeddings)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    FlakyEmbeddings.refused = 0
    FlakyEmbeddings.healthy_at = time.monotonic() + 20
    folder = tmp_path / "notes"
    write_notes(folder, 150)
    cluster = Cluster(tmp_path)
    cluster.extra_env = {
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__KIND": "openai",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__ENDPOINT": f"http://127.0.0.1:{httpd.server_address[1]}/v1",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__MODEL": "flaky",
        "TINYMEMORY_ENGINES__LOCAL__EMBEDDER__DIMENSIONS": "4",
    }
    try:
        cluster.add_folder("notes", folder)
        cluster.start_worker()
        started = time.monotonic()
        assert cluster.sync("notes")
        cluster.wait_done("notes", 150, within_s=150)
        assert time.monotonic() < FlakyEmbeddings.healthy_at  # stored while the endpoint was still down
        assert cluster.state().dead_letters("notes") == []
        assert len(cluster.items("notes")) == 150

        def backlog() -> int:
            # Read plainly: an engine opened here with another embedder would take the file over.
            with closing(sqlite3.connect(cluster.data_dir / "memory.sqlite3")) as conn:
                return vector_backlog(conn)

        cluster.wait(lambda: backlog() == 0, 120, "every passage embedded once the endpoint was back")
        assert FlakyEmbeddings.refused >= 2 and time.monotonic() - started >= 19  # asked again, more than once
    finally:
        cluster.stop()
        httpd.shutdown()
        httpd.server_close()
