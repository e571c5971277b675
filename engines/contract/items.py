"""The three kinds of item a host stores, their text form and their id.

An item's id is `fingerprint()`: a hash of its canonical JSON without `meta.observed_at`, so an
identical retry or an unchanged file read again is a replay, not a duplicate (docs/spec/contract.md §5, §6).
"""

from __future__ import annotations

import hashlib
import json
from abc import abstractmethod
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

from pydantic import Field, TypeAdapter, model_validator

from engines.contract.enums import ItemKind, LearningKind, Role
from engines.contract.errors import InvalidRequestError
from engines.contract.meta import MemoryMeta, ToolCallRef
from engines.contract.number_forms import format_f32
from engines.contract.serialization import Instant, Text, WireModel, format_instant

__all__ = [
    "BaseItem",
    "Conversation",
    "Document",
    "DocumentBody",
    "ItemId",
    "Learning",
    "StoreItem",
    "StoreReceipt",
    "Turn",
    "format_f32",
    "format_instant",
    "parse_item",
]

ItemId = str
"""An item's id: 40 lowercase hex digits when the contract computes it; any non-blank string in requests."""


# One encoder for every item: `json.dumps` with options builds a new one per call, which cost as much as
# encoding a short item. Cycles cannot occur in wire dicts, so the check for them is skipped too.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def _canonical_json(value: object) -> str:
    return _ENCODER.encode(value)


def _digest(canonical: str) -> ItemId:
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:40]


class _Raw(str):
    """A JSON fragment written as is."""


def _canonical_fragment(value: object) -> str:
    return value if isinstance(value, _Raw) else _canonical_json(value)


class DocumentBody(WireModel):
    """A document's body: text, or a URI a source reader resolves before store. Exactly one is set."""

    text: Text | None = None
    uri: Text | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> DocumentBody:
        if (self.text is None) == (self.uri is None):
            raise ValueError("a document body holds exactly one of text or uri")
        return self

    @classmethod
    def of_text(cls, text: str) -> DocumentBody:
        return cls(text=text)

    @classmethod
    def of_uri(cls, uri: str) -> DocumentBody:
        return cls(uri=uri)

    @property
    def is_uri(self) -> bool:
        return self.uri is not None

    @property
    def value(self) -> str:
        return self.uri if self.uri is not None else (self.text or "")

    def wire_dict(self) -> dict[str, str]:
        return {"uri": self.uri} if self.uri is not None else {"text": self.text or ""}


class Turn(WireModel):
    wire_omit_empty: ClassVar[frozenset[str]] = frozenset({"tool_calls"})

    role: Role
    text: Text
    at: Instant | None = None
    tool_calls: list[ToolCallRef] = Field(default_factory=list)

    def wire_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role.value, "text": self.text}
        if self.at is not None:
            out["at"] = format_instant(self.at)
        if self.tool_calls:
            out["tool_calls"] = [call.wire_dict() for call in self.tool_calls]
        return out

    def render(self) -> str:
        """`"{role}: {text}"`, then `" [tools: name (id), name]"` when the turn called tools."""
        line = f"{self.role.value}: {self.text}"
        if self.tool_calls:
            calls = ", ".join(c.name if c.id is None else f"{c.name} ({c.id})" for c in self.tool_calls)
            line += f" [tools: {calls}]"
        return line


class BaseItem(WireModel):
    """What every item offers. Callers never mutate a stored item: `model_copy(update=...)` instead."""

    if TYPE_CHECKING:
        # Each subclass declares `meta` last, so that it is written last on the wire.
        meta: MemoryMeta

    @property
    @abstractmethod
    def item_kind(self) -> ItemKind: ...

    @abstractmethod
    def check(self) -> None:
        """Raise InvalidRequestError when the item cannot be stored."""

    @abstractmethod
    def render_text(self) -> str:
        """The item's text form; every `Hit.text` is exactly this."""

    @abstractmethod
    def wire_dict(self, observed: bool = True) -> dict[str, Any]:
        """`model_dump(mode="json")`, built by hand for speed; without `meta.observed_at` when
        `observed` is false."""

    def wire_json(self) -> str:
        """The item's compact wire JSON (what `parse_item` reads back)."""
        return _canonical_json(self.wire_dict())

    def canonical_json(self) -> str:
        """The compact JSON the id hashes: wire form, fixed key order, `observed_at` left out."""
        return self._canonical_text(self.wire_dict(observed=False))

    def _canonical_text(self, fields: dict[str, Any]) -> str:
        return _canonical_json(fields)

    # Whether the canonical JSON is the wire JSON less `observed_at` (a learning re-writes its
    # confidence for the hash, so it is not).
    _canonical_is_wire: ClassVar[bool] = True

    def identified(self) -> tuple[ItemId, str]:
        """`(fingerprint(), wire_json())`, serialising the item once where it can.

        A stored item's JSON is mostly its text, so a second full serialisation was a tenth of a
        store's cost. `meta` is the last key of every item and `observed_at` the last key of its
        meta unless `derive` is set, so the wire JSON is the canonical one with it appended.
        """
        fields = self.wire_dict(observed=False)
        canonical = self._canonical_text(fields)
        item_id = _digest(canonical)
        observed = self.meta.observed_at
        if not self._canonical_is_wire or (observed is not None and self.meta.derive is not None):
            return item_id, self.wire_json()
        if observed is None:
            return item_id, canonical
        return item_id, f'{canonical[:-2]},"observed_at":{_canonical_json(format_instant(observed))}}}}}'

    def canonical_bytes(self) -> bytes:
        return self.canonical_json().encode("utf-8")

    def fingerprint(self) -> ItemId:
        """The item's id: the first 20 bytes of the SHA-256 of `canonical_bytes()`, in hex."""
        return _digest(self.canonical_json())

    def confidence_value(self) -> float | None:
        """A learning's confidence; None for other kinds."""
        return None


