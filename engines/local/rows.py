"""Items as rows: what `store` writes for an item, and the hits and items reads rebuild from rows."""

from __future__ import annotations

from dataclasses import dataclass

from engines.chunking import Piece, passages
from engines.contract import (
    Document,
    Exported,
    Hit,
    Item,
    ItemKind,
    MemoryMeta,
    hit_of,
    parse_item,
)
from engines.local.where import SQLValue, micros, ns_key

ITEM_COLUMNS = (
    "tenant, id, kind, ns, workspace, folder, file_path, language, repo, revision, url, thread_id, "
    "turns_first, turns_last, agent_id, tool_call, source_kind, source_id, observed_at, confidence, title, body"
)
ITEM_MARKS = ",".join("?" * len(ITEM_COLUMNS.split(",")))


@dataclass(frozen=True, slots=True)
class Passage:
    """One searchable piece of an item: the text a ranked read returns for it, and where it lies."""

    text: str
    piece: int
    pages: tuple[int, int] | None
    section: str | None


@dataclass(frozen=True, slots=True)
class PreparedItem:
    """Everything `store` writes for one item, computed before the write transaction opens."""

    id: str
    item: Item
    values: tuple[SQLValue, ...]
    tags: tuple[str, ...]
    passages: tuple[Passage, ...]


def prepare(tenant: str, item_id: str, item: Item, passage_chars: int) -> PreparedItem:
    return PreparedItem(
        id=item_id,
        item=item,
        values=_values(tenant, item_id, item),
        tags=tuple(dict.fromkeys(item.meta.tags)),
        passages=tuple(cut_passages(item, passage_chars)),
    )


def _values(tenant: str, item_id: str, item: Item) -> tuple[SQLValue, ...]:
    meta = item.meta
    turns = meta.turns
    return (
        tenant,
        item_id,
        item.item_kind.value,
        ns_key(meta.namespace),
        meta.workspace,
        meta.folder,
        meta.file_path,
        meta.language,
        meta.repo,
        meta.commit,
        meta.url,
        meta.thread_id,
        turns.first if turns else None,
        turns.last if turns else None,
        meta.agent_id,
        meta.tool_call.name if meta.tool_call else None,
        meta.source.kind.value,
        meta.source.id,
        micros(meta.observed_at) if meta.observed_at else None,
        item.confidence_value(),
        item.title if isinstance(item, Document) else None,
        item.model_dump_json(),
    )


def cut_passages(item: Item, passage_chars: int) -> list[Passage]:
    """The item's search passages. A document is cut at pages and headings; each passage reads as
    the document would (title heading, then the piece), so a whole document's one passage is
    exactly its `render_text()`."""
    if not isinstance(item, Document):
        return _from_pieces(passages(item.render_text(), passage_chars), heading="")
    title = item.title
    heading = f"# {title}\n\n" if title is not None and title.strip() else ""
    return _from_pieces(passages(item.body.value, passage_chars), heading)


def _from_pieces(pieces: list[Piece], heading: str) -> list[Passage]:
    return [Passage(heading + p.text, index, p.pages, p.section) for index, p in enumerate(pieces)]


def passage_tags(pages: tuple[int, int] | None, section: str | None) -> list[str]:
    """Read-side tags naming where a passage of a split document lies (not part of identity)."""
    tags = []
    if pages is not None:
        first, last = pages
        tags.append(f"page:{first}" if first == last else f"page:{first}-{last}")
    if section is not None:
        tags.append(f"section:{section}")
    return tags


def decode_item(body: str) -> Item:
    """The stored item, exactly as it was first stored."""
    return parse_item(body)


def listed_hit(item_id: str, body: str) -> Hit:
    return hit_of(item_id, decode_item(body))


def exported(item_id: str, body: str) -> Exported:
    return Exported(id=item_id, item=decode_item(body))


def ranked_hit(item_id: str, body: str, passage_text: str, tags: list[str], score: float) -> Hit:
    """A ranked read's hit: the item's metadata with its best passage as text."""
    item = decode_item(body)
    meta: MemoryMeta = item.meta
    if tags:
        meta = meta.model_copy(update={"tags": [*meta.tags, *tags]})
    return Hit(
        id=item_id,
        kind=item.item_kind,
        text=passage_text,
        meta=meta,
        score=score,
        confidence=item.confidence_value() if item.item_kind is ItemKind.LEARNING else None,
    )
