"""Items as rows: what `store` writes for an item, and the hits and items reads rebuild from rows."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from engines.chunking import Piece, passages
from engines.contract import (
    Document,
    Exported,
    Hit,
    Item,
    MemoryMeta,
    hit_of,
    parse_item,
)
from engines.local.embed import Vectors
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
    start: int
    stop: int
    pages: tuple[int, int] | None
    section: str | None


@dataclass(frozen=True, slots=True)
class PreparedItem:
    """Everything `store` writes for one item, computed on the caller's thread while the writer inserts (`feed`)."""

    id: str
    item: Item
    values: tuple[SQLValue, ...]
    tags: tuple[str, ...]
    passages: tuple[Passage, ...]


@dataclass(frozen=True, slots=True)
class Chunk:
    """Consecutive prepared items of one store call, written together, with the vectors computed for
    them before the write (by item id; an item without any has its passages queued for the backlog)."""

    items: list[PreparedItem]
    vectors: dict[str, Vectors]


def prepare(tenant: str, item_id: str, item: Item, wire: str, passage_chars: int) -> PreparedItem:
    """The rows of one item; `wire` is its wire JSON (`item.identified()` computes it with the id)."""
    return PreparedItem(
        id=item_id,
        item=item,
        values=_values(tenant, item_id, item, wire),
        tags=tuple(dict.fromkeys(item.meta.tags)),
        passages=tuple(cut_passages(item, passage_chars)),
    )


def _values(tenant: str, item_id: str, item: Item, wire: str) -> tuple[SQLValue, ...]:
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
        wire,
    )


def passage_source(item: Item) -> tuple[str, str]:
    """What an item's passages are cut from, and the heading each passage starts with.

    A document is cut from its body and every passage reads as the document would (title heading,
    then the piece), so a whole document's one passage is exactly its `render_text()`. The search
    index keeps no copy of the text: it is rebuilt from here to show a hit or to unindex it, so
    this must stay a pure function of the stored item.
    """
    if not isinstance(item, Document):
        return "", item.render_text()
    title = item.title
    return (f"# {title}\n\n" if title is not None and title.strip() else ""), item.body.value


def passage_text(item: Item, start: int, stop: int) -> str:
    heading, source = passage_source(item)
    return heading + source[start:stop]


def indexed_texts(rows: Iterable[tuple[int, int, int, str]]) -> Iterator[tuple[int, str]]:
    """(rowid, text) of passages given as (rowid, start, stop, item body): the text the keyword index
    holds for each. Rows of one item should come together: its body is decoded once for all of them."""
    body: str | None = None
    item: Item | None = None
    for rowid, start, stop, text in rows:
        if item is None or text != body:
            body, item = text, decode_item(text)
        yield rowid, passage_text(item, start, stop)


def cut_passages(item: Item, passage_chars: int) -> list[Passage]:
    """The item's search passages, cut at pages and headings (documents) or turns (conversations)."""
    heading, source = passage_source(item)
    return [_passage(heading, index, piece) for index, piece in enumerate(passages(source, passage_chars))]


def _passage(heading: str, index: int, piece: Piece) -> Passage:
    return Passage(heading + piece.text, index, piece.start, piece.end, piece.pages, piece.section)


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


def ranked_hit(item_id: str, body: str, span: tuple[int, int], tags: list[str], score: float) -> Hit:
    """A ranked read's hit: the item's metadata with its best passage as text."""
    item = decode_item(body)
    text = passage_text(item, *span)
    meta: MemoryMeta = item.meta
    if tags:
        meta = meta.model_copy(update={"tags": [*meta.tags, *tags]})
    return Hit(
        id=item_id,
        kind=item.item_kind,
        text=text,
        meta=meta,
        score=score,
        confidence=item.confidence_value(),
    )
