"""`Facet`: the metadata dimensions an explorer groups by, how an item's values are read for one, and how a
filter is narrowed to one value (docs/spec/contract.md §16)."""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from engines.contract.enums import ItemKind, SourceKind
from engines.contract.errors import InvalidRequestError
from engines.contract.meta import MetaFilter
from engines.contract.namespace import Namespace, Reach
from engines.contract.query import Hit

_E = TypeVar("_E", bound=StrEnum)


class Facet(StrEnum):
    """A metadata dimension an explorer groups by, fixed by the contract rather than by storage."""

    KIND = "kind"
    SOURCE = "source"
    SOURCE_ID = "source_id"
    WORKSPACE = "workspace"
    FOLDER = "folder"
    FILE_PATH = "file_path"
    LANGUAGE = "language"
    REPO = "repo"
    URL = "url"
    THREAD = "thread"
    AGENT = "agent"
    TOOL_CALL = "tool_call"
    TAG = "tag"
    NAMESPACE = "namespace"

    def values(self, hit: Hit) -> list[str]:
        """The item's distinct values for this facet, in first-seen order (empty when it has none)."""
        meta = hit.meta
        if self is Facet.TAG:
            return list(dict.fromkeys(meta.tags))
        value: str | None
        match self:
            case Facet.KIND:
                value = hit.kind.value
            case Facet.SOURCE:
                value = meta.source.kind.value
            case Facet.SOURCE_ID:
                value = meta.source.id
            case Facet.TOOL_CALL:
                value = meta.tool_call.name if meta.tool_call is not None else None
            case Facet.NAMESPACE:
                value = str(meta.namespace)
            case _:
                value = getattr(meta, _META_FIELD[self])
        return [] if value is None else [value]

    def narrow(self, filter: MetaFilter, value: str) -> MetaFilter:
        """A copy of `filter` with this facet's field set to `value` (replacing any earlier value)."""
        if not value.strip():
            raise InvalidRequestError("a facet value must not be empty")
        return filter.model_copy(update={self._filter_field(): self._filter_value(value)})

    def _filter_field(self) -> str:
        return _FILTER_FIELD.get(self) or _META_FIELD[self]

    def _filter_value(self, value: str) -> object:
        match self:
            case Facet.KIND:
                return [_parse_enum(ItemKind, value, "an item kind")]
            case Facet.SOURCE:
                return [_parse_enum(SourceKind, value, "a source kind")]
            case Facet.TAG:
                return [value]
            case Facet.NAMESPACE:
                return Reach.exact(Namespace.parse(value))
            case _:
                return value


# Facets whose value is a plain metadata field of the same name in MemoryMeta and MetaFilter.
_META_FIELD = {
    Facet.WORKSPACE: "workspace",
    Facet.FOLDER: "folder",
    Facet.FILE_PATH: "file_path",
    Facet.LANGUAGE: "language",
    Facet.REPO: "repo",
    Facet.URL: "url",
    Facet.THREAD: "thread_id",
    Facet.AGENT: "agent_id",
}

# Facets whose filter field differs from the metadata field they read.
_FILTER_FIELD = {
    Facet.KIND: "kinds",
    Facet.SOURCE: "sources",
    Facet.SOURCE_ID: "source_id",
    Facet.TOOL_CALL: "tool_call",
    Facet.TAG: "tags_any",
    Facet.NAMESPACE: "reach",
}


def _parse_enum(enum: type[_E], value: str, what: str) -> _E:
    try:
        return enum(value)
    except ValueError:
        raise InvalidRequestError(f"`{value}` is not {what}") from None
