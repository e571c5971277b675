"""Events as CortexDB holds them: the envelope in labels (v3) or in the text (v2), labels, keys, local paths."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from engines.contract import (
    Conversation,
    Document,
    Item,
    Learning,
    LearningKind,
    MemoryMeta,
    MetaFilter,
    Role,
    SourceKind,
    SourceRef,
    ToolCallRef,
    Turn,
    redacted_id,
)
from engines.cortex.envelope import body_key, decode, encode_item
from engines.cortex.held import admits
from engines.cortex.labels import digest, narrowing_labels, path_digest, path_digests, wire_meta

SCOPE = "app:tinymemory/app:learnings"
ILLUSTRATIVE_ID = "3f2a9c0d5e6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f"
AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _worked_learning() -> Learning:
    return Learning(
        text="prefers tabs over spaces",
        kind=LearningKind.PREFERENCE,
        confidence=0.8,
        evidence="said so in review 12",
        meta=MemoryMeta(tags=["style"], observed_at=AT),
    )


def test_the_worked_event_of_the_spec_byte_for_byte() -> None:
    [event] = encode_item(_worked_learning(), ILLUSTRATIVE_ID, SCOPE)
    envelope = (
        '{"v":3,"id":"3f2a9c0d5e6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f","kind":"learning","text":"","meta":{"source":'
        '{"kind":"agent"},"tags":["style"],"observed_at":"2026-01-02T03:04:05Z"},"learning_kind":"preference",'
        '"confidence":0.8,"evidence":"said so in review 12"}'
    )
    assert len(envelope.encode()) == 252
    assert event.body == {
        "scope": SCOPE,
        "modality": "observation",
        "content": {"kind": "message", "role": "user", "text": "prefers tabs over spaces"},
        "context": {
            "labels": [
                "tm:i:a26384791451b6f2",
                "tm:k:d4f0bc5a29de06b5",
                "kind:learning",
                "tm:e:00:" + envelope[:240],
                "tm:e:01:" + envelope[240:],
            ],
            "observed_at": "2026-01-02T03:04:05+00:00",
        },
        "idempotency_key": "tm3:6dd5b16b96dab61054f4375a61a59a253bb9ee84355e4e12344c317a",
    }


def test_the_body_key_of_the_spec_and_its_shape() -> None:
    body = {
        "content": {"kind": "message", "role": "user", "text": "hi"},
        "context": {"labels": ["tm:i:0000000000000000"]},
        "modality": "observation",
        "scope": SCOPE,
    }
    assert body_key(body) == "tm3:78ed719ab4b40a1680240adcca74b8bbac79d1a7e4334c0e06e1fe7b"
    # The key hashes the body as data: key order changes nothing, any other change changes it.
    assert body_key(dict(reversed(list(body.items())))) == body_key(body)
    assert body_key({**body, "modality": "document"}) != body_key(body)
    assert len(body_key(body)) == 60


def test_v3_reads_back_and_an_observed_instant_keeps_its_milliseconds() -> None:
    item = _worked_learning().model_copy(
        update={"meta": MemoryMeta(observed_at=datetime(2026, 1, 2, 3, 4, 5, 250000, UTC))}
    )
    [event] = encode_item(item, item.fingerprint(), SCOPE)
    assert event.body["context"]["observed_at"] == "2026-01-02T03:04:05.250+00:00"
    envelope = decode(event.text, event.body["context"]["labels"])
    assert envelope is not None and envelope.version == 3
    assert (envelope.id, envelope.text, envelope.meta) == (item.fingerprint(), item.text, item.meta)
    assert envelope.fields["confidence"] == 0.8 and envelope.fields["learning_kind"] == "preference"


def test_an_envelope_that_needs_more_than_64_labels_rides_in_the_text() -> None:
    item = Learning(text="long evidence", kind=LearningKind.FACT, confidence=0.5, evidence="e" * 20_000)
    [event] = encode_item(item, item.fingerprint(), SCOPE)
    labels = event.body["context"]["labels"]
    assert labels == [f"tm:i:{digest(item.fingerprint())}", f"tm:k:{digest('agent')}"]
    v2 = json.loads(event.text)
    assert (v2["v"], v2["text"], v2["evidence"]) == (2, "long evidence", "e" * 20_000)
    envelope = decode(event.text, labels)
    assert envelope is not None and (envelope.version, envelope.text) == (2, "long evidence")


def test_older_events_and_other_writers() -> None:
    v2 = json.dumps({"v": 2, "id": "x" * 40, "kind": "learning", "text": "old", "meta": {"source": {"kind": "agent"}}})
    rendered = decode(f"[user] {v2}", [])
    assert rendered is not None and (rendered.version, rendered.text) == (2, "old")
    assert decode("just somebody's note", ["kind:learning"]) is None
    assert decode(json.dumps({"v": 3, "id": "y", "kind": "learning", "meta": {}}), []) is None  # v3 only in labels
    assert decode(json.dumps({"v": 2, "id": "y", "kind": "poem", "text": "", "meta": {}}), []) is None
    # Parts with a gap are not a v3 envelope: the text is tried as v2, and is not one either.
    assert decode("hello", ['tm:e:00:{"v":3', "tm:e:02:}"]) is None
    assert decode("hello", ["tm:e:x:{}"]) is None


def test_no_local_path_leaves_the_machine() -> None:
    meta = MemoryMeta(
        workspace="/home/ana/notes", folder="/home/ana/notes/rust", file_path="/home/ana/notes/rust/own.md"
    )
    doc = Document.from_text("ownership and borrowing", meta=meta, title="Ownership")
    [event] = encode_item(doc, doc.fingerprint(), "app:tinymemory/app:documents")
    sent = json.dumps(event.body)
    assert "/home/ana" not in sent
    envelope = decode(event.text, event.body["context"]["labels"])
    assert envelope is not None
    assert envelope.meta == MemoryMeta(file_path="own.md")
    assert envelope.fields["ws"] == path_digest("/home/ana/notes")
    assert envelope.fields["fp"] == path_digests("/home/ana/notes/rust/own.md")
    assert "file:own.md" in event.body["context"]["labels"]
    assert f"tm:w:{path_digest('/home/ana/notes')[:16]}" == event.body["context"]["labels"][2]
    # Filters on the withheld paths match the digests: the folder, a folder above, the file, the workspace.
    for admitted in (
        MetaFilter(folder="/home/ana/notes/rust"),
        MetaFilter(folder="/home/ana/"),
        MetaFilter(file_path="/home/ana/notes/rust/own.md"),
        MetaFilter(workspace="/home/ana/notes", file_path="/home/ana/notes/rust"),
    ):
        assert admits(admitted, envelope), admitted
    for refused in (MetaFilter(folder="/home/ana/not"), MetaFilter(folder="/home/an"), MetaFilter(workspace="/home")):
        assert not admits(refused, envelope), refused


def test_path_digests_cover_every_folder_above() -> None:
    assert path_digests("/a/b.md") == [path_digest("/a/b.md"), path_digest(""), path_digest("/a")]
    assert path_digests("a\\b") == [path_digest("a\\b")]  # only `/` ends a folder


def test_phone_numbers_in_ids_are_redacted_and_still_found() -> None:
    phone = "+1 415 555 0100"
    meta = MemoryMeta(thread_id=phone, source=SourceRef(kind=SourceKind.CONVERSATION, id=f"wa:{phone}"))
    talk = Conversation(turns=[Turn(role=Role.USER, text="call me")], meta=meta)
    [event] = encode_item(talk, talk.fingerprint(), "app:tinymemory/app:conversations")
    assert phone not in json.dumps(event.body)
    labels = event.body["context"]["labels"]
    assert f"tm:t:{digest(redacted_id(phone))}" in labels
    assert wire_meta(meta).thread_id == redacted_id(phone)
    envelope = decode(event.text, labels)
    assert envelope is not None and envelope.meta.thread_id == redacted_id(phone)
    assert admits(MetaFilter(thread_id=phone), envelope)
    # A narrowing label for a phone id is sent in both forms, so events from before redaction are found too.
    assert narrowing_labels(MetaFilter(thread_id=phone)) == [
        f"tm:t:{digest(phone)}",
        f"tm:t:{digest(redacted_id(phone))}",
    ]
    assert narrowing_labels(MetaFilter(thread_id="team@example.com")) == [f"tm:t:{digest('team@example.com')}"]


def test_turns_carry_their_place_and_tool_turns_derive_nothing() -> None:
    turns = [
        Turn(role=Role.USER, text="what is due", at=AT),
        Turn(role=Role.TOOL, text="3 tasks", tool_calls=[ToolCallRef(name="tasks", id="c1")]),
    ]
    talk = Conversation(turns=turns, meta=MemoryMeta(thread_id="thread-0b9f6f1e-2f63-4c1e-9a3e-0d6f2f3b7a11"))
    first, second = encode_item(talk, talk.fingerprint(), "app:tinymemory/app:conversations")
    assert (first.part, second.part) == (0, 1)
    assert first.body["content"]["role"] == "user" and "directives" not in first.body
    assert second.body["directives"] == {"extract": []}
    assert "thread:thread-0b9f6f1e-2f63-4c1e-9a3e-0d6f2f3b7a11" in first.body["context"]["labels"]
    a = decode(first.text, first.body["context"]["labels"])
    b = decode(second.text, second.body["context"]["labels"])
    assert a is not None and a.turn == {"index": 0, "count": 2, "role": "user", "at": "2026-01-02T03:04:05Z"}
    assert b is not None and b.turn == {
        "index": 1,
        "count": 2,
        "role": "tool",
        "tool_calls": [{"name": "tasks", "id": "c1"}],
    }
    assert first.body["context"]["observed_at"] == "2026-01-02T03:04:05+00:00"


def test_readable_labels_never_name_a_person_or_a_language() -> None:
    meta = MemoryMeta(thread_id="dm-ana", language="en", agent_id="scout", derive=False)
    doc = Document.from_text("notes", meta=meta)
    [event] = encode_item(doc, doc.fingerprint(), "app:tinymemory/app:documents")
    labels = event.body["context"]["labels"]
    assert not any(label.startswith(("thread:", "lang:")) for label in labels)
    assert "agent:scout" in labels and event.body["directives"] == {"extract": []}


@pytest.mark.parametrize("derive", [None, True])
def test_directives_are_sent_only_to_stop_derivation(derive: bool | None) -> None:
    doc = Document.from_text("notes", meta=MemoryMeta(derive=derive))
    [event] = encode_item(doc, doc.fingerprint(), "app:tinymemory/app:documents")
    assert "directives" not in event.body


def test_the_bytes_sent_are_the_canonical_body_with_its_key() -> None:
    # The body is written field by field, not by `json.dumps`: it must be exactly the canonical form (7.3), with
    # the key its own canonical bytes hash to, for text that JSON escapes and for events of every shape.
    awkward = 'quote " backslash \\ tab \t newline \n nul \x00 bell \x07 del \x7f é 中 😀 \u2028'
    meta = MemoryMeta(
        thread_id="+1 415 555 0100", agent_id="scout é", file_path="/home/ana/naïve.md", tags=['a"b'], derive=False
    )
    talk = Conversation(
        turns=[
            Turn(role=Role.USER, text=awkward, at=AT),
            Turn(role=Role.TOOL, text="done", tool_calls=[ToolCallRef(name="grep", id="c1")]),
        ],
        meta=MemoryMeta(observed_at=AT),
    )
    items: list[Item] = [
        _worked_learning(),
        Learning(text=awkward, kind=LearningKind.FACT, confidence=0.1, evidence=awkward, meta=meta),
        Learning(text="v2: too many parts", kind=LearningKind.FACT, confidence=0.5, evidence="e\n" * 10_000),
        Document.from_text(awkward + "\f" + awkward, meta=meta, title='Tïtle "x"', mime="text/markdown"),
        Document.from_text("# One\n" + "x" * 300_000, meta=MemoryMeta(observed_at=AT)),
        talk,
    ]
    for item in items:
        for event in encode_item(item, item.fingerprint(), SCOPE):
            canonical = json.dumps(event.body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            assert event.data == canonical.encode("utf-8")
            unkeyed = {key: value for key, value in event.body.items() if key != "idempotency_key"}
            assert event.body["idempotency_key"] == body_key(unkeyed)
