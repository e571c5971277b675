"""Typed metadata every item carries, and `MetaFilter`, the selection every filtered read takes."""

from __future__ import annotations

import hashlib
import re
from typing import Any, ClassVar

from pydantic import Field

from engines.contract.enums import ItemKind, SourceKind
from engines.contract.namespace import Namespace, Reach
from engines.contract.serialization import Instant, Text, WireModel, format_instant

REDACTED_PREFIX = "tm-redacted:"

_U32 = Field(ge=0, le=0xFFFFFFFF)


class SourceRef(WireModel):
    """Where an item came from: the kind of source and, when it has one, the source's id."""

    kind: SourceKind = SourceKind.AGENT
    id: Text | None = None


class ToolCallRef(WireModel):
    name: Text
    id: Text | None = None

    def wire_dict(self) -> dict[str, Any]:
        return {"name": self.name} if self.id is None else {"name": self.name, "id": self.id}


class TurnRange(WireModel):
    """Zero-based inclusive turn indices of a conversation window."""

    first: int = _U32
    last: int = _U32


class MemoryMeta(WireModel):
    """Metadata of a stored item. Everything but `observed_at` is part of the item's identity."""

    wire_omit_empty: ClassVar[frozenset[str]] = frozenset({"tags"})

    namespace: Namespace = Namespace.ROOT
    workspace: Text | None = None
    folder: Text | None = None
    file_path: Text | None = None
    language: Text | None = None
    repo: Text | None = None
    commit: Text | None = None
    url: Text | None = None
    thread_id: Text | None = None
    turns: TurnRange | None = None
    agent_id: Text | None = None
    tool_call: ToolCallRef | None = None
    source: SourceRef = Field(default_factory=SourceRef)
    tags: list[Text] = Field(default_factory=list)
    observed_at: Instant | None = None
    derive: bool | None = None

    def _wire_omits(self, key: str) -> bool:
        return key == "namespace" and self.namespace.is_root

    def wire_dict(self, observed: bool = True) -> dict[str, Any]:
        """`model_dump(mode="json")` built by hand (ids hash it for every item, so speed matters);
        without `observed_at` when `observed` is false. A property test keeps the two equal."""
        out: dict[str, Any] = {} if self.namespace.is_root else {"namespace": str(self.namespace)}
        for name in _OPTIONAL_TEXT_BEFORE_TURNS:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.turns is not None:
            out["turns"] = {"first": self.turns.first, "last": self.turns.last}
        if self.agent_id is not None:
            out["agent_id"] = self.agent_id
        if self.tool_call is not None:
            out["tool_call"] = self.tool_call.wire_dict()
        source = self.source
        out["source"] = (
            {"kind": source.kind.value} if source.id is None else {"kind": source.kind.value, "id": source.id}
        )
        if self.tags:
            out["tags"] = list(self.tags)
        if observed and self.observed_at is not None:
            out["observed_at"] = format_instant(self.observed_at)
        if self.derive is not None:
            out["derive"] = self.derive
        return out

    @classmethod
    def from_source(cls, kind: SourceKind, id: str | None = None) -> MemoryMeta:
        return cls(source=SourceRef(kind=kind, id=id))


