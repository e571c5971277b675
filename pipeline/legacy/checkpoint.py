"""Where a legacy import stands: the last key read from each section (docs/spec/legacy-import.md §9).

A `Checkpoint` is the resume point a host persists: every field is the key of the last item yielded from
its section, and None until that section has yielded one, so `Checkpoint()` (`{}` on the wire) is the start.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from pydantic import ConfigDict, ValidationError

from engines.contract import Text, WireModel
from pipeline.legacy.errors import LegacyJsonError

SECTIONS = ("documents", "chunks", "conversations", "learnings", "profile")
"""The sections of a workspace, in the order they are imported."""


class ChunkKey(WireModel):
    """A chunk group's key: its `source_kind`, then its `source_id`."""

    model_config = ConfigDict(frozen=True)

    source_kind: Text
    source_id: Text


class Checkpoint(WireModel):
    """The last key read from each section; a field is omitted on the wire while None."""

    model_config = ConfigDict(frozen=True)

    documents: Text | None = None
    chunks: ChunkKey | None = None
    conversations: Text | None = None
    learnings: Text | None = None
    profile: Text | None = None

    START: ClassVar[Checkpoint]

    def to_json(self) -> str:
        """The compact wire JSON (what `from_json` reads back)."""
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Checkpoint:
        """Read a checkpoint written by `to_json`; anything else is `LegacyJsonError`."""
        try:
            return cls.model_validate_json(text, strict=True)
        except ValidationError as err:
            raise LegacyJsonError(f"not a legacy import checkpoint: {_first_problem(err)}") from None

    def is_start(self) -> bool:
        """True when no section has yielded an item yet."""
        return self == Checkpoint.START

    def keys(self) -> SectionKeys:
        """The five keys, in section order."""
        return (self.documents, self.chunks, self.conversations, self.learnings, self.profile)

    @classmethod
    def of_keys(cls, keys: SectionKeys) -> Checkpoint:
        documents, chunks, conversations, learnings, profile = keys
        return cls(
            documents=documents, chunks=chunks, conversations=conversations, learnings=learnings, profile=profile
        )


Checkpoint.START = Checkpoint()

SectionKeys = tuple[str | None, ChunkKey | None, str | None, str | None, str | None]
"""A checkpoint's keys as a plain tuple, in section order (cheap to copy once an item)."""

_POSITION = {section: n for n, section in enumerate(SECTIONS)}


def replace_keys(keys: SectionKeys, reads: Iterable[tuple[str, str | ChunkKey, object]]) -> SectionKeys:
    """`keys` with the key of each `(section, key, item)` read put in, in order (a section's last one stays)."""
    changed = list(keys)
    for section, key, _ in reads:
        changed[_POSITION[section]] = key
    return tuple(changed)  # type: ignore[return-value]


def _first_problem(err: ValidationError) -> str:
    problem = err.errors(include_url=False)[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else problem["msg"]
