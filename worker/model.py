"""The runtime's records: configured sources, manifest entries, changes, dead letters, run reports.

Everything that crosses a process (a Celery message, the state store) is one of these pydantic
models, written as JSON; nothing is pickled.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engines.contract import InvalidRequestError, ItemId, Namespace, SourceKind


class SourceConfigKind(StrEnum):
    """Kinds of configured source (the persisted names of spec §1.2)."""

    FOLDER = "folder"
    FILE = "file"
    WEB_PAGE = "web_page"
    GITHUB_REPO = "github_repo"
    RSS_FEED = "rss_feed"
    CONVERSATION = "conversation"

    @property
    def item_source(self) -> SourceKind:
        """The contract's `SourceKind` an item from such a source carries."""
        return _ITEM_SOURCE[self]


_ITEM_SOURCE = {
    SourceConfigKind.FOLDER: SourceKind.FOLDER,
    SourceConfigKind.FILE: SourceKind.FILE,
    SourceConfigKind.WEB_PAGE: SourceKind.LINK,
    SourceConfigKind.GITHUB_REPO: SourceKind.GITHUB,
    SourceConfigKind.RSS_FEED: SourceKind.RSS,
    SourceConfigKind.CONVERSATION: SourceKind.CONVERSATION,
}

_BAD_ID = re.compile(r"[:\x00-\x1f\x7f]")


class _Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def now() -> datetime:
    return datetime.now(UTC)


class SourceEntry(_Record):
    """A configured source: what to read and where its items go."""

    id: str
    kind: SourceConfigKind
    label: str
    enabled: bool = True
    path: str | None = None
    include: list[str] = Field(default_factory=list)
    url: str | None = None
    namespace: str | None = None
    interval_s: float | None = None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("id is required")
        if _BAD_ID.search(value):
            raise ValueError("id must not contain ':' or control characters")
        return value

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                Namespace.parse(value)
            except InvalidRequestError as err:
                raise ValueError(err.message) from None
        return value

    def placed_at(self) -> Namespace:
        return Namespace.parse(self.namespace) if self.namespace else Namespace.ROOT


class Signature(_Record):
    """What says whether a unit changed: size and mtime first, the content hash when those move."""

    size: int
    mtime_ns: int
    sha256: str | None = None


class ManifestEntry(_Record):
    """One unit as last committed: its signature, its items, and items still to be forgotten.

    `stale` holds ids of an earlier version: they are forgotten after this entry is committed, and
    a crash in between leaves them here, to be swept by the next sync (never leaked, never lost).
    `deleted` marks a unit that is gone and waits for its items to be forgotten.
    """

    signature: Signature
    item_ids: list[ItemId] = Field(default_factory=list)
    stale: list[ItemId] = Field(default_factory=list)
    deleted: bool = False


class Change(_Record):
    """One unit a sync found new, modified or gone, with its size and mtime when it was listed."""

    unit_id: str
    action: Literal["upsert", "delete"]
    size: int = 0
    mtime_ns: int = 0


class DeadLetter(_Record):
    """A unit that could not be ingested: where it failed and why. One per (source, unit, stage)."""

    source_id: str
    unit_id: str
    stage: str
    error: str
    message: str
    at: datetime = Field(default_factory=now)
    attempts: int = 1
    size: int | None = None
    mtime_ns: int | None = None

    @property
    def key(self) -> str:
        return f"{self.source_id}\x1f{self.unit_id}\x1f{self.stage}"


class SyncReport(_Record):
    """What one sync of a source found and did."""

    source_id: str
    finished_at: datetime = Field(default_factory=now)
    held_back: int = 0
    listed: int = 0
    upserts: int = 0
    deletes: int = 0
    skipped: int = 0
    batches: int = 0


class BatchReport(_Record):
    """What one ingest batch did: units done, items stored, replayed and forgotten, units failed."""

    source_id: str
    units: int = 0
    unchanged: int = 0
    stored: int = 0
    replayed: int = 0
    forgotten: int = 0
    failed: int = 0
