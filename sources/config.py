"""Source configuration (docs/spec/sources-and-documents.md §1): the kinds, a configured source (`SourceEntry`), and a
request for a new one.

`SourceConfigKind` is the one enumeration of the built-in kinds: their persisted names, the contract
`SourceKind` their items carry, and the name a person types. An entry's `kind` is a plain string, so a kind
registered by a plugin (`sources.registry`) is configured exactly like a built-in one.
"""

from __future__ import annotations

import hashlib
import os
import re
from enum import StrEnum
from pathlib import Path
from typing import Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from engines.contract import InvalidRequestError, MemoryMeta, Namespace, Segment, SegmentKind, SourceKind, SourceRef


class SourceConfigKind(StrEnum):
    """The built-in kinds of configured source (the persisted names of docs/spec/sources-and-documents.md §1.2)."""

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

    @property
    def alias(self) -> str:
        """What a person types for this kind (`tinymemory sources add link URL`)."""
        return _ALIAS.get(self, self.value)


_ITEM_SOURCE: Final = {
    SourceConfigKind.FOLDER: SourceKind.FOLDER,
    SourceConfigKind.FILE: SourceKind.FILE,
    SourceConfigKind.WEB_PAGE: SourceKind.LINK,
    SourceConfigKind.GITHUB_REPO: SourceKind.GITHUB,
    SourceConfigKind.RSS_FEED: SourceKind.RSS,
    SourceConfigKind.CONVERSATION: SourceKind.CONVERSATION,
}
_ALIAS: Final = {
    SourceConfigKind.WEB_PAGE: "link",
    SourceConfigKind.GITHUB_REPO: "github",
    SourceConfigKind.RSS_FEED: "rss",
}

_BAD_ID: Final = re.compile(r"[:\x00-\x1f\x7f]")
_KIND: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")


class SourceEntry(BaseModel):
    """A configured source: what to read and where its items go. Unknown fields are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: str
    label: str
    enabled: bool = True
    path: str | None = None
    include: list[str] = Field(default_factory=list)
    url: str | None = None
    namespace: str | None = None
    interval_s: float | None = None
    # Kind-specific settings (docs/spec/sources-and-documents.md §1.1); a kind's `configure` refuses those
    # it does not read.
    branch: str | None = None
    extras: list[str] = Field(default_factory=list)
    token_env: str | None = None
    sitemap: bool = False
    max_items: int | None = Field(default=None, gt=0)
    max_commits: int | None = Field(default=None, gt=0)
    max_issues: int | None = Field(default=None, gt=0)
    max_prs: int | None = Field(default=None, gt=0)

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("id is required")
        if _BAD_ID.search(value):
            raise ValueError("id must not contain ':' or control characters")
        return value

    @field_validator("kind")
    @classmethod
    def _check_kind(cls, value: str) -> str:
        if _KIND.fullmatch(value) is None:
            raise ValueError(f"kind {value!r} is not a kind name (lowercase letters, digits and '_')")
        return value

    @field_validator("label")
    @classmethod
    def _check_label(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("label is required")
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
        """The namespace node the source's items are stored at."""
        return Namespace.parse(self.namespace) if self.namespace else Namespace.ROOT

    def origin(self, item_source: SourceKind, **fields: object) -> MemoryMeta:
        """The metadata of an item read from this source: its reference and namespace, and `fields`
        (the `MemoryMeta` fields the kind knows of the unit)."""
        return MemoryMeta.model_validate(
            {"namespace": self.placed_at(), "source": SourceRef(kind=item_source, id=self.id), **fields}
        )


class SourceRequest(BaseModel):
    """A request to configure a source, as a person or an API client makes it; the kind's spec checks it.

    `kind` is a persisted kind name or what a person types for it (`link` for `web_page`); `target` is
    the path or URL the kind reads.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str
    target: str
    id: str | None = None
    label: str | None = None
    namespace: str | None = None
    interval_s: float | None = Field(default=None, gt=0)
    include: list[str] = Field(default_factory=list)
    branch: str | None = None
    extras: list[str] = Field(default_factory=list)
    token_env: str | None = None
    sitemap: bool = False
    max_items: int | None = Field(default=None, gt=0)
    max_commits: int | None = Field(default=None, gt=0)
    max_issues: int | None = Field(default=None, gt=0)
    max_prs: int | None = Field(default=None, gt=0)

    def refuse_options(self, alias: str, *accepted: str) -> None:
        """Refuse every kind-specific option set on this request that a kind (typed as `alias`) does not
        read, naming the first one, so `--branch` on a folder is an error rather than silently ignored."""
        for name in _KIND_OPTIONS:
            if name not in accepted and getattr(self, name):
                raise InvalidRequestError(f"{name} does not apply to {alias} sources")


# The request fields only some kinds read (`SourceRequest.refuse_options`).
_KIND_OPTIONS: Final = (
    *("include", "branch", "extras", "token_env", "sitemap"),
    *("max_items", "max_commits", "max_issues", "max_prs"),
)


def configured_entry(request: SourceRequest, default_id: str, default_label: str, **fields: object) -> SourceEntry:
    """The entry a kind's `configure` makes of a request, with the kind's own `fields`; a value the entry
    refuses (an id with `:`, an unknown namespace kind) is `InvalidRequestError` naming the field."""
    try:
        return SourceEntry.model_validate(
            {
                "id": request.id or default_id,
                "kind": request.kind,
                "label": request.label or default_label,
                "namespace": request.namespace,
                "interval_s": request.interval_s,
                **fields,
            }
        )
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        message = first["msg"].removeprefix("Value error, ")
        raise InvalidRequestError(f"{field}: {message}" if field else message) from None


def local_request(path: Path, source_id: str | None = None) -> SourceRequest:
    """The request for a local path given on the command line: a folder source for a folder, else a file."""
    kind = SourceConfigKind.FOLDER if path.is_dir() else SourceConfigKind.FILE
    return SourceRequest(kind=kind, target=str(path), id=source_id)


def source_id_for(path: Path) -> str:
    """A stable id for a local path: its name made id-safe, and a short hash of the whole real path."""
    real = os.path.realpath(path)
    digest = hashlib.sha256(real.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{Segment.sanitized(SegmentKind.SOURCE, path.name or 'root').id[:48]}-{digest}"
