"""From a unit's content and origin to the `StoreItem`s it becomes, for every source kind.

A unit's content is a converted document (a file, a page, a blob after `pipeline.convert`) or the turns of a
conversation a reader already structured. Either way its items carry the unit's origin metadata, are scrubbed
(`pipeline.scrub`), then bounded in size (`pipeline.chunk`): a huge document becomes parts, a long
conversation windows of turns. Scrubbing comes before the item's id is computed, so an id never depends on
a secret.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from engines.contract import Conversation, Document, DocumentBody, MemoryMeta, StoreItem, Turn
from pipeline.chunk import DEFAULT_ITEM_MAX_CHARS, DEFAULT_WINDOW_TURNS, split_document, window_conversation
from pipeline.convert import ConvertedDocument
from pipeline.scrub import Policy, SanitizationReport, scrub_item

Content = ConvertedDocument | Sequence[Turn]
"""What a unit's items are made of: a converted document, or a conversation's turns."""


@dataclass(frozen=True)
class ItemRules:
    """How items are made: the largest item (characters), the turns in a conversation window, the scrub policy."""

    item_max_chars: int = DEFAULT_ITEM_MAX_CHARS
    window_turns: int = DEFAULT_WINDOW_TURNS
    scrub_policy: Policy = field(default_factory=Policy)


@dataclass(frozen=True)
class Assembled:
    """A unit's items, in order, and what scrubbing them found."""

    items: list[StoreItem]
    report: SanitizationReport


def content_digest(content: bytes | Sequence[Turn]) -> str:
    """The hash a manifest keeps of what a unit held (SHA-256, lowercase hex): of its bytes, or of its turns'
    wire form. Equal digests mean the unit's items would be the same, so a touched unit is not redone."""
    if isinstance(content, bytes):
        return hashlib.sha256(content).hexdigest()
    wire = json.dumps([turn.wire_dict() for turn in content], ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(wire.encode("utf-8")).hexdigest()


def assemble_items(content: Content, origin: MemoryMeta, rules: ItemRules) -> Assembled:
    """The scrubbed, size-bounded items of one unit.

    A document gets its title, MIME type and language from the conversion; a conversation must have turns
    with text (`InvalidRequestError` otherwise). `origin` is the unit's metadata as its reader gave it.
    """
    if isinstance(content, ConvertedDocument):
        scrubbed = scrub_item(document_item(content, origin), rules.scrub_policy)
        clean = scrubbed.value
        parts = split_document(clean, rules.item_max_chars) if isinstance(clean, Document) else [clean]
        return Assembled(list(parts), scrubbed.report)
    conversation = Conversation(turns=list(content), meta=origin)
    conversation.check()
    scrubbed = scrub_item(conversation, rules.scrub_policy)
    clean = scrubbed.value
    if isinstance(clean, Conversation):
        return Assembled(list(window_conversation(clean, rules.window_turns, rules.item_max_chars)), scrubbed.report)
    return Assembled([clean], scrubbed.report)


def document_item(converted: ConvertedDocument, origin: MemoryMeta) -> Document:
    """The document a converted unit becomes; a blank title is no title."""
    title = converted.title
    meta = origin if converted.language is None else origin.model_copy(update={"language": converted.language})
    return Document(
        title=title if title and title.strip() else None,
        body=DocumentBody.of_text(converted.markdown),
        mime=converted.format.mime,
        meta=meta,
    )
