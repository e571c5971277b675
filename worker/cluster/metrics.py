"""Prometheus metrics of a worker: items stored, replayed and failed, batch latency, queue depth, lost messages.

Celery's prefork children count in prometheus_client's multiprocess mode (files in the directory
`worker.cluster.metrics_env` prepares before this module is imported). The workers of one host serving one
port share that directory, and the one holding the port serves every process's counters with the queue
depths it reads from Redis at scrape; the others say so in one line and try for the port now and then, so
the metrics stay served when the serving worker stops. Each count is reported once, by one server.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from worker.cluster.queues import queue_depths
from worker.records import BatchReport

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    import redis

logger = logging.getLogger(__name__)

ITEMS_STORED = Counter("tinymemory_items_stored_total", "Items written to the engine (not replays)")
ITEMS_REPLAYED = Counter("tinymemory_items_replayed_total", "Items the engine already held (replays)")
ITEMS_FORGOTTEN = Counter("tinymemory_items_forgotten_total", "Items forgotten because their unit changed or went")
UNITS_FAILED = Counter("tinymemory_units_failed_total", "Units dead-lettered", ["stage"])
MESSAGES_RESENT = Counter(
    "tinymemory_messages_resent_total", "Messages the broker lost, sent again by a sweep", ["task"]
)
MESSAGES_GIVEN_UP = Counter(
    "tinymemory_messages_given_up_total", "Messages lost or stopped too often, their units dead-lettered", ["task"]
)
BATCH_SECONDS = Histogram(
    "tinymemory_batch_seconds", "Time to ingest one batch", buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
)

RETRY_BIND_S = 10.0
_PROBE_TIMEOUT_S = 2.0


def record_sweep(resent: list[str], given_up: list[str]) -> None:
    """Count the tasks of the messages a sweep sent again and of those it gave up."""
    for task in resent:
        MESSAGES_RESENT.labels(task=task).inc()
    for task in given_up:
        MESSAGES_GIVEN_UP.labels(task=task).inc()


def record_batch(report: BatchReport, seconds: float) -> None:
    ITEMS_STORED.inc(report.stored)
    ITEMS_REPLAYED.inc(report.replayed)
    ITEMS_FORGOTTEN.inc(report.forgotten)
    if report.failed:
        UNITS_FAILED.labels(stage="any").inc(report.failed)
    BATCH_SECONDS.observe(seconds)


class QueueDepthCollector(Collector):
    """`tinymemory_queue_depth{queue}`: messages waiting in each queue, read from Redis at scrape time."""

    def __init__(self, client: redis.Redis, prefix: str) -> None:
        self.client = client
        self.prefix = prefix

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily("tinymemory_queue_depth", "Messages waiting in a queue", labels=["queue"])
        try:
            depths = queue_depths(self.client, self.prefix)
        except Exception:  # a scrape must not fail because Redis blinked
            depths = {}
        for queue, depth in depths.items():
            family.add_metric([queue], depth)
        yield family


class MetricsServer:
    """Serves the counters of `directory` and the queue depths on `port`, or waits for the port to be free."""

    def __init__(self, port: int, directory: Path, client: redis.Redis, prefix: str) -> None:
        self.port = port
        self.directory = directory
        self.client = client
        self.prefix = prefix
        self.serving = False
        self._stopped = threading.Event()
        # Held so that `stop` frees the port; the lock keeps a retry from binding after `stop`.
        self._httpd: WSGIServer | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Serve now if the port is free; else say once who holds it and keep trying in the background.

        A port this worker may not bind at all (a privileged one, say) is said once, and not tried again.
        """
        try:
            bound = self._bind()
        except OSError as err:
            logger.warning(
                "metrics: cannot serve on port %d (%s); give --metrics-port a port this worker may use "
                "(0 turns metrics off)",
                self.port,
                err.strerror or err,
            )
            return
        if bound:
            logger.info("metrics on :%d/metrics", self.port)
            return
        logger.warning("metrics: %s", self._holder())
        threading.Thread(target=self._retry, name="tm-metrics-bind", daemon=True).start()

    def stop(self) -> None:
        """Stop trying for the port, and stop serving if this server holds it: the port is free on return."""
        with self._lock:
            self._stopped.set()
            if self._httpd is not None:
                self._httpd.shutdown()
                self._httpd.server_close()
                self._httpd = None
            self.serving = False

    def _bind(self) -> bool:
        from prometheus_client import multiprocess

        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=str(self.directory))  # type: ignore[no-untyped-call]
        registry.register(QueueDepthCollector(self.client, self.prefix))
        try:
            self._httpd, _ = start_http_server(self.port, registry=registry)
        except OSError as err:
            if err.errno != errno.EADDRINUSE:
                raise
            return False
        self.serving = True
        forget_dead_processes(self.directory)
        return True

    def _retry(self) -> None:
        while not self._stopped.wait(RETRY_BIND_S):
            with self._lock:
                bound = not self._stopped.is_set() and self._bind()
            if bound:
                logger.info("metrics: port %d was freed; this worker serves the host's metrics now", self.port)
                return

    def _holder(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        try:
            # Not through a proxy from the environment: that would ask some other host, or fail.
            ours = "tinymemory_" in httpx.get(url, timeout=_PROBE_TIMEOUT_S, trust_env=False).text
        except httpx.HTTPError:
            ours = False
        if ours:
            return (
                f"port {self.port} is served by another tinymemory worker on this host, which reports this "
                "worker's counters too; this worker takes the port over if that one stops"
            )
        return (
            f"port {self.port} is in use by another program, so this worker's metrics are not served; "
            "give --metrics-port a free port (0 turns metrics off)"
        )


def forget_dead_processes(directory: Path) -> int:
    """Remove the counter files of processes that are gone (earlier runs of a host's workers); how many.

    prometheus_client names a process's files `<kind>_<pid>.db`; those of live processes are kept, so
    another worker sharing the directory keeps its counts.
    """
    removed = 0
    for path in directory.glob("*_*.db"):
        pid = path.stem.rpartition("_")[2]
        if pid.isdigit() and not _alive(int(pid)):
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
