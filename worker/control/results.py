"""What the operations run against (`SyncRunner`, `ClusterProbe`) and the typed results they return."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from sources import SourceEntry
from worker.records import SyncOutcome, SyncReport
from worker.runs import RunView


class SyncRunner(Protocol):
    """Runs or queues a sync of one source (the embedded runtime, or the Celery queues)."""

    async def request_sync(self, source_id: str, hints: Sequence[str] | None = None) -> SyncOutcome: ...


@runtime_checkable
class RunBoard(Protocol):
    """Where a runner shows its runs: the syncs in progress and the last ones done (the console's progress)."""

    def runs(self) -> list[RunView]: ...


class ClusterProbe(Protocol):
    """What a distributed pipeline adds to a status: its queues and the workers that answer."""

    def queue_depths(self) -> dict[str, int]: ...

    def workers(self) -> list[str]: ...


class Result(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SourceDetail(Result):
    """One source: its settings, how many units its manifest holds, its last sync, its dead letters."""

    source: SourceEntry
    units: int
    last_sync: SyncReport | None
    dead_letters: int


class SourceRemoval(Result):
    """A source removed: how many of its items were forgotten (none when they were kept)."""

    source_id: str
    forgotten: int
    kept_items: bool


class SourceStatus(Result):
    """A source at a glance: `location` is its path or URL; `items` what its manifest says it stored;
    `last_took_s` how long its last sync took to list and dispatch, `last_error` why its listing failed."""

    id: str
    kind: str
    label: str
    enabled: bool
    units: int
    last_sync: datetime | None
    last_changes: int | None
    location: str | None = None
    interval_s: float | None = None
    items: int = 0
    dead_letters: int = 0
    last_took_s: float | None = None
    last_error: str | None = None


class VectorBacklogStatus(Result):
    """An engine's background vectors: `waiting` passages, `rate_per_s` stored a second over the last minute
    (None: not known yet, or none stored in it), `eta_s` until none waits (0 when none does; None without a rate)."""

    waiting: int
    rate_per_s: float | None = None
    eta_s: float | None = None


class Status(Result):
    """The sources with their units and last sync, the dead letters, (distributed) queues and workers, and the
    engine's vector backlog (None for an engine that stores vectors with the items, or when it was not read)."""

    sources: list[SourceStatus]
    dead_letters: int
    queues: dict[str, int] | None = None
    workers: list[str] | None = None
    vectors: VectorBacklogStatus | None = None


class SourceKindInfo(Result):
    """A kind of source as a person types it, and whether this build offers it (and then what it reads)."""

    name: str
    kind: str
    available: bool
    target: str | None = None
    summary: str | None = None


class Replay(Result):
    """Dead letters of one source cleared and its sync asked for, so their units are tried again."""

    source_id: str
    units: list[str] = Field(default_factory=list)
    sync: SyncOutcome
