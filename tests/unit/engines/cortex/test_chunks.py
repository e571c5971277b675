"""Splitting large documents: the spec's two worked examples, and pieces that always join back to the body."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engines.contract import Document, DocumentBody, InvalidRequestError, Learning, LearningKind, MemoryMeta, SourceKind
from engines.cortex.chunks import DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES, escaped_len, split
from engines.cortex.envelope import decode, encode_item

EXAMPLE_A = "Preface text.\n\f# Alpha\n" + "a" * 30 + "\n\n" + "b" * 30 + "\n## Beta\nshort beta\n\f\f  \n" + "c" * 50


def test_worked_example_a() -> None:
    assert (len(EXAMPLE_A), escaped_len(EXAMPLE_A)) == (160, 171)
    pieces = split(EXAMPLE_A, overhead=20, target=60, limit=200)
    assert [(p.text, escaped_len(p.text), p.pages, p.section) for p in pieces] == [
        ("Preface text.\n\f# Alpha\n", 26, (1, 2), None),
        ("a" * 30 + "\n\n", 34, (2, 2), "Alpha"),
        ("b" * 30 + "\n", 32, (2, 2), "Alpha"),
        ("## Beta\nshort beta\n\f\f  \n", 29, (2, 4), "Beta"),
        ("c" * 40, 40, (4, 4), "Beta"),
        ("c" * 10, 10, (4, 4), "Beta"),
    ]


def _handbook(body: str) -> Document:
    meta = MemoryMeta.from_source(SourceKind.FILE, "handbook")
    return Document(title="Handbook", body=DocumentBody.of_text(body), mime="text/markdown", meta=meta)


def test_worked_example_b_pages() -> None:
    line = "x" * 99 + "\n"
    body = "\f".join([line * 1500, line * 1500, line * 200])
    assert (len(body), escaped_len(body)) == (320_002, 323_204)
    doc = _handbook(body)
    events = encode_item(doc, doc.fingerprint(), "app:tinymemory/app:documents")
    envelopes = [decode(e.text, e.body["context"]["labels"]) for e in events]
    assert [e.chunk if e else None for e in envelopes] == [
        {"index": 0, "count": 2, "pages": [1, 1]},
        {"index": 1, "count": 2, "pages": [2, 3]},
    ]
    assert [escaped_len(e.text) for e in events] == [151_500, 171_704]
    readable = [[label for label in e.body["context"]["labels"] if not label.startswith("tm:")] for e in events]
    assert readable == [["kind:document", "page:1"], ["kind:document", "page:2-3"]]
    assert "".join(e.text for e in events) == body
    # The probe envelope is 255 bytes; with the section reserve, 1007, so each piece packs 261,137 bytes.
    probe = split(body, 1007, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    assert [p.pages for p in probe] == [(1, 1), (2, 3)]


def test_worked_example_b_sections() -> None:
    line = "x" * 99 + "\n"
    body = "".join(f"# {title}\n" + line * 2000 for title in ("One", "Two", "Three"))
    pieces = split(body, 1007, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    assert [(escaped_len(p.text), p.section, p.pages) for p in pieces] == [
        (202_007, "One", None),
        (202_007, "Two", None),
        (202_009, "Three", None),
    ]


def test_a_small_document_is_one_event_without_a_chunk() -> None:
    doc = _handbook("short body")
    [event] = encode_item(doc, doc.fingerprint(), "app:tinymemory/app:documents")
    envelope = decode(event.text, event.body["context"]["labels"])
    assert envelope is not None and envelope.chunk is None and envelope.text == "short body"


def test_one_long_line_is_cut_between_characters() -> None:
    pieces = split("é" * 300_000, 1007, DOCUMENT_CHUNK_TARGET_BYTES, MAX_EVENT_TEXT_BYTES)
    assert len(pieces) == 3 and "".join(p.text for p in pieces) == "é" * 300_000
    assert all(escaped_len(p.text) <= DOCUMENT_CHUNK_TARGET_BYTES - 1007 for p in pieces)


@settings(max_examples=60, deadline=None)
@given(
    st.text(alphabet=st.sampled_from('ab \n\f#é"\\\t\x01'), min_size=1, max_size=400),
    st.integers(min_value=0, max_value=80),
    st.integers(min_value=0, max_value=120),
)
def test_pieces_join_back_to_the_body_and_fit(text: str, overhead: int, target: int) -> None:
    limit = 200
    pieces = split(text, overhead, target, limit)
    assert "".join(p.text for p in pieces) == text
    room = max(limit - overhead, 1)
    cap = room if target == 0 else min(max(target - overhead, 1), room)
    # Only a single character wider than the room may exceed it.
    assert all(escaped_len(p.text) <= cap or len(p.text) == 1 for p in pieces)
    assert all(p.pages is None for p in pieces) == ("\f" not in text)


def test_a_learning_over_768_kib_is_refused_before_anything_is_sent() -> None:
    learning = Learning(text="x" * (MAX_EVENT_TEXT_BYTES + 1), kind=LearningKind.FACT, confidence=0.5)
    with pytest.raises(InvalidRequestError) as caught:
        encode_item(learning, learning.fingerprint(), "app:tinymemory/app:learnings")
    assert caught.value.message.startswith("a learning event would be 786")
    assert "at most 786432 are sent" in caught.value.message


def test_a_piece_never_passes_the_event_limit() -> None:
    body = ("word " * 50 + "\n") * 40_000
    doc = Document.from_text(body)
    events = encode_item(doc, doc.fingerprint(), "app:tinymemory/app:documents")
    assert len(events) > 1
    for event in events:
        assert escaped_len(event.text) <= DOCUMENT_CHUNK_TARGET_BYTES
        v2 = {**json.loads("{}"), "text": event.text}
        assert len(json.dumps(v2, ensure_ascii=False).encode()) < MAX_EVENT_TEXT_BYTES
