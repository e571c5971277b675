"""Item ids: the spec's worked examples byte for byte, and what identity includes and leaves out."""

from __future__ import annotations

import json
import struct
from datetime import UTC, datetime

import pytest

from engines.contract import (
    Conversation,
    Document,
    Learning,
    MemoryMeta,
    Namespace,
    format_f32,
    format_instant,
    parse_item,
)

# docs/spec/contract.md §6.4: (input, canonical bytes, byte count, id)
WORKED_EXAMPLES = [
    (
        '{"type":"learning","text":"prefers tabs over spaces","kind":"preference","confidence":0.8,'
        '"evidence":"said so in review 12","meta":{"source":{"kind":"agent"},"tags":["style"],'
        '"observed_at":"2026-10-04T09:30:00Z"}}',
        '{"type":"learning","text":"prefers tabs over spaces","kind":"preference","confidence":0.8,'
        '"evidence":"said so in review 12","meta":{"source":{"kind":"agent"},"tags":["style"]}}',
        176,
        "13fafe0dcbabfc5e301412a72dcedfd8a0411259",
    ),
    (
        '{"type":"conversation","turns":[{"role":"user","text":"Which port does the café API use?",'
        '"at":"2026-10-04T09:30:00.250Z"},{"role":"assistant","text":"8080 — see \\"config\\".",'
        '"tool_calls":[{"name":"read_config","id":"call_1"},{"name":"grep"}]}],'
        '"meta":{"namespace":"team:acme/agent:writer","thread_id":"thread-42","turns":{"first":0,"last":1},'
        '"source":{"kind":"conversation","id":"thread-42"},"observed_at":"2026-10-04T09:31:00Z"}}',
        '{"type":"conversation","turns":[{"role":"user","text":"Which port does the café API use?",'
        '"at":"2026-10-04T09:30:00.250Z"},{"role":"assistant","text":"8080 — see \\"config\\".",'
        '"tool_calls":[{"name":"read_config","id":"call_1"},{"name":"grep"}]}],'
        '"meta":{"namespace":"team:acme/agent:writer","thread_id":"thread-42","turns":{"first":0,"last":1},'
        '"source":{"kind":"conversation","id":"thread-42"}}}',
        397,
        "54145a6903a22cb0d37b96528cb1c68a17790889",
    ),
    (
        '{"type":"document","title":"Ownership","body":{"text":"# Rules\\n\\nEach value has one owner.\\t'
        'Moves transfer it."},"mime":"text/markdown","meta":{"workspace":"/home/ana/notes",'
        '"folder":"/home/ana/notes/rust","file_path":"/home/ana/notes/rust/ownership.md","language":"en",'
        '"source":{"kind":"folder","id":"notes"},"observed_at":"2026-10-04T09:30:00Z","derive":false}}',
        '{"type":"document","title":"Ownership","body":{"text":"# Rules\\n\\nEach value has one owner.\\t'
        'Moves transfer it."},"mime":"text/markdown","meta":{"workspace":"/home/ana/notes",'
        '"folder":"/home/ana/notes/rust","file_path":"/home/ana/notes/rust/ownership.md","language":"en",'
        '"source":{"kind":"folder","id":"notes"},"derive":false}}',
        327,
        "926bed00bbf6d987fa8b9faa68a71231b1531369",
    ),
]


@pytest.mark.parametrize(("wire", "canonical", "size", "item_id"), WORKED_EXAMPLES)
def test_worked_examples(wire: str, canonical: str, size: int, item_id: str) -> None:
    item = parse_item(wire)
    assert item.canonical_bytes() == canonical.encode("utf-8")
    assert len(item.canonical_bytes()) == size
    assert item.fingerprint() == item_id


@pytest.mark.parametrize(("wire", "canonical", "size", "item_id"), WORKED_EXAMPLES)
def test_observed_at_is_not_identity(wire: str, canonical: str, size: int, item_id: str) -> None:
    item = parse_item(wire)
    for moment in (None, datetime(1999, 1, 1, tzinfo=UTC), datetime(2030, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)):
        moved = item.model_copy(update={"meta": item.meta.model_copy(update={"observed_at": moment})})
        assert moved.fingerprint() == item_id


@pytest.mark.parametrize(("wire", "canonical", "size", "item_id"), WORKED_EXAMPLES)
def test_namespace_and_tags_are_identity(wire: str, canonical: str, size: int, item_id: str) -> None:
    item = parse_item(wire)
    placed = item.meta.model_copy(update={"namespace": Namespace.parse("agent:elsewhere")})
    tagged = item.meta.model_copy(update={"tags": [*item.meta.tags, "extra"]})
    for meta in (placed, tagged):
        assert item.model_copy(update={"meta": meta}).fingerprint() != item_id


