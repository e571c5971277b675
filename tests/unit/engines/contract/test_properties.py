"""Property tests of the contract: wire round trips, identity, namespaces and reach confinement."""

from __future__ import annotations

import itertools
import random
import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from engines.contract import (
    MAX_DEPTH,
    Conversation,
    Document,
    DocumentBody,
    FetchMode,
    FetchRequest,
    ItemKind,
    Learning,
    LearningKind,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    RecallRequest,
    Role,
    Segment,
    SegmentKind,
    SourceKind,
    SourceRef,
    ToolCallRef,
    Turn,
    TurnRange,
    parse_item,
)

# Any valid Unicode text: no lone surrogates, control characters and astral planes included.
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
opt_texts = st.none() | texts
ids = st.from_regex(r"[A-Za-z0-9_-]{1,12}", fullmatch=True)
segments = st.builds(Segment, st.sampled_from(list(SegmentKind)), ids)
namespaces = st.lists(segments, max_size=MAX_DEPTH).map(Namespace)
instants = st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
tool_calls = st.builds(ToolCallRef, name=texts, id=opt_texts)
turn_ranges = st.builds(TurnRange, first=st.integers(0, 2**32 - 1), last=st.integers(0, 2**32 - 1))

metas = st.builds(
    MemoryMeta,
    namespace=namespaces,
    workspace=opt_texts,
    folder=opt_texts,
    file_path=opt_texts,
    language=opt_texts,
    repo=opt_texts,
    commit=opt_texts,
    url=opt_texts,
    thread_id=opt_texts,
    turns=st.none() | turn_ranges,
    agent_id=opt_texts,
    tool_call=st.none() | tool_calls,
    source=st.builds(SourceRef, kind=st.sampled_from(list(SourceKind)), id=opt_texts),
    tags=st.lists(texts, max_size=3),
    observed_at=st.none() | instants,
    derive=st.none() | st.booleans(),
)
turns = st.builds(
    Turn,
    role=st.sampled_from(list(Role)),
    text=texts,
    at=st.none() | instants,
    tool_calls=st.lists(tool_calls, max_size=2),
)
documents = st.builds(
    Document,
    title=opt_texts,
    body=st.one_of(texts.map(DocumentBody.of_text), texts.map(DocumentBody.of_uri)),
    mime=opt_texts,
    meta=metas,
)
conversations = st.builds(Conversation, turns=st.lists(turns, max_size=3), meta=metas)
learnings = st.builds(
    Learning,
    text=texts,
    kind=st.sampled_from(list(LearningKind)),
    confidence=st.floats(0.0, 1.0, width=32),
    evidence=opt_texts,
    meta=metas,
)
items = st.one_of(documents, conversations, learnings)
reaches = st.builds(Reach, at=namespaces, inherit=st.booleans(), descendants=st.booleans())
filters = st.builds(
    MetaFilter,
    reach=st.none() | reaches,
    workspace=opt_texts,
    folder=opt_texts,
    thread_id=opt_texts,
    turns=st.none() | turn_ranges,
    tool_call=opt_texts,
    source_id=opt_texts,
    kinds=st.lists(st.sampled_from(list(ItemKind)), max_size=3),
    sources=st.lists(st.sampled_from(list(SourceKind)), max_size=3),
    tags_any=st.lists(texts, max_size=3),
    observed_after=st.none() | instants,
    observed_before=st.none() | instants,
)


@given(items)
def test_item_json_round_trip(item: Document | Conversation | Learning) -> None:
    assert parse_item(item.model_dump_json()) == item
    assert parse_item(item.model_dump(mode="json")) == item


@given(filters, st.sampled_from(list(FetchMode)), texts, st.integers(1, 1000))
def test_request_json_round_trip(filter: MetaFilter, mode: FetchMode, query: str, limit: int) -> None:
    fetch = FetchRequest(query=query, mode=mode, filter=filter, limit=limit)
    assert FetchRequest.model_validate_json(fetch.model_dump_json()) == fetch
    recall = RecallRequest(question=query, filter=filter, limit=limit)
    assert RecallRequest.model_validate_json(recall.model_dump_json()) == recall
    assert MetaFilter.model_validate(filter.model_dump(mode="json")) == filter


@given(items, st.none() | instants)
def test_fingerprint_ignores_observed_at(item: Document | Conversation | Learning, moment: datetime) -> None:
    moved = item.model_copy(update={"meta": item.meta.model_copy(update={"observed_at": moment})})
    assert moved.fingerprint() == item.fingerprint()


META_CHANGES = {
    "workspace": "ws-changed",
    "folder": "/changed",
    "file_path": "/changed/file",
    "language": "changed-lang",
    "repo": "changed/repo",
    "commit": "changedc0ffee",
    "url": "https://changed.test",
    "thread_id": "changed-thread",
    "turns": TurnRange(first=99, last=100),
    "agent_id": "changed-agent",
    "tool_call": ToolCallRef(name="changed_tool"),
    "source": SourceRef(kind=SourceKind.IMPORT, id="changed-source"),
    "namespace": Namespace.parse("project:changed-node"),
}


@given(items, st.sampled_from(sorted(META_CHANGES)))
def test_fingerprint_changes_with_any_meta_field(item: Document | Conversation | Learning, field: str) -> None:
    new_value = META_CHANGES[field]
    if getattr(item.meta, field) == new_value:
        return
    changed = item.model_copy(update={"meta": item.meta.model_copy(update={field: new_value})})
    assert changed.fingerprint() != item.fingerprint()


