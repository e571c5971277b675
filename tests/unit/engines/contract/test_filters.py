"""`MetaFilter` matching, facets, redacted ids and phone-number detection (docs/spec/contract.md §11, §16)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engines.contract import (
    Facet,
    Hit,
    InvalidRequestError,
    ItemKind,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    SourceKind,
    SourceRef,
    ToolCallRef,
    TurnRange,
    holds_phone_number,
    path_prefix_matches,
    redacted_id,
    same_id,
)

FULL = MemoryMeta(
    namespace=Namespace.parse("team:acme"),
    workspace="ws",
    folder="/a/b",
    file_path="/a/b/c.rs",
    language="rust",
    repo="o/r",
    commit="c0ffee",
    url="https://x.test/a",
    thread_id="t-1",
    turns=TurnRange(first=2, last=3),
    agent_id="agent-1",
    tool_call=ToolCallRef(name="grep", id="call-1"),
    source=SourceRef(kind=SourceKind.FILE, id="src-1"),
    tags=["x", "y"],
    observed_at=datetime(2026, 1, 1, tzinfo=UTC),
)

# (filter, matches FULL as a document)
FILTER_VECTORS = [
    (MetaFilter(), True),
    (MetaFilter(workspace="ws"), True),
    (MetaFilter(workspace="w"), False),
    (MetaFilter(folder="/a"), True),
    (MetaFilter(folder="/a/"), True),
    (MetaFilter(folder="/a/b"), True),
    (MetaFilter(folder="/a/bc"), False),
    (MetaFilter(folder="/a/b/c"), False),
    (MetaFilter(file_path="/a/b"), True),
    (MetaFilter(file_path="/a/b/c"), False),
    (MetaFilter(language="rust"), True),
    (MetaFilter(language="Rust"), False),
    (MetaFilter(repo="o/r"), True),
    (MetaFilter(commit="c0ffee"), True),
    (MetaFilter(url="https://x.test/a"), True),
    (MetaFilter(url="https://x.test"), False),
    (MetaFilter(thread_id="t-1"), True),
    (MetaFilter(thread_id="t-2"), False),
    (MetaFilter(turns=TurnRange(first=2, last=3)), True),
    (MetaFilter(turns=TurnRange(first=2, last=4)), False),
    (MetaFilter(agent_id="agent-1"), True),
    (MetaFilter(tool_call="grep"), True),
    (MetaFilter(tool_call="call-1"), False),
    (MetaFilter(source_id="src-1"), True),
    (MetaFilter(source_id="src"), False),
    (MetaFilter(kinds=[ItemKind.DOCUMENT, ItemKind.LEARNING]), True),
    (MetaFilter(kinds=[ItemKind.LEARNING]), False),
    (MetaFilter(sources=[SourceKind.FILE]), True),
    (MetaFilter(sources=[SourceKind.RSS]), False),
    (MetaFilter(tags_any=["nope", "y"]), True),
    (MetaFilter(tags_any=["nope"]), False),
    (MetaFilter(observed_after=datetime(2026, 1, 1, tzinfo=UTC)), True),
    (MetaFilter(observed_before=datetime(2026, 1, 1, tzinfo=UTC)), False),
    (MetaFilter(observed_before=datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC)), True),
    (MetaFilter(reach=Reach.exact(Namespace.parse("team:acme"))), True),
    (MetaFilter(reach=Reach.of(Namespace.parse("team:acme/agent:w"))), True),
    (MetaFilter(reach=Reach.exact(Namespace.ROOT)), False),
    (MetaFilter(workspace="ws", language="go"), False),
]


@pytest.mark.parametrize(("filter", "expected"), FILTER_VECTORS)
def test_filter_vectors(filter: MetaFilter, expected: bool) -> None:
    assert filter.matches(ItemKind.DOCUMENT, FULL) is expected


def test_an_item_lacking_a_value_never_matches_a_set_field() -> None:
    bare = MemoryMeta()
    for name in ("workspace", "folder", "file_path", "thread_id", "agent_id", "tool_call", "source_id"):
        assert not MetaFilter.model_validate({name: "x"}).matches(ItemKind.DOCUMENT, bare), name
    assert not MetaFilter(observed_after=datetime(2000, 1, 1, tzinfo=UTC)).matches(ItemKind.DOCUMENT, bare)


def test_no_reach_excludes_sandboxes() -> None:
    sandboxed = MemoryMeta(namespace=Namespace.parse("service:flow"))
    assert not MetaFilter().matches(ItemKind.LEARNING, sandboxed)
    assert MetaFilter(reach=Reach.exact(Namespace.parse("service:flow"))).matches(ItemKind.LEARNING, sandboxed)


def test_is_empty() -> None:
    assert MetaFilter().is_empty()
    assert not MetaFilter(reach=Reach()).is_empty()
    assert not MetaFilter(kinds=[ItemKind.DOCUMENT]).is_empty()
    assert MetaFilter.of_kinds(ItemKind.DOCUMENT) == MetaFilter(kinds=[ItemKind.DOCUMENT])


def test_prefix_rule() -> None:
    assert path_prefix_matches("/a/b/c.rs", "/a/b")
    assert path_prefix_matches("/a/b", "/a/b")
    assert not path_prefix_matches("/a/bc", "/a/b")
    assert path_prefix_matches("/a/b", "/a/b/")
    assert not path_prefix_matches(None, "/a")


def test_redacted_ids_match_their_plain_form() -> None:
    held = redacted_id("+1 555 010 9999")
    assert held.startswith("tm-redacted:") and len(held) == len("tm-redacted:") + 32
    assert same_id(held, "+1 555 010 9999")
    assert same_id("plain", "plain")
    assert not same_id(held, "+1 555 010 9998")
    meta = MemoryMeta(thread_id=held)
    assert MetaFilter(thread_id="+1 555 010 9999").matches(ItemKind.CONVERSATION, meta)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("+1 (555) 010-9999", True),
        ("5550109999", True),
        # The run takes in separators, so a letter before the `-` or space is the run's neighbour.
        ("thread-5550109999", False),
        ("chat:5550109999", True),
        ("wa_+1-555-010-9999", True),
        ("call555010999", False),
        ("5550109999x", False),
        ("123456", False),
        ("123e4567-e89b-12d3-a456-426614174000", False),
        ("tm-redacted:5550109999", False),
        ("order 12-34-567 done", False),
        ("order: 12-34-567 ;", True),
    ],
)
def test_holds_phone_number(value: str, expected: bool) -> None:
    assert holds_phone_number(value) is expected


def _hit(meta: MemoryMeta, kind: ItemKind = ItemKind.DOCUMENT) -> Hit:
    return Hit(id="x", kind=kind, text="t", meta=meta)


def test_facet_values() -> None:
    hit = _hit(FULL.model_copy(update={"tags": ["x", "y", "x"]}))
    expected = {
        Facet.KIND: ["document"],
        Facet.SOURCE: ["file"],
        Facet.SOURCE_ID: ["src-1"],
        Facet.WORKSPACE: ["ws"],
        Facet.FOLDER: ["/a/b"],
        Facet.FILE_PATH: ["/a/b/c.rs"],
        Facet.LANGUAGE: ["rust"],
        Facet.REPO: ["o/r"],
        Facet.URL: ["https://x.test/a"],
        Facet.THREAD: ["t-1"],
        Facet.AGENT: ["agent-1"],
        Facet.TOOL_CALL: ["grep"],
        Facet.TAG: ["x", "y"],
        Facet.NAMESPACE: ["team:acme"],
    }
    assert {facet: facet.values(hit) for facet in Facet} == expected
    bare = _hit(MemoryMeta())
    assert [f for f in Facet if not f.values(bare)] == [
        f for f in Facet if f not in (Facet.KIND, Facet.SOURCE, Facet.NAMESPACE)
    ]
    assert Facet.NAMESPACE.values(bare) == ["root"]


@pytest.mark.parametrize("facet", list(Facet))
def test_narrow_turns_a_bucket_back_into_a_filter_that_selects_it(facet: Facet) -> None:
    hit = _hit(FULL)
    for value in facet.values(hit):
        narrowed = facet.narrow(MetaFilter(workspace="ws"), value)
        assert narrowed.workspace == "ws" or facet is Facet.WORKSPACE
        assert narrowed.matches(hit.kind, hit.meta)


def test_narrow_replaces_the_previous_value_and_validates() -> None:
    assert Facet.KIND.narrow(MetaFilter(kinds=[ItemKind.LEARNING]), "document").kinds == [ItemKind.DOCUMENT]
    assert Facet.NAMESPACE.narrow(MetaFilter(), "root").reach == Reach.exact(Namespace.ROOT)
    assert Facet.FOLDER.narrow(MetaFilter(), "/a").matches(ItemKind.DOCUMENT, FULL)
    cases = [
        (Facet.TAG, " ", "a facet value must not be empty"),
        (Facet.KIND, "memo", "`memo` is not an item kind"),
        (Facet.SOURCE, "mail", "`mail` is not a source kind"),
        (Facet.NAMESPACE, "robot:x", "`robot` is not a namespace segment kind"),
    ]
    for facet, value, message in cases:
        with pytest.raises(InvalidRequestError) as caught:
            facet.narrow(MetaFilter(), value)
        assert caught.value.message == message
