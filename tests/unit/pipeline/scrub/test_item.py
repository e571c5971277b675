"""Scrubbing a memory item (docs/spec/safety.md §8): which fields are rewritten, which are never touched."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engines.contract import (
    Conversation,
    Document,
    DocumentBody,
    Learning,
    LearningKind,
    MemoryMeta,
    Namespace,
    Role,
    SourceKind,
    SourceRef,
    ToolCallRef,
    Turn,
    TurnRange,
)
from pipeline.scrub import Policy, scrub_item

SECRET = "Bearer s3cret"
SCRUBBED = "Bearer [REDACTED]"
# Identifiers hold secrets and PII on purpose here: they must come out exactly as they went in.
IDENTIFIERS = {
    "workspace": "/home/ana/token=abc",
    "folder": "notes/password: hunter2",
    "file_path": "/notes/529.982.247-25.md",
    "language": "en",
    "repo": "ana/api_key=zz99yy88",
    "commit": "ghp_abcdefghijklmnopqrstuvwxyz0123",
    "thread_id": "thread-4155552671 1 2",
    "agent_id": "agent Bearer abcd1234",
}


def _meta(url: str | None = "https://x.example/cb?access_token=abc123XYZ789&x=1") -> MemoryMeta:
    return MemoryMeta(
        namespace=Namespace.parse("agent:writer"),
        url=url,
        turns=TurnRange(first=0, last=1),
        tool_call=ToolCallRef(name="read_secret", id="call_password_1"),
        source=SourceRef(kind=SourceKind.FOLDER, id="secret-notes"),
        tags=["token=abc", "CPF 529.982.247-25"],
        observed_at=datetime(2026, 1, 2, tzinfo=UTC),
        **IDENTIFIERS,
    )


def _assert_meta_scrubbed(before: MemoryMeta, after: MemoryMeta) -> None:
    assert after.url == "https://x.example/cb?access_token=[REDACTED]&x=1"
    assert after.model_copy(update={"url": before.url}) == before


def test_document_title_and_text_body() -> None:
    item = Document(
        title=f"title {SECRET}", body=DocumentBody.of_text(f"body {SECRET}"), mime="text/plain", meta=_meta()
    )
    result = scrub_item(item)
    scrubbed = result.value
    assert isinstance(scrubbed, Document)
    assert scrubbed.title == f"title {SCRUBBED}"
    assert scrubbed.body.text == f"body {SCRUBBED}"
    assert scrubbed.mime == "text/plain"
    _assert_meta_scrubbed(item.meta, scrubbed.meta)
    assert result.report.text_redactions == 3


def test_document_without_title_or_url() -> None:
    item = Document.from_text("CPF 529.982.247-25", meta=_meta(url=None))
    result = scrub_item(item)
    assert isinstance(result.value, Document)
    assert result.value.title is None
    assert result.value.body.text == "CPF [REDACTED_PII_CPF]"
    assert result.value.meta.url is None
    assert result.report.pii_redactions == 1


def test_a_uri_body_is_left_for_the_source_to_resolve() -> None:
    item = Document(body=DocumentBody.of_uri("https://x.example/?token=abc"), title="password: hunter2")
    scrubbed = scrub_item(item).value
    assert isinstance(scrubbed, Document)
    assert scrubbed.body.uri == "https://x.example/?token=abc"
    assert scrubbed.title == "password: [REDACTED]"


def test_conversation_turn_texts_only() -> None:
    at = datetime(2026, 10, 4, 9, 30, tzinfo=UTC)
    calls = [ToolCallRef(name="read_token", id="call_secret_1")]
    turns = [
        Turn(role=Role.USER, text=f"here {SECRET}", at=at),
        Turn(role=Role.ASSISTANT, text="call 415-555-2671", tool_calls=calls),
        Turn(role=Role.TOOL, text="nothing here"),
    ]
    item = Conversation(turns=turns, meta=_meta())
    result = scrub_item(item)
    scrubbed = result.value
    assert isinstance(scrubbed, Conversation)
    assert [t.text for t in scrubbed.turns] == [f"here {SCRUBBED}", "call [REDACTED_PII_PHONE]", "nothing here"]
    assert [(t.role, t.at, t.tool_calls) for t in scrubbed.turns] == [(t.role, t.at, t.tool_calls) for t in turns]
    _assert_meta_scrubbed(item.meta, scrubbed.meta)
    assert (result.report.text_redactions, result.report.pii_redactions) == (2, 1)


def test_learning_text_and_evidence() -> None:
    item = Learning(
        text=f"use {SECRET}", kind=LearningKind.FACT, confidence=0.8, evidence="SSN 123-45-6789", meta=_meta()
    )
    scrubbed = scrub_item(item).value
    assert isinstance(scrubbed, Learning)
    assert (scrubbed.text, scrubbed.evidence) == (f"use {SCRUBBED}", "SSN [REDACTED_PII_SSN]")
    assert (scrubbed.kind, scrubbed.confidence) == (LearningKind.FACT, 0.8)


def test_learning_without_evidence() -> None:
    item = Learning(text="prefers tabs", kind=LearningKind.PREFERENCE, confidence=1.0)
    result = scrub_item(item)
    assert result.value == item
    assert not result.report.changed()


def test_the_policy_reaches_every_text() -> None:
    item = Learning(text="ts 1787178633773", kind=LearningKind.OTHER, confidence=0.5, evidence="1787178633773")
    assert scrub_item(item).report.pii_redactions == 2
    assert not scrub_item(item, Policy.corroborated()).report.changed()


@pytest.mark.parametrize(
    "item",
    [
        Document(title=SECRET, body=DocumentBody.of_text(SECRET), meta=_meta()),
        Conversation(turns=[Turn(role=Role.USER, text=SECRET)], meta=_meta()),
        Learning(text=SECRET, kind=LearningKind.FACT, confidence=0.1, evidence=SECRET, meta=_meta()),
    ],
    ids=["document", "conversation", "learning"],
)
def test_the_input_is_not_modified_and_the_id_follows_the_scrub(item: Document | Conversation | Learning) -> None:
    before = item.model_dump(mode="json")
    result = scrub_item(item)
    assert item.model_dump(mode="json") == before
    assert result.value is not item
    assert result.value.fingerprint() != item.fingerprint()
    assert scrub_item(result.value).value.fingerprint() == result.value.fingerprint()
    assert not scrub_item(result.value).report.changed()
    result.value.check()
