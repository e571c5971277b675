"""A throwaway distributed pipeline for integration tests: real Redis, real `tinymemory worker` processes.

Every test gets its own key prefix (`tm:test-<uuid>:`), which Celery's keys carry too, so tests
share the Redis on 127.0.0.1:6379 without seeing each other; everything is deleted afterwards.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import redis

from engines.contract import ListRequest, MetaFilter
from engines.local import LocalEngine
from sources import SourceEntry
from worker.cluster.celery_app import create_app
from worker.cluster.runtime import enqueue_sync
from worker.cluster.status import queue_depths
from worker.redis.client import redis_from_url
from worker.redis.keys import Keys
from worker.redis.leases import Leases
from worker.settings import Settings
from worker.state.redis import RedisStateStore

TINYMEMORY = str(Path(sys.executable).parent / "tinymemory")


def write_notes(folder: Path, count: int, words: str = "note") -> None:
    for n in range(count):
        path = folder / f"d{n % 20:02}" / f"{words}-{n:05}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {words} {n}\n\nthe body of {words} {n}, token{words}{n}x\n")


@dataclass
class Cluster:
    root: Path
    redis_url: str = "redis://127.0.0.1:6379/0"
    prefix: str = field(default_factory=lambda: f"tm:test-{uuid.uuid4().hex[:12]}:")
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    others: list[subprocess.Popen[bytes]] = field(default_factory=list)
    logs: list[BinaryIO] = field(default_factory=list)
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "TINYMEMORY_REDIS_URL": self.redis_url,
            "TINYMEMORY_REDIS_PREFIX": self.prefix,
            "TINYMEMORY_STATE": "redis",
            "TINYMEMORY_DATA_DIR": str(self.data_dir),
            "TINYMEMORY_CONVERT_WORKERS": "1",
            "TINYMEMORY_LOG_JSON": "true",
            **self.extra_env,
        }

    def settings(self) -> Settings:
        return Settings(
            redis_url=self.redis_url,
            redis_prefix=self.prefix,
            state="redis",
            data_dir=self.data_dir,  # type: ignore[arg-type]
        )

    def client(self) -> redis.Redis:
        return redis_from_url(self.redis_url)

    def state(self) -> RedisStateStore:
        return RedisStateStore(self.client(), prefix=self.prefix)

    def start_worker(
        self, queues: str = "tm.sync,tm.ingest,tm.backfill", concurrency: int = 1, metrics_port: int = 0
    ) -> subprocess.Popen[bytes]:
        """Start a worker logging to `root/worker-N.log` (N counts from 0); metrics off unless a port is given."""
        log = (self.root / f"worker-{len(self.workers)}.log").open("wb")
        self.logs.append(log)
        command = [TINYMEMORY, "worker", "--queues", queues, "--concurrency", str(concurrency)]
        command += ["--metrics-port", str(metrics_port)]
        process = subprocess.Popen(
            command, env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.workers.append(process)
        return process

    def start_beat(self) -> subprocess.Popen[bytes]:
        """Start `tinymemory beat`, logging to `root/beat.log`; it is stopped with the workers (not one of them)."""
        log = (self.root / "beat.log").open("wb")
        self.logs.append(log)
        process = subprocess.Popen(
            [TINYMEMORY, "beat"], env=self.env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        self.others.append(process)
        return process

    def add_folder(self, source_id: str, folder: Path) -> SourceEntry:
        entry = SourceEntry(id=source_id, kind="folder", label=source_id, path=str(folder))  # type: ignore[arg-type]
        self.state().put_source(entry)
        return entry

    def sync(self, source_id: str, hints: list[str] | None = None) -> bool:
        settings = self.settings()
        leases = Leases(self.client(), prefix=self.prefix)
        return enqueue_sync(create_app(settings), leases, settings, source_id, hints=hints)

    def committed(self, source_id: str) -> int:
        return len(self.state().unit_states(source_id))

    def queues_empty(self) -> bool:
        return not any(queue_depths(self.client(), self.prefix).values())

    def idle(self) -> bool:
        client = self.client()
        depths = queue_depths(client, self.prefix)
        unacked = client.hlen(Keys(self.prefix).celery() + "unacked")
        return not any(depths.values()) and unacked == 0

    def wait(self, condition: Callable[[], bool], within_s: float, what: str) -> float:
        started = time.monotonic()
        while time.monotonic() - started < within_s:
            if condition():
                return time.monotonic() - started
            time.sleep(0.2)
        raise AssertionError(f"{what} not reached within {within_s} s; worker logs in {self.root}")

    def wait_done(self, source_id: str, units: int, within_s: float = 120) -> None:
        self.wait(lambda: self.committed(source_id) == units and self.idle(), within_s, f"{units} units of {source_id}")

    def items(self, source_id: str) -> list[str]:
        """The file paths of every item of the source, as the engine lists them."""
        return [path for path, _ in self.texts(source_id)]

    def texts(self, source_id: str) -> list[tuple[str, str]]:
        """The file path and text of every item of the source, as the engine lists them."""

        async def read() -> list[tuple[str, str]]:
            engine = LocalEngine(self.data_dir / "memory.sqlite3")
            try:
                found, cursor = [], None
                while True:
                    page = await engine.list(
                        ListRequest(limit=500, cursor=cursor, filter=MetaFilter(source_id=source_id))
                    )
                    found.extend((hit.meta.file_path or "", hit.text) for hit in page.items)
                    if page.next_cursor is None:
                        return found
                    cursor = page.next_cursor
            finally:
                engine.close()

        return asyncio.run(read())

    def stop(self) -> None:
        processes = [*self.workers, *self.others]
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        for log in self.logs:
            log.close()
        client = self.client()
        keys = list(client.scan_iter(match=f"{self.prefix}*", count=1000))
        for start in range(0, len(keys), 500):
            client.delete(*keys[start : start + 500])


def worker_children(process: subprocess.Popen[bytes]) -> list[int]:
    """The pool processes of a `tinymemory worker` (Celery's prefork children)."""
    found = subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split()]


def cluster_fixture(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop()
