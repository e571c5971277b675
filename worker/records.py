"""The runtime's records: manifest entries, changes, dead letters, run reports.

Everything that crosses a process (a Celery message, the state store) is one of these pydantic models, written
as JSON; nothing is pickled. A record refuses a field it does not know, so a misspelled one fails where it is
written instead of vanishing. (Configured sources, `SourceEntry`, are the sources package's.)
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from engines.contract import ItemId


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def now() -> datetime:
    return datetime.now(UTC)


class ManifestEntry(_Record):
    """One unit as last committed: its version and content hash, its items, and items still to be forgotten.

    `version` is the unit's version as its reader reported it (opaque: compared only for equality);
    `sha256` is the digest of the content the items were made of (`pipeline.items.content_digest`), so a
    unit whose version moved but whose content did not is recognised without converting it again.
    `stale` holds ids of an earlier version: they are forgotten after this entry is committed, and a crash in
    between leaves them here, to be swept by the next sync (never leaked, never lost). `deleted` marks a unit
    that is gone and waits for its items to be forgotten.
    """

    version: str
    sha256: str | None = None
    item_ids: list[ItemId] = Field(default_factory=list)
    stale: list[ItemId] = Field(default_factory=list)
    deleted: bool = False


class Change(_Record):
    """One unit a sync found new, modified or gone, with its version and size as listed (for an upsert)."""

    unit_id: str
    action: Literal["upsert", "delete"]
    version: str | None = None
    size: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_size_and_mtime(cls, data: Any) -> Any:
        # A message queued before units had versions carries size and mtime_ns; a folder's version is both.
        if isinstance(data, dict) and "mtime_ns" in data and "version" not in data:
            data = dict(data)
            mtime_ns = data.pop("mtime_ns")
            if data.get("action") == "upsert":
                data["version"] = f"{data.get('size', 0)}:{mtime_ns}"
        return data


SOURCE_UNIT = ""
"""The unit id of a dead letter about a whole source: its listing failed (stage `list`)."""


class DeadLetter(_Record):
    """A unit that could not be ingested: where it failed and why. One per (source, unit, stage).

    `version` pins the letter to the unit as it was when it failed: a later sync leaves the unit alone
    until its version moves (retrying cannot help before). None for failures worth retrying anyway
    (a transient one) and for entries refused at listing.
    """

    source_id: str
    unit_id: str
    stage: str
    error: str
    message: str
    at: datetime = Field(default_factory=now)
    attempts: int = 1
    version: str | None = None

    @property
    def key(self) -> str:
        return f"{self.source_id}\x1f{self.unit_id}\x1f{self.stage}"


class SyncReport(_Record):
    """What one sync of a source found and did; `cursor` is where an incremental source's next sync starts.
    `error` says why its listing failed (then nothing else was done)."""

    source_id: str
    # None in reports written before syncs recorded when they started.
    started_at: datetime | None = None
    finished_at: datetime = Field(default_factory=now)
    error: str | None = None
    held_back: int = 0
    listed: int = 0
    upserts: int = 0
    deletes: int = 0
    skipped: int = 0
    batches: int = 0
    cursor: str | None = None


class BatchReport(_Record):
    """What one ingest batch did: units done, items stored, replayed and forgotten, units failed, units dropped
    because their source or namespace was erased meanwhile (a tombstone), and units skipped for holding no text.

    The batch counts into its report as it goes, so the report is not frozen; a misspelled count is still
    refused, on assignment as on construction.
    """

    model_config = ConfigDict(extra="forbid", frozen=False, validate_assignment=True)

    source_id: str
    units: int = 0
    unchanged: int = 0
    stored: int = 0
    replayed: int = 0
    forgotten: int = 0
    failed: int = 0
    dropped: int = 0
    no_text: list[str] = Field(default_factory=list)
    """Units skipped because their converter found no text in them (`unit: why`): neither stored nor failed."""


class SyncOutcome(_Record):
    """What asking for a sync did: `synced` here (with its report and the batches it ran), `queued` for the
    workers, or `already_queued` (one is queued or running; it runs again right after, so nothing is missed)."""

    source_id: str
    status: Literal["synced", "queued", "already_queued"]
    report: SyncReport | None = None
    batches: list[BatchReport] = Field(default_factory=list)
