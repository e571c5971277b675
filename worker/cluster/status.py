"""What `status` reads of the distributed pipeline beyond the state store: queue depths and live workers."""

from __future__ import annotations

from worker.cluster.celery_app import create_app
from worker.cluster.queues import queue_depths
from worker.redis.client import redis_from_url
from worker.settings import Settings

_PING_TIMEOUT_S = 1.0


class CeleryProbe:
    """Reads the queues on Redis and asks the workers that answer a ping (a `worker.control.ClusterProbe`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def queue_depths(self) -> dict[str, int]:
        client = redis_from_url(self.settings.redis_url)
        try:
            return queue_depths(client, self.settings.redis_prefix)
        finally:
            client.close()

    def workers(self) -> list[str]:
        replies = create_app(self.settings).control.inspect(timeout=_PING_TIMEOUT_S).ping() or {}
        return sorted(replies)
