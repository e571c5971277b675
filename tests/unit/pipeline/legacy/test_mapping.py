"""Each row → item rule of docs/spec/legacy-import.md §6 and §7, asserted field by field on the sample workspace, in
the newest and the early v1 form."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engines.contract import (
    Conversation,
    Document,
    Learning,
    LearningKind,
    Namespace,
    Role,
    SourceKind,
    StoreItem,
    ToolCallRef,
    TurnRange,
)
from pipeline.legacy import TAINT_TAG, LegacyWorkspace, ReadStats, Skip
from tests.fixtures.legacy_workspace import V1Workspace, sample_workspace

T0 = datetime.fromtimestamp(1_700_000_000.0, tz=UTC)
MS0 = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=1_700_000_000_000)


def read(root: Path) -> tuple[dict[str, StoreItem], list[str], ReadStats]:
    stats = ReadStats()
    with LegacyWorkspace.open(root) as ws:
        items = [imported.item for imported in ws.items(stats=stats)]
    ids = [item.meta.source.id or "" for item in items]
    return dict(zip(ids, items, strict=True)), ids, stats


@pytest.fixture(scope="module", params=["new", "early"])
def sample(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> V1Workspace:
    return sample_workspace(tmp_path_factory.mktemp(request.param) / "ws", request.param)


@pytest.fixture(scope="module")
def new(tmp_path_factory: pytest.TempPathFactory) -> V1Workspace:
    return sample_workspace(tmp_path_factory.mktemp("new-only") / "ws", "new")


def test_sections_come_in_order_and_keys_ascend(sample: V1Workspace) -> None:
    _, ids, _ = read(sample.root)
    facets = (
        ["user_profile:f1", "user_profile:f5"] if sample.form == "new" else [f"user_profile:f{n}" for n in (1, 2, 3, 5)]
    )
    assert ids == [
        "memory_docs:d1",
        "memory_docs:d2",
        "memory_docs:d3a",
        "memory_docs:d3b",
        "mem_tree_chunks:chat:slack:general",
        "mem_tree_chunks:document:notes:plan",
        "mem_tree_chunks:email:thread-1",
        "episodic_log:s1",
        *(f"memory_docs:{key}" for key in ("d5", "d6", "d7", "d8", "d9", "da", "db")),
        *facets,
    ]


def test_every_item_is_an_import_of_the_workspace_at_the_root(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    for legacy_id, item in items.items():
        assert item.meta.workspace == str(sample.root.resolve())
        assert item.meta.source.kind is SourceKind.IMPORT
        assert item.meta.source.id == legacy_id
        assert item.meta.namespace == Namespace.ROOT


def test_document_fields(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    doc = items["memory_docs:d1"]
    assert isinstance(doc, Document)
    assert (doc.title, doc.body.text, doc.mime) == ("First note", "# Notes\n\nthe first note", "text/markdown")
    assert doc.meta.url == "https://example.com/notes/1"
    # Blank, repeated and non-string tags dropped, then the un-sanitised namespace.
    assert doc.meta.tags == ["work", "ideas", "ns:document:notes"]
    assert doc.meta.observed_at == T0 + timedelta(seconds=1.25)
    assert (doc.meta.thread_id, doc.meta.turns, doc.meta.folder, doc.meta.file_path) == (None, None, None, None)


def test_a_document_with_unreadable_json_and_no_title(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    doc = items["memory_docs:d2"]
    assert isinstance(doc, Document)
    assert (doc.title, doc.mime, doc.meta.url) == (None, None, None)
    # `projects` has no v1 kind prefix, so it is used as it is.
    assert doc.meta.tags == ["ns:projects"]


def test_unsanitised_namespaces_and_a_taint_not_exactly_internal(new: V1Workspace) -> None:
    items, _, _ = read(new.root)
    assert items["memory_docs:d3a"].meta.tags == ["ns:custom:team_notes", TAINT_TAG]


def test_the_logical_namespace_wins_and_taint_comes_last(new: V1Workspace) -> None:
    items, _, _ = read(new.root)
    assert items["memory_docs:d3b"].meta.tags == ["ns:project:alpha", TAINT_TAG]


def test_the_early_form_is_internal_and_uses_the_namespace(tmp_path: Path) -> None:
    ws = sample_workspace(tmp_path / "ws", "early")
    items, _, _ = read(ws.root)
    assert items["memory_docs:d3a"].meta.tags == ["ns:custom:team_notes"]
    assert items["memory_docs:d3b"].meta.tags == ["ns:document:x"]


def test_a_chat_chunk_group_is_a_conversation_of_user_turns(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    chat = items["mem_tree_chunks:chat:slack:general"]
    assert isinstance(chat, Conversation)
    # The second chunk's text is its content file's, not the preview in its row; the blank third is dropped.
    assert [(t.role, t.text, t.at) for t in chat.turns] == [
        (Role.USER, "standup at ten", MS0),
        (Role.USER, "the whole second message, read from its file", MS0 + timedelta(seconds=5)),
    ]
    assert chat.meta.thread_id == "slack:general"
    assert chat.meta.turns == TurnRange(first=0, last=1)
    assert chat.meta.tags == ["team", "source_kind:chat"]
    assert chat.meta.observed_at == MS0 + timedelta(seconds=5)


def test_another_chunk_group_is_one_document_in_sequence_order(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    doc = items["mem_tree_chunks:document:notes:plan"]
    assert isinstance(doc, Document)
    assert (doc.title, doc.mime, doc.body.text) == (None, None, "part one\n\npart two")
    assert doc.meta.tags == ["plan", "team", "source_kind:document"]
    assert doc.meta.observed_at == MS0


def test_a_content_path_outside_the_content_folder_falls_back_to_the_row(sample: V1Workspace) -> None:
    items, ids, _ = read(sample.root)
    escaped = items["mem_tree_chunks:email:thread-1"]
    assert isinstance(escaped, Document)
    assert escaped.body.text == "fallback text"
    # A blank row whose named file is missing stays blank: its group is skipped.
    assert "mem_tree_chunks:email:thread-2" not in ids


def test_episodic_turns_become_a_conversation(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    conversation = items["episodic_log:s1"]
    assert isinstance(conversation, Conversation)
    turns = [(t.role, t.text, t.at) for t in conversation.turns]
    assert turns == [
        (Role.USER, "hello there", T0 + timedelta(seconds=10)),
        (Role.ASSISTANT, "hi, how can I help?", T0 + timedelta(seconds=11)),
        (Role.SYSTEM, "be brief", T0 + timedelta(seconds=13)),
        (Role.ASSISTANT, "calling tools", T0 + timedelta(seconds=13.5)),
        (Role.TOOL, "42", T0 + timedelta(seconds=14)),
        (Role.ASSISTANT, "done", T0 + timedelta(seconds=14.5)),
        (Role.ASSISTANT, "no calls", T0 + timedelta(seconds=14.7)),
        (Role.USER, "an odd role is a user turn", T0 + timedelta(seconds=15)),
    ]
    assert conversation.meta.thread_id == "s1"
    assert conversation.meta.turns == TurnRange(first=0, last=7)
    assert conversation.meta.observed_at == T0 + timedelta(seconds=15)
    assert conversation.meta.tags == []


def test_the_three_tool_call_shapes(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    conversation = items["episodic_log:s1"]
    assert isinstance(conversation, Conversation)
    calls = [turn.tool_calls for turn in conversation.turns]
    if sample.form == "early":
        assert calls == [[]] * 8
        return
    assert calls[3] == [ToolCallRef(name="search", id="c1")]  # an array; the nameless call dropped
    assert calls[4] == [ToolCallRef(name="lookup")]  # one call object; a blank id is no id
    assert calls[5] == [ToolCallRef(name="calc"), ToolCallRef(name="x")]  # an object holding `tool_calls`
    assert calls[6] == []  # unparseable
    assert calls[0] == calls[7] == []


def learning(items: dict[str, StoreItem], legacy_id: str) -> Learning:
    item = items[legacy_id]
    assert isinstance(item, Learning)
    return item


def test_candidate_learnings(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    style = learning(items, "memory_docs:d5")
    assert (style.text, style.kind, style.confidence, style.evidence) == (
        "tone: dry",
        LearningKind.PREFERENCE,
        1.0,
        "said so",
    )
    assert (style.meta.tags, style.meta.observed_at) == (["style"], T0)
    tooling = learning(items, "memory_docs:d6")
    # A bare `learning` namespace has no class: the candidate's own `class` names it.
    assert tooling.text == 'editor: {"name":"vim","tabs":false}'
    assert (tooling.kind, tooling.confidence, tooling.evidence, tooling.meta.tags) == (
        LearningKind.PROCEDURE,
        0.5,
        None,
        ["tooling"],
    )
    veto = learning(items, "memory_docs:d9")
    assert (veto.text, veto.kind, veto.evidence) == ("emoji: never", LearningKind.CORRECTION, '{"turn":3}')
    assert veto.meta.observed_at == datetime.fromtimestamp(1_600_000_000.5, tz=UTC)
    identity = learning(items, "memory_docs:da")
    assert (identity.text, identity.kind, identity.confidence, identity.meta.tags) == (
        "name: Ann",
        LearningKind.FACT,
        0.5,
        ["identity"],
    )


def test_non_candidate_and_global_learnings(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    goal = learning(items, "memory_docs:d7")
    assert (goal.text, goal.kind, goal.confidence, goal.evidence) == ("ship the import", LearningKind.OTHER, 0.5, None)
    assert (goal.meta.tags, goal.meta.observed_at) == (["goal"], T0 + timedelta(seconds=7))
    broken = learning(items, "memory_docs:db")
    assert (broken.text, broken.kind, broken.meta.tags) == ("{broken json", LearningKind.OTHER, ["channel"])
    fact = learning(items, "memory_docs:d8")
    assert (fact.text, fact.kind, fact.confidence, fact.evidence) == ("the sky is blue", LearningKind.FACT, 0.5, None)
    assert (fact.meta.tags, fact.meta.observed_at) == (["global"], T0 + timedelta(seconds=8))


def test_profile_facets(sample: V1Workspace) -> None:
    items, _, _ = read(sample.root)
    coffee = learning(items, "user_profile:f1")
    assert (coffee.text, coffee.kind, coffee.confidence) == ("coffee: black", LearningKind.PREFERENCE, 1.0)
    assert coffee.meta.observed_at == T0
    voice = learning(items, "user_profile:f5")
    assert (voice.text, voice.confidence, voice.meta.tags) == ("voice: warm", 0.5, ["style"])  # class = facet type
    if sample.form == "new":
        assert (coffee.evidence, coffee.meta.tags) == ('["seg-1"]', ["preference", "food"])
    else:
        assert (coffee.evidence, coffee.meta.tags) == (None, ["preference"])
        assert learning(items, "user_profile:f2").text == "tea: green"  # no lifecycle columns: still live


def test_skipped_rows_are_counted_with_their_reasons(sample: V1Workspace) -> None:
    _, ids, stats = read(sample.root)
    facets = {("profile", Skip.DROPPED): 1, ("profile", Skip.FORGOTTEN): 1} if sample.form == "new" else {}
    assert dict(stats.skipped) == {
        ("documents", Skip.BLANK): 1,
        ("documents", Skip.EVENT): 1,
        ("chunks", Skip.BLANK): 2,
        ("conversations", Skip.BLANK): 2,
        ("learnings", Skip.BLANK): 1,
        ("profile", Skip.BLANK_VALUE): 1,
        **facets,
    }
    assert "memory_docs:d4" not in ids and "episodic_log:s2" not in ids
    assert stats.rows == 14 + 7 + 10 + 5  # memory_docs (the event and blank ones too), chunks, turns, facets
