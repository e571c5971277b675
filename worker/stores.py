"""Opening the state store the settings name: SQLite (embedded) or Redis (distributed)."""

from __future__ import annotations

from worker.settings import Settings
from worker.state import StateStore


def open_state(settings: Settings) -> StateStore:
    """The configured state store. Redis's client is imported only when Redis is chosen."""
    if settings.state == "redis":
        from worker.redis_client import redis_from_url
        from worker.state_redis import RedisStateStore

        return RedisStateStore(redis_from_url(settings.redis_url), prefix=settings.redis_prefix)
    from worker.state_sqlite import SqliteStateStore

    return SqliteStateStore(settings.state_file)


def close_state(state: StateStore) -> None:
    close = getattr(state, "close", None)
    if callable(close):
        close()
