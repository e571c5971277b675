"""Bounding item size: a huge document becomes several part documents, a long conversation windows.

Engines index long items as passages themselves; this stage only keeps any one item under the
item limit (a setting), so one 300 MB export never becomes a single 300 MB item.
"""

from __future__ import annotations

from engines.chunking import passages
from engines.contract import Conversation, Document, DocumentBody, TurnRange

DEFAULT_ITEM_MAX_CHARS = 8 * 1024 * 1024
DEFAULT_WINDOW_TURNS = 50


def split_document(doc: Document, max_chars: int = DEFAULT_ITEM_MAX_CHARS) -> list[Document]:
    """The document itself when it fits; else parts cut at page breaks and headings, in order.

    Part i of n is titled "<title> (part i/n)" and tagged `part:i/n`, so every part is found,
    listed and forgotten on its own, and they read back in order.
    """
    body = doc.body.value
    if doc.body.is_uri or len(body) <= max_chars:
        return [doc]
    pieces = passages(body, max_chars)
    count = len(pieces)
    base = doc.title if doc.title and doc.title.strip() else "Untitled"
    return [
        doc.model_copy(
            update={
                "title": f"{base} (part {index}/{count})",
                "body": DocumentBody.of_text(piece.text),
                "meta": doc.meta.model_copy(update={"tags": [*doc.meta.tags, f"part:{index}/{count}"]}),
            }
        )
        for index, piece in enumerate(pieces, start=1)
    ]


def window_conversation(
    conversation: Conversation, max_turns: int = DEFAULT_WINDOW_TURNS, max_chars: int = DEFAULT_ITEM_MAX_CHARS
) -> list[Conversation]:
    """The conversation itself when it fits; else consecutive windows of whole turns.

    A window holds at most `max_turns` turns and `max_chars` characters (a single longer turn is
    a window of its own) and carries `meta.turns` = its zero-based first and last turn index,
    counted from the start of the whole conversation.
    """
    turns = conversation.turns
    if len(turns) <= max_turns and sum(len(t.text) for t in turns) <= max_chars:
        return [conversation]
    first = conversation.meta.turns.first if conversation.meta.turns else 0
    windows: list[Conversation] = []
    start = 0
    while start < len(turns):
        stop = _window_end(conversation, start, max_turns, max_chars)
        meta = conversation.meta.model_copy(update={"turns": TurnRange(first=first + start, last=first + stop - 1)})
        windows.append(conversation.model_copy(update={"turns": turns[start:stop], "meta": meta}))
        start = stop
    return windows


def _window_end(conversation: Conversation, start: int, max_turns: int, max_chars: int) -> int:
    size = 0
    stop = start
    for turn in conversation.turns[start : start + max_turns]:
        if stop > start and size + len(turn.text) > max_chars:
            break
        size += len(turn.text)
        stop += 1
    return stop