class MetaFilter(WireModel):
    """A selection of items: every set field must match; the empty filter matches everything.

    `folder` and `file_path` match as a prefix on a `/` boundary; `reach` None means the root's
    subtree without sandboxes.
    """

    wire_omit_empty: ClassVar[frozenset[str]] = frozenset({"kinds", "sources", "tags_any"})

    reach: Reach | None = None
    workspace: Text | None = None
    folder: Text | None = None
    file_path: Text | None = None
    language: Text | None = None
    repo: Text | None = None
    commit: Text | None = None
    url: Text | None = None
    thread_id: Text | None = None
    turns: TurnRange | None = None
    agent_id: Text | None = None
    tool_call: Text | None = None
    source_id: Text | None = None
    kinds: list[ItemKind] = Field(default_factory=list)
    sources: list[SourceKind] = Field(default_factory=list)
    tags_any: list[Text] = Field(default_factory=list)
    observed_after: Instant | None = None
    observed_before: Instant | None = None

    @classmethod
    def of_kinds(cls, *kinds: ItemKind) -> MetaFilter:
        return cls(kinds=list(kinds))

    def is_empty(self) -> bool:
        """True only when no field is set (a filter holding only a reach is not empty)."""
        return self == _EMPTY_FILTER

    def admits_kind(self, kind: ItemKind) -> bool:
        return not self.kinds or kind in self.kinds

    def matches(self, kind: ItemKind, meta: MemoryMeta) -> bool:
        """Whether an item of `kind` with `meta` is selected by this filter."""
        return (
            self.admits_kind(kind)
            and Reach.admitted_by(self.reach, meta.namespace)
            and self._matches_values(meta)
            and self._matches_ids(meta)
            and self._matches_lists(meta)
            and self._matches_window(meta)
        )

    def _matches_values(self, meta: MemoryMeta) -> bool:
        for name in _EXACT_FIELDS:
            wanted = getattr(self, name)
            if wanted is not None and getattr(meta, name) != wanted:
                return False
        for name in _PREFIX_FIELDS:
            wanted = getattr(self, name)
            if wanted is not None and not path_prefix_matches(getattr(meta, name), wanted):
                return False
        return self.turns is None or meta.turns == self.turns

    def _matches_ids(self, meta: MemoryMeta) -> bool:
        if self.thread_id is not None and not _same_optional(meta.thread_id, self.thread_id):
            return False
        if self.agent_id is not None and not _same_optional(meta.agent_id, self.agent_id):
            return False
        if self.source_id is not None and not _same_optional(meta.source.id, self.source_id):
            return False
        tool = meta.tool_call
        return self.tool_call is None or (tool is not None and tool.name == self.tool_call)

    def _matches_lists(self, meta: MemoryMeta) -> bool:
        if self.sources and meta.source.kind not in self.sources:
            return False
        return not self.tags_any or any(tag in meta.tags for tag in self.tags_any)

    def _matches_window(self, meta: MemoryMeta) -> bool:
        if self.observed_after is None and self.observed_before is None:
            return True
        seen = meta.observed_at
        if seen is None:
            return False
        if self.observed_after is not None and seen < self.observed_after:
            return False
        return self.observed_before is None or seen < self.observed_before


_EMPTY_FILTER = MetaFilter()
_OPTIONAL_TEXT_BEFORE_TURNS = ("workspace", "folder", "file_path", "language", "repo", "commit", "url", "thread_id")
_EXACT_FIELDS = ("workspace", "language", "repo", "commit", "url")
_PREFIX_FIELDS = ("folder", "file_path")


def path_prefix_matches(held: str | None, wanted: str) -> bool:
    """`held` equals `wanted` or lies below it on a `/` boundary (`/a/b` admits `/a/b/c`, not `/a/bc`)."""
    if held is None:
        return False
    if held == wanted:
        return True
    base = wanted.rstrip("/")
    return held.startswith(base) and (len(held) == len(base) or held[len(base)] == "/")


def redacted_id(value: str) -> str:
    """The stored form of an id that looks like a phone number."""
    return REDACTED_PREFIX + hashlib.sha256(value.encode("utf-8")).hexdigest()[:32]


def same_id(held: str, wanted: str) -> bool:
    """Whether a held id is `wanted`, directly or in its redacted form."""
    return held == wanted or (held.startswith(REDACTED_PREFIX) and held == redacted_id(wanted))


def _same_optional(held: str | None, wanted: str) -> bool:
    return held is not None and same_id(held, wanted)


_UUID = re.compile(r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}")
_DIGIT_RUN = re.compile(r"[0-9 \-.()+]+")


def holds_phone_number(value: str) -> bool:
    """Whether an id holds a run of at least 7 digits (with phone separators) not glued to letters."""
    if value.startswith(REDACTED_PREFIX):
        return False
    text = _UUID.sub("_", value)
    for run in _DIGIT_RUN.finditer(text):
        if sum(c.isdigit() for c in run.group()) < 7:
            continue
        before = text[run.start() - 1] if run.start() > 0 else ""
        after = text[run.end()] if run.end() < len(text) else ""
        if not _is_ascii_letter(before) and not _is_ascii_letter(after):
            return True
    return False


def _is_ascii_letter(ch: str) -> bool:
    return ch.isascii() and ch.isalpha()