def test_confidence_is_identity() -> None:
    item = parse_item(WORKED_EXAMPLES[0][0])
    assert isinstance(item, Learning)
    assert item.model_copy(update={"confidence": 0.81}).fingerprint() != WORKED_EXAMPLES[0][3]


def test_float32_widening_does_not_change_the_id() -> None:
    item = parse_item(WORKED_EXAMPLES[0][0])
    widened = struct.unpack("<f", struct.pack("<f", 0.8))[0]
    assert widened != 0.8
    assert item.model_copy(update={"confidence": widened}).fingerprint() == WORKED_EXAMPLES[0][3]


def test_ids_are_forty_lowercase_hex_digits() -> None:
    item_id = Document.from_text("x").fingerprint()
    assert len(item_id) == 40
    assert item_id == item_id.lower()
    int(item_id, 16)


def test_canonical_escapes_control_characters_like_serde() -> None:
    doc = Document.from_text('a\x00\x01\x08\x0c\x1f\x7f/\u2028é"\\')
    body = json.loads(doc.canonical_json())["body"]["text"]
    assert body == doc.body.text
    raw = doc.canonical_json()
    assert '\\u0000\\u0001\\b\\f\\u001f\x7f/\u2028é\\"\\\\' in raw


def test_an_empty_string_is_a_value_in_identity() -> None:
    untitled = Document.from_text("x")
    blank_title = Document.from_text("x", title="")
    assert '"title":""' in blank_title.canonical_json()
    assert untitled.fingerprint() != blank_title.fingerprint()


def test_turn_times_and_tool_calls_are_identity() -> None:
    base = Conversation.model_validate({"turns": [{"role": "user", "text": "hi"}]})
    timed = Conversation.model_validate({"turns": [{"role": "user", "text": "hi", "at": "2026-01-01T00:00:00Z"}]})
    calling = Conversation.model_validate({"turns": [{"role": "user", "text": "hi", "tool_calls": [{"name": "grep"}]}]})
    assert len({base.fingerprint(), timed.fingerprint(), calling.fingerprint()}) == 3


def test_derive_false_is_identity() -> None:
    plain = Document.from_text("x")
    quiet = Document.from_text("x", meta=MemoryMeta(derive=False))
    assert plain.fingerprint() != quiet.fingerprint()


# docs/spec/contract.md §6.3 layout table and prose examples.
F32_VECTORS = [
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (1.0, "1.0"),
    (12.5, "12.5"),
    (0.8, "0.8"),
    (0.75, "0.75"),
    (0.1, "0.1"),
    (0.3, "0.3"),
    (0.000001, "0.000001"),
    (0.12345679, "0.12345679"),
    (1e-7, "1e-7"),
    (1.25e-7, "1.25e-7"),
    (0.800000011920929, "0.8"),
    (-1.5, "-1.5"),
    (100.0, "100.0"),
    (1e12, "1000000000000.0"),
    (1e13, "1e13"),
    (1.5e13, "1.5e13"),
    (123456789.0, "123456790.0"),
    (3.4028234663852886e38, "3.4028235e38"),
    (1.401298464324817e-45, "1e-45"),
    (16777216.0, "16777216.0"),
    (float("nan"), "null"),
    (float("inf"), "null"),
]


@pytest.mark.parametrize(("value", "text"), F32_VECTORS)
def test_format_f32(value: float, text: str) -> None:
    assert format_f32(value) == text


def test_format_f32_reads_back_as_the_same_float32() -> None:
    for bits in range(0x3F000000, 0x3F800000, 0x1234):
        value = struct.unpack("<f", struct.pack("<I", bits))[0]
        text = format_f32(value)
        assert struct.unpack("<f", struct.pack("<f", float(text)))[0] == value


@pytest.mark.parametrize(
    ("moment", "text"),
    [
        (datetime(2026, 10, 4, 9, 30, tzinfo=UTC), "2026-10-04T09:30:00Z"),
        (datetime(2026, 10, 4, 9, 30, 0, 250000, tzinfo=UTC), "2026-10-04T09:30:00.250Z"),
        (datetime(2026, 10, 4, 9, 30, 0, 123, tzinfo=UTC), "2026-10-04T09:30:00.000123Z"),
        (datetime(2026, 10, 4, 9, 30), "2026-10-04T09:30:00Z"),
    ],
)
def test_format_instant(moment: datetime, text: str) -> None:
    assert format_instant(moment) == text
