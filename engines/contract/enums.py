"""The contract's enumerations; a member's value is its wire string, iteration follows the spec."""

from __future__ import annotations

from enum import StrEnum


class ItemKind(StrEnum):
    DOCUMENT = "document"
    CONVERSATION = "conversation"
    LEARNING = "learning"


class SourceKind(StrEnum):
    FOLDER = "folder"
    FILE = "file"
    LINK = "link"
    GITHUB = "github"
    RSS = "rss"
    CONVERSATION = "conversation"
    AGENT = "agent"
    IMPORT = "import"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class LearningKind(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    PROCEDURE = "procedure"
    CORRECTION = "correction"
    OTHER = "other"


class FetchMode(StrEnum):
    KEYWORD = "keyword"
    VECTOR = "vector"
    HYBRID = "hybrid"


class SegmentKind(StrEnum):
    """Kinds of namespace node. The set may grow: never assume exactly these seven."""

    AGENT = "agent"
    TEAM = "team"
    USER = "user"
    WORKSPACE = "workspace"
    PROJECT = "project"
    SOURCE = "source"
    SERVICE = "service"

    @property
    def prefix(self) -> str:
        """The kind as written in a namespace path (`workspace` is written `ws`)."""
        return _SEGMENT_PREFIX.get(self, self.value)

    @classmethod
    def from_prefix(cls, prefix: str) -> SegmentKind | None:
        """The kind a path prefix names, or None (`workspace` is not a path prefix)."""
        return _PREFIX_SEGMENT.get(prefix)


_SEGMENT_PREFIX = {SegmentKind.WORKSPACE: "ws"}
_PREFIX_SEGMENT = {kind.prefix: kind for kind in SegmentKind}