class Document(BaseItem):
    type: Literal["document"] = "document"
    title: Text | None = None
    body: DocumentBody
    mime: Text | None = None
    meta: MemoryMeta = Field(default_factory=MemoryMeta)

    @property
    def item_kind(self) -> ItemKind:
        return ItemKind.DOCUMENT

    @classmethod
    def from_text(
        cls, text: str, meta: MemoryMeta | None = None, title: str | None = None, mime: str | None = None
    ) -> Document:
        return cls(title=title, body=DocumentBody.of_text(text), mime=mime, meta=meta or MemoryMeta())

    def check(self) -> None:
        if self.body.is_uri:
            raise InvalidRequestError("document body is an unresolved uri; resolve it through a source first")
        if not self.body.value.strip():
            raise InvalidRequestError("document body must not be empty")

    def wire_dict(self, observed: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "document"}
        if self.title is not None:
            out["title"] = self.title
        out["body"] = self.body.wire_dict()
        if self.mime is not None:
            out["mime"] = self.mime
        out["meta"] = self.meta.wire_dict(observed)
        return out

    def render_text(self) -> str:
        if self.title is not None and self.title.strip():
            return f"# {self.title}\n\n{self.body.value}"
        return self.body.value


class Conversation(BaseItem):
    type: Literal["conversation"] = "conversation"
    turns: list[Turn]
    meta: MemoryMeta = Field(default_factory=MemoryMeta)

    @property
    def item_kind(self) -> ItemKind:
        return ItemKind.CONVERSATION

    def check(self) -> None:
        if not self.turns:
            raise InvalidRequestError("conversation must have at least one turn")
        if any(not turn.text.strip() for turn in self.turns):
            raise InvalidRequestError("conversation turns must not be empty")

    def wire_dict(self, observed: bool = True) -> dict[str, Any]:
        return {
            "type": "conversation",
            "turns": [turn.wire_dict() for turn in self.turns],
            "meta": self.meta.wire_dict(observed),
        }

    def render_text(self) -> str:
        return "\n".join(turn.render() for turn in self.turns)


class Learning(BaseItem):
    _canonical_is_wire: ClassVar[bool] = False

    type: Literal["learning"] = "learning"
    text: Text
    kind: LearningKind
    confidence: float
    evidence: Text | None = None
    meta: MemoryMeta = Field(default_factory=MemoryMeta)

    @property
    def item_kind(self) -> ItemKind:
        return ItemKind.LEARNING

    def check(self) -> None:
        if not self.text.strip():
            raise InvalidRequestError("learning text must not be empty")
        # Written as a negated range so NaN fails too.
        if not 0.0 <= self.confidence <= 1.0:
            raise InvalidRequestError(f"learning confidence {self.confidence!r} is outside 0.0..=1.0")

    def render_text(self) -> str:
        return self.text

    def confidence_value(self) -> float | None:
        return self.confidence

    def wire_dict(self, observed: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "learning", "text": self.text, "kind": self.kind.value}
        out["confidence"] = self.confidence
        if self.evidence is not None:
            out["evidence"] = self.evidence
        out["meta"] = self.meta.wire_dict(observed)
        return out

    def _canonical_text(self, fields: dict[str, Any]) -> str:
        # The confidence is hashed in its float32 shortest form, which json.dumps cannot write.
        fields = {**fields, "confidence": _Raw(format_f32(self.confidence))}
        parts = [f"{_canonical_json(key)}:{_canonical_fragment(value)}" for key, value in fields.items()]
        return "{" + ",".join(parts) + "}"


StoreItem = Annotated[Document | Conversation | Learning, Field(discriminator="type")]
"""One item to store, tagged on the wire by `"type"`."""

_ITEM_ADAPTER: TypeAdapter[Document | Conversation | Learning] = TypeAdapter(StoreItem)


def parse_item(obj: dict[str, Any] | str | bytes) -> Document | Conversation | Learning:
    """Parse an item's wire JSON (text or an already decoded object)."""
    if isinstance(obj, str | bytes):
        return _ITEM_ADAPTER.validate_json(obj)
    return _ITEM_ADAPTER.validate_python(obj)


class StoreReceipt(WireModel):
    """The outcome of one store: the item's id, and whether it was already held."""

    id: ItemId
    replayed: bool
