"""Opening what the settings name: the state store (SQLite embedded, Redis distributed) and the engine."""

from __future__ import annotations

from engines.contract import MemoryEngine
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
    _close(state)


def open_engine(settings: Settings) -> MemoryEngine:
    """The configured engine, with the configured credential."""
    return settings.memory_config().build(settings.credential())


def close_engine(engine: MemoryEngine) -> None:
    """Release an engine's resources when it holds any (the local engine's file and threads)."""
    _close(engine)


def _close(resource: object) -> None:
    # Closing is not part of the contract: only engines and stores that hold resources offer it.
    close = getattr(resource, "close", None)
    if callable(close):
        close()
