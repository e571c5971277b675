"""`Services`: what the operations run against, opened from the settings (the command line and the API use it)."""

from __future__ import annotations

from typing import TypeVar

from engines.contract import MemoryEngine
from sources import register_kinds
from worker.control.results import ClusterProbe, SyncRunner
from worker.erasure.operations import ErasureRunner
from worker.settings import Settings
from worker.state.base import StateStore
from worker.wiring import Closeable, open_engine, open_state

_C = TypeVar("_C", bound=Closeable)


class Services:
    """What the operations run against, opened from the settings on first use and closed together.

    With SQLite state a sync runs here, in an embedded runtime that shares this object's state store and
    engine (so what it stores is what `engine()` reads); with Redis state a sync is queued for the workers
    and a status includes their queues. Usable as a context manager; closing releases everything opened.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        state: StateStore | None = None,
        engine: MemoryEngine | None = None,
        runner: SyncRunner | None = None,
        erasures: ErasureRunner | None = None,
    ) -> None:
        """Parts given here (a running runtime's) are used as they are and not closed by `close`."""
        register_kinds(settings.source_kinds)
        self.settings = settings
        self._given = (state, engine, runner, erasures)
        self._state, self._engine, self._runner, self._erasures = state, engine, runner, erasures
        self._opened: list[Closeable] = []

    def __enter__(self) -> Services:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def state(self) -> StateStore:
        if self._state is None:
            self._state = self._keep(open_state(self.settings))
        return self._state

    def engine(self) -> MemoryEngine:
        if self._engine is None:
            self._engine = open_engine(self.settings)
            if isinstance(self._engine, Closeable):
                self._keep(self._engine)
        return self._engine

    def runner(self) -> SyncRunner:
        if self._runner is None:
            self._runner = self._open_runner()
        return self._runner

    def erasures(self) -> ErasureRunner:
        """Where erasures run: queued for the erase workers with Redis state, else in this process, over
        this object's state and engine (`embedded()` tells which)."""
        if self._erasures is None:
            self._erasures = self._open_erasures()
        return self._erasures

    @property
    def embedded(self) -> bool:
        """Whether erasures (and syncs) run in this process: the state is SQLite."""
        return self.settings.state != "redis"

    def probe(self) -> ClusterProbe | None:
        if self.settings.state != "redis":
            return None
        from worker.cluster.status import CeleryProbe

        return CeleryProbe(self.settings)

    def close(self) -> None:
        """Close everything opened, newest first, even when one of them fails (the first failure is raised)."""
        opened, self._opened = self._opened, []
        self._state, self._engine, self._runner, self._erasures = self._given
        failure: Exception | None = None
        for resource in reversed(opened):
            try:
                resource.close()
            except Exception as err:
                failure = failure or err
        if failure is not None:
            raise failure

    def _keep(self, resource: _C) -> _C:
        self._opened.append(resource)
        return resource

    def _open_runner(self) -> SyncRunner:
        if self.settings.state == "redis":
            from worker.cluster.celery_app import create_app
            from worker.cluster.runtime import QueuedSyncs
            from worker.redis.client import redis_from_url

            client = self._keep(redis_from_url(self.settings.redis_url))
            return QueuedSyncs(self.settings, create_app(self.settings), client)
        from worker.embedded import EmbeddedRuntime

        return self._keep(EmbeddedRuntime(self.settings, state=self.state(), engine=self.engine()))

    def _open_erasures(self) -> ErasureRunner:
        if self.settings.state == "redis":
            from worker.cluster.celery_app import create_app
            from worker.cluster.runtime import QueuedErasures, deliveries_for
            from worker.redis.client import redis_from_url

            client = self._keep(redis_from_url(self.settings.redis_url))
            return QueuedErasures(deliveries_for(create_app(self.settings), client, self.settings))
        from worker.embedded import InProcessErasures

        return InProcessErasures.over(self.state(), self.engine())
