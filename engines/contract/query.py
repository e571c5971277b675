"""Requests and responses of recall, fetch, list, forget, export and erase (docs/spec/contract.md §12)."""

from __future__ import annotations

from datetime import date, datetime
from typing import ClassVar, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, model_validator

from engines.contract.enums import FetchMode, ItemKind
from engines.contract.errors import InvalidRequestError
from engines.contract.items import Conversation, Document, ItemId, Learning, StoreItem
from engines.contract.meta import MemoryMeta, MetaFilter
from engines.contract.namespace import Reach
from engines.contract.serialization import Text, WireModel, as_utc


def _check_limit(limit: int, operation: str) -> None:
    if limit < 1:
        raise InvalidRequestError(f"{operation} limit must be positive")


def _check_text(text: str, what: str) -> None:
    if not text.strip():
        raise InvalidRequestError(f"{what} must not be empty")


_Ranked = TypeVar("_Ranked", "Hit", "Citation")


class TimeHint(WireModel):
    """Days a question refers to, in an IANA zone (UTC when absent); ranks, never excludes."""

    from_: date = Field(alias="from")
    to: date
    zone: Text | None = None

    def check(self) -> None:
        if self.from_ > self.to:
            raise InvalidRequestError(f"refers_to runs backwards: {self.from_} is after {self.to}")
        self._zone()

    def _zone(self) -> ZoneInfo:
        name = self.zone or "UTC"
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidRequestError(f"refers_to zone `{name}` is not a known time zone") from None

    def matches(self, moment: datetime) -> bool:
        """Whether `moment`, seen in the hint's zone, falls on a day in `[from, to]`."""
        day = as_utc(moment).astimezone(self._zone()).date()
        return self.from_ <= day <= self.to

    def rank(self, hits: list[_Ranked]) -> list[_Ranked]:
        """Stable partition: hits observed on the hinted days first, then the rest, each in order."""
        inside = [h for h in hits if h.meta.observed_at is not None and self.matches(h.meta.observed_at)]
        chosen = {id(h) for h in inside}
        return inside + [h for h in hits if id(h) not in chosen]


class Hit(WireModel):
    """One stored item as a read returns it; `text` is the item's `render_text()`."""

    id: ItemId
    kind: ItemKind
    text: Text
    meta: MemoryMeta = Field(default_factory=MemoryMeta)
    score: float = 0.0
    confidence: float | None = None


class Citation(WireModel):
    """One item an answer drew on; its id resolves through `list`."""

    id: ItemId
    kind: ItemKind
    snippet: Text
    meta: MemoryMeta = Field(default_factory=MemoryMeta)
    score: float | None = None


class RecallRequest(WireModel):
    question: Text
    filter: MetaFilter = Field(default_factory=MetaFilter)
    limit: int
    instructions: Text | None = None
    refers_to: TimeHint | None = None

    def check(self) -> None:
        _check_text(self.question, "recall question")
        _check_limit(self.limit, "recall")
        if self.refers_to is not None:
            self.refers_to.check()


class RecallAnswer(WireModel):
    answer: Text
    citations: list[Citation] = Field(default_factory=list)
    model: Text | None = None


class FetchRequest(WireModel):
    """Ranked raw retrieval. `check()` does not look at the mode: the engine's `ensure_mode` does."""

    query: Text
    mode: FetchMode
    filter: MetaFilter = Field(default_factory=MetaFilter)
    limit: int
    cursor: Text | None = None
    refers_to: TimeHint | None = None

    def check(self) -> None:
        _check_text(self.query, "fetch query")
        _check_limit(self.limit, "fetch")
        if self.refers_to is not None:
            self.refers_to.check()


class FetchPage(WireModel):
    hits: list[Hit] = Field(default_factory=list)
    next_cursor: Text | None = None


class ListRequest(WireModel):
    filter: MetaFilter = Field(default_factory=MetaFilter)
    limit: int
    cursor: Text | None = None

    def check(self) -> None:
        _check_limit(self.limit, "list")


class ListPage(WireModel):
    items: list[Hit] = Field(default_factory=list)
    next_cursor: Text | None = None


class ForgetTarget(WireModel):
    """What to forget: ids (reaching every node, sandboxes included) or a non-empty filter."""

    ids: list[ItemId] | None = None
    filter: MetaFilter | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ForgetTarget:
        if (self.ids is None) == (self.filter is None):
            raise ValueError("a forget target holds exactly one of ids or filter")
        return self

    @classmethod
    def by_ids(cls, ids: list[ItemId]) -> ForgetTarget:
        return cls(ids=list(ids))

    @classmethod
    def by_filter(cls, filter: MetaFilter) -> ForgetTarget:
        return cls(filter=filter)

    def check(self) -> None:
        if self.ids is not None and not self.ids:
            raise InvalidRequestError("forget needs at least one id")
        if self.filter is not None and self.filter.is_empty():
            raise InvalidRequestError("forget refuses an empty filter, which would mean everything")


class ForgetReport(WireModel):
    """`forgotten` counts only items actually removed."""

    forgotten: int


class Exported(WireModel):
    id: ItemId
    item: StoreItem


class ExportPage(WireModel):
    """Whole items for moving memory; an item held only in part is named in `incomplete`."""

    wire_omit_empty: ClassVar[frozenset[str]] = frozenset({"incomplete"})

    items: list[Exported] = Field(default_factory=list)
    incomplete: list[ItemId] = Field(default_factory=list)
    next_cursor: Text | None = None


class EraseRequest(WireModel):
    """Delete for good every item of `kinds` (all when empty) at `reach.at` and, with descendants, below."""

    wire_omit_empty: ClassVar[frozenset[str]] = frozenset({"kinds"})

    reach: Reach
    kinds: list[ItemKind] = Field(default_factory=list)
    whole_tree: bool = False

    def is_whole_tree(self) -> bool:
        """The root with its descendants and every kind: everything the engine holds."""
        every_kind = not self.kinds or set(self.kinds) >= set(ItemKind)
        return self.reach.at.is_root and self.reach.descendants and every_kind

    def check(self) -> None:
        if self.is_whole_tree() and not self.whole_tree:
            raise InvalidRequestError("erasing the whole tree needs whole_tree: true")


class EraseReport(WireModel):
    wire_omit_empty: ClassVar[frozenset[str]] = frozenset({"receipts"})

    erased_scopes: int
    receipts: list[Text] = Field(default_factory=list)


def hit_of(item_id: ItemId, item: Document | Conversation | Learning, score: float = 0.0) -> Hit:
    """The `Hit` a read returns for a stored item."""
    return Hit(
        id=item_id,
        kind=item.item_kind,
        text=item.render_text(),
        meta=item.meta,
        score=score,
        confidence=item.confidence_value(),
    )
