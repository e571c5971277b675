"""Bounding item size: documents in parts, conversations in windows of turns."""

from __future__ import annotations

from engines.contract import Conversation, Document, MemoryMeta, Role, Turn, TurnRange
from pipeline.chunk import split_document, window_conversation


def test_a_document_that_fits_is_kept_as_is() -> None:
    doc = Document.from_text("short", title="T")
    assert split_document(doc, max_chars=100) == [doc]


def test_a_big_document_is_cut_at_page_breaks_into_titled_tagged_parts() -> None:
    pages = [f"page {n} " + "x" * 80 for n in range(1, 7)]
    doc = Document.from_text("\f".join(pages), title="Report", meta=MemoryMeta(tags=["work"]))
    parts = split_document(doc, max_chars=200)
    assert len(parts) == 3
    assert [p.title for p in parts] == ["Report (part 1/3)", "Report (part 2/3)", "Report (part 3/3)"]
    assert [p.meta.tags for p in parts] == [["work", f"part:{i}/3"] for i in (1, 2, 3)]
    assert "".join(p.body.value for p in parts) == doc.body.value
    assert all(len(p.body.value) <= 200 for p in parts)
    assert len({p.fingerprint() for p in parts}) == 3


def test_an_untitled_big_document_gets_a_part_title() -> None:
    parts = split_document(Document.from_text("# A\n" + "a" * 50 + "\n# B\n" + "b" * 50), max_chars=60)
    assert [p.title for p in parts] == ["Untitled (part 1/2)", "Untitled (part 2/2)"]


def _conversation(count: int, size: int = 5) -> Conversation:
    turns = [Turn(role=Role.USER if n % 2 == 0 else Role.ASSISTANT, text=f"{n:0{size}d}") for n in range(count)]
    return Conversation(turns=turns, meta=MemoryMeta(thread_id="t"))


def test_a_long_conversation_becomes_windows_with_turn_ranges() -> None:
    windows = window_conversation(_conversation(120), max_turns=50)
    assert [len(w.turns) for w in windows] == [50, 50, 20]
    assert [w.meta.turns for w in windows] == [
        TurnRange(first=0, last=49),
        TurnRange(first=50, last=99),
        TurnRange(first=100, last=119),
    ]
    assert [t for w in windows for t in w.turns] == _conversation(120).turns


def test_windows_also_respect_the_character_limit_and_keep_a_huge_turn_whole() -> None:
    convo = _conversation(6, size=10)
    windows = window_conversation(convo, max_turns=50, max_chars=25)
    assert [len(w.turns) for w in windows] == [2, 2, 2]
    huge = Conversation(turns=[Turn(role=Role.USER, text="x" * 100), Turn(role=Role.USER, text="y")])
    assert [len(w.turns) for w in window_conversation(huge, max_chars=10)] == [1, 1]


def test_windows_count_from_an_existing_turn_range() -> None:
    convo = _conversation(60).model_copy(update={"meta": MemoryMeta(turns=TurnRange(first=100, last=159))})
    assert [w.meta.turns for w in window_conversation(convo, max_turns=40)] == [
        TurnRange(first=100, last=139),
        TurnRange(first=140, last=159),
    ]


def test_a_short_conversation_is_kept_as_is() -> None:
    convo = _conversation(3)
    assert window_conversation(convo) == [convo]
