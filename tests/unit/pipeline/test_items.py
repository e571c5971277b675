"""From a unit's content and origin to its items: documents and conversations, scrubbed and bounded."""

from __future__ import annotations

import hashlib

import pytest

from engines.contract import (
    Conversation,
    Document,
    InvalidRequestError,
    MemoryMeta,
    Namespace,
    Role,
    SourceKind,
    SourceRef,
    Turn,
    TurnRange,
)
from pipeline.convert import RawDocument, convert_document
from pipeline.items import ItemRules, assemble_items, content_digest

ORIGIN = MemoryMeta(
    namespace=Namespace.parse("team:acme"),
    workspace="/w",
    folder="/w/docs",
    file_path="/w/docs/run.py",
    source=SourceRef(kind=SourceKind.FOLDER, id="notes"),
)
SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


def test_a_converted_document_keeps_its_origin_and_gains_title_mime_and_language() -> None:
    converted = convert_document(RawDocument(data=b"print('hi')\n", filename="docs/run.py"))
    (item,) = assemble_items(converted, ORIGIN, ItemRules()).items
    assert isinstance(item, Document)
    assert (item.title, item.mime, item.meta.language) == ("run.py", "text/x-source", "python")
    assert item.meta.model_copy(update={"language": None}) == ORIGIN


def test_a_document_is_scrubbed_before_it_is_cut_into_parts() -> None:
    text = "\f".join(f"page {n} {SECRET} " + "x" * 60 for n in range(4))
    converted = convert_document(RawDocument(data=text.encode(), filename="notes.md"))
    assembled = assemble_items(converted, ORIGIN, ItemRules(item_max_chars=120))
    assert len(assembled.items) > 1
    assert all(SECRET not in item.render_text() for item in assembled.items)
    assert assembled.report.blocked_secret_hits + assembled.report.text_redactions >= 4


def test_turns_become_a_scrubbed_conversation_in_windows() -> None:
    turns = [Turn(role=Role.USER if n % 2 else Role.ASSISTANT, text=f"turn {n}") for n in range(5)]
    turns[1] = Turn(role=Role.USER, text=f"my token is {SECRET}")
    origin = ORIGIN.model_copy(update={"thread_id": "t1", "file_path": None, "folder": None})
    items = assemble_items(turns, origin, ItemRules(window_turns=2)).items
    assert [type(i) for i in items] == [Conversation] * 3
    assert [i.meta.turns for i in items] == [
        TurnRange(first=0, last=1),
        TurnRange(first=2, last=3),
        TurnRange(first=4, last=4),
    ]
    assert all(i.meta.thread_id == "t1" for i in items)
    assert SECRET not in "".join(i.render_text() for i in items)


def test_turns_without_text_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="at least one turn"):
        assemble_items([], ORIGIN, ItemRules())


def test_the_digest_is_of_the_bytes_or_of_the_turns() -> None:
    assert content_digest(b"abc") == hashlib.sha256(b"abc").hexdigest()
    one = [Turn(role=Role.USER, text="hi")]
    assert content_digest(one) == content_digest([Turn(role=Role.USER, text="hi")])
    assert content_digest(one) != content_digest([Turn(role=Role.ASSISTANT, text="hi")])
