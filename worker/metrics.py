"""Prometheus metrics of a worker: items stored, replayed and failed, batch latency, queue depth.

Celery's prefork children count in prometheus_client's multiprocess mode (files under
`PROMETHEUS_MULTIPROC_DIR`, which `tinymemory worker` sets through `worker.metrics_env` before this
module is imported); the parent serves them all on `--metrics-port`, with the queue depths it reads
from Redis at scrape.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from worker.model import BatchReport

if TYPE_CHECKING:
    import redis

ITEMS_STORED = Counter("tinymemory_items_stored_total", "Items written to the engine (not replays)")
ITEMS_REPLAYED = Counter("tinymemory_items_replayed_total", "Items the engine already held (replays)")
ITEMS_FORGOTTEN = Counter("tinymemory_items_forgotten_total", "Items forgotten because their unit changed or went")
UNITS_FAILED = Counter("tinymemory_units_failed_total", "Units dead-lettered", ["stage"])
BATCH_SECONDS = Histogram(
    "tinymemory_batch_seconds", "Time to ingest one batch", buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
)


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
        from worker.cluster_status import queue_depths

        family = GaugeMetricFamily("tinymemory_queue_depth", "Messages waiting in a queue", labels=["queue"])
        try:
            depths = queue_depths(self.client, self.prefix)
        except Exception:  # a scrape must not fail because Redis blinked
            depths = {}
        for queue, depth in depths.items():
            family.add_metric([queue], depth)
        yield family


def serve(port: int, client: redis.Redis, prefix: str) -> None:
    """Serve every child's metrics and the queue depths on `port` (`/metrics`)."""
    from prometheus_client import multiprocess

    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    registry.register(QueueDepthCollector(client, prefix))
    start_http_server(port, registry=registry)
