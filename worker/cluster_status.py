"""`tinymemory status`: what the distributed pipeline is doing, read from Redis and the workers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from worker.keys import Keys
from worker.queues import ALL_QUEUES
from worker.redis_client import redis_from_url
from worker.settings import Settings
from worker.state_redis import RedisStateStore

if TYPE_CHECKING:
    import redis

_PING_TIMEOUT_S = 1.0


def collect_status(settings: Settings) -> dict[str, object]:
    """Queue depths, every source with its units and last sync, dead letters, and the workers that answer."""
    client = redis_from_url(settings.redis_url)
    state = RedisStateStore(client, prefix=settings.redis_prefix)
    sources = []
    for entry in state.list_sources():
        last = state.last_sync(entry.id)
        sources.append(
            {
                "id": entry.id,
                "kind": entry.kind.value,
                "label": entry.label,
                "enabled": entry.enabled,
                "units": len(state.unit_states(entry.id)),
                "last_sync": last.finished_at.isoformat() if last else None,
                "last_changes": (last.upserts + last.deletes) if last else None,
            }
        )
    return {
        "queues": queue_depths(client, settings.redis_prefix),
        "sources": sources,
        "dead_letters": len(state.dead_letters(limit=100_000)),
        "workers": _workers(settings),
    }


def queue_depths(client: redis.Redis, prefix: str) -> dict[str, int]:
    """Messages waiting in each queue (Celery keeps a queue as a list under the project's prefix)."""
    base = Keys(prefix).celery()
    return {queue: int(client.llen(base + queue)) for queue in ALL_QUEUES}


def _workers(settings: Settings) -> list[str]:
    from worker.celery_app import create_app

    replies = create_app(settings).control.inspect(timeout=_PING_TIMEOUT_S).ping() or {}
    return sorted(replies)