@given(items, texts)
def test_fingerprint_changes_with_tags_and_derive(item: Document | Conversation | Learning, tag: str) -> None:
    tagged = item.meta.model_copy(update={"tags": [*item.meta.tags, tag]})
    assert item.model_copy(update={"meta": tagged}).fingerprint() != item.fingerprint()
    flipped = item.meta.model_copy(update={"derive": not item.meta.derive})
    assert item.model_copy(update={"meta": flipped}).fingerprint() != item.fingerprint()


@given(learnings, st.floats(0.0, 1.0, width=32), texts)
def test_fingerprint_changes_with_learning_fields(item: Learning, confidence: float, text: str) -> None:
    if confidence != item.confidence:
        assert item.model_copy(update={"confidence": confidence}).fingerprint() != item.fingerprint()
    if text != item.text:
        assert item.model_copy(update={"text": text}).fingerprint() != item.fingerprint()
    other_kind = next(k for k in LearningKind if k != item.kind)
    assert item.model_copy(update={"kind": other_kind}).fingerprint() != item.fingerprint()
    evidence = "changed" if item.evidence != "changed" else None
    assert item.model_copy(update={"evidence": evidence}).fingerprint() != item.fingerprint()


@given(documents, texts)
def test_fingerprint_changes_with_document_fields(item: Document, text: str) -> None:
    if text != item.body.value:
        body = DocumentBody.of_uri(text) if item.body.is_uri else DocumentBody.of_text(text)
        assert item.model_copy(update={"body": body}).fingerprint() != item.fingerprint()
    title = "changed" if item.title != "changed" else None
    assert item.model_copy(update={"title": title}).fingerprint() != item.fingerprint()
    mime = "changed/mime" if item.mime != "changed/mime" else None
    assert item.model_copy(update={"mime": mime}).fingerprint() != item.fingerprint()


@given(conversations.filter(lambda c: bool(c.turns)), texts)
def test_fingerprint_changes_with_turns(item: Conversation, text: str) -> None:
    extra = Turn(role=Role.USER, text=text)
    assert item.model_copy(update={"turns": [*item.turns, extra]}).fingerprint() != item.fingerprint()
    other_role = Role.TOOL if item.turns[0].role != Role.TOOL else Role.USER
    first = item.turns[0].model_copy(update={"role": other_role})
    changed = item.model_copy(update={"turns": [first, *item.turns[1:]]})
    assert changed.fingerprint() != item.fingerprint()


@given(namespaces)
def test_namespace_print_parse_round_trip(ns: Namespace) -> None:
    assert Namespace.parse(str(ns)) == ns
    assert MemoryMeta.model_validate_json(MemoryMeta(namespace=ns).model_dump_json()).namespace == ns


_VALID_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")


@given(st.text(max_size=300))
def test_sanitized_always_yields_a_valid_id(raw: str) -> None:
    assert _VALID_ID.fullmatch(Segment.sanitized(SegmentKind.USER, raw).id)


_HOST_ID_ALPHABET = "abcXYZ019_-.@:/ +'éß漢😀\x00\n"


def _host_ids(rng: random.Random, count: int) -> set[str]:
    # Host ids as they come: emails, paths, names with punctuation and non-ASCII letters.
    return {"".join(rng.choices(_HOST_ID_ALPHABET, k=rng.randint(0, 40))) for _ in range(count)}


@settings(max_examples=5, deadline=None)
@given(st.integers(0, 2**32))
def test_sanitized_never_collides_for_distinct_inputs(seed: int) -> None:
    # "" and "_" are the one accepted collision (docs/spec/contract.md §9.3).
    sample = _host_ids(random.Random(seed), 40_000) - {"_"}
    sanitized = {Segment.sanitized(SegmentKind.USER, raw).id for raw in sample}
    assert len(sanitized) == len(sample)


def _small_tree() -> list[Namespace]:
    # Every path of depth <= 3 over two agents and a sandbox: rich enough that a reach at depth <= 2
    # has a non-sandbox child, a sandbox child and siblings to be judged against.
    letters = [
        Segment(SegmentKind.AGENT, "a"),
        Segment(SegmentKind.AGENT, "b"),
        Segment(SegmentKind.SERVICE, "s"),
    ]
    return [Namespace(path) for depth in range(4) for path in itertools.product(letters, repeat=depth)]


TREE = _small_tree()
SHALLOW = [ns for ns in TREE if ns.depth <= 2]
tree_reaches = st.builds(Reach, at=st.sampled_from(SHALLOW), inherit=st.booleans(), descendants=st.booleans())


@settings(max_examples=500)
@given(tree_reaches, tree_reaches)
def test_within_agrees_with_brute_force(reach: Reach, outer: Reach) -> None:
    brute = all(outer.admits(ns) for ns in TREE if reach.admits(ns))
    assert reach.within(outer) is brute


@given(reaches, namespaces)
def test_admits_never_enters_a_sandbox_below_at_without_being_inside_it(reach: Reach, ns: Namespace) -> None:
    below = ns.segments[reach.at.depth :] if ns.is_within(reach.at) else ()
    if ns != reach.at and any(s.kind is SegmentKind.SERVICE for s in below):
        assert not reach.admits(ns)


@given(items)
def test_hand_built_wire_dict_equals_pydantic_dump(item: Document | Conversation | Learning) -> None:
    dumped = item.model_dump(mode="json")
    assert item.wire_dict() == dumped
    assert list(item.wire_dict()) == list(dumped)
    assert list(item.wire_dict()["meta"]) == list(dumped["meta"])
    dumped["meta"].pop("observed_at", None)
    assert item.wire_dict(observed=False) == dumped
    assert parse_item(item.wire_json()) == item


@given(items)
def test_identified_is_the_fingerprint_and_the_wire_json(item: Document | Conversation | Learning) -> None:
    assert item.identified() == (item.fingerprint(), item.wire_json())
