"""Every JSON example of the seed documents and the contract parses and serialises back unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from engines.contract import (
    Conversation,
    Document,
    DocumentBody,
    EngineDescriptor,
    EngineHealth,
    EraseReport,
    EraseRequest,
    ExplorePage,
    ExploreRequest,
    ExportPage,
    FetchMode,
    FetchRequest,
    ForgetReport,
    ForgetTarget,
    Hit,
    Learning,
    ListRequest,
    MemoryMeta,
    MetaFilter,
    Namespace,
    Reach,
    RecallAnswer,
    RecallRequest,
    StoreItem,
    StoreReceipt,
    TimeHint,
    Turn,
    parse_item,
)

# (model, wire JSON, keys the model adds on output because they have a default), from seed-api.md.
SEED_API_EXAMPLES: list[tuple[type[BaseModel], str, dict[str, Any]]] = [
    (
        Hit,
        """{
          "id": "9f2c1c6e0a8b4d3e7f5a1b2c3d4e5f6a7b8c9d0e",
          "kind": "learning",
          "text": "prefers tabs",
          "meta": {
            "namespace": "team:acme/agent:writer",
            "source": { "kind": "agent" },
            "tags": ["style"],
            "observed_at": "2026-10-04T09:30:00Z"
          },
          "score": 0.0,
          "confidence": 0.8
        }""",
        {},
    ),
    (
        FetchRequest,
        """{
          "query": "ownership",
          "mode": "hybrid",
          "filter": { "kinds": ["document"], "folder": "/notes/rust" },
          "limit": 10,
          "cursor": "10"
        }""",
        {},
    ),
    (
        RecallAnswer,
        """{
          "answer": "The user prefers tabs.",
          "citations": [
            {
              "id": "9f2c1c6e0a8b4d3e7f5a1b2c3d4e5f6a7b8c9d0e",
              "kind": "learning",
              "snippet": "prefers tabs",
              "meta": { "source": { "kind": "agent" } },
              "score": 0.91
            }
          ],
          "model": "reference"
        }""",
        {},
    ),
    (ForgetTarget, '{ "ids": ["9f2c1c6e0a8b4d3e7f5a1b2c3d4e5f6a7b8c9d0e"] }', {}),
    (ForgetTarget, '{ "filter": { "workspace": "scratch" } }', {}),
    (ForgetReport, '{ "forgotten": 1 }', {}),
    (
        ExploreRequest,
        '{ "facet": "folder", "filter": { "kinds": ["document"] }, "limit": 20 }',
        {"scan_limit": 5000},
    ),
    (
        ExplorePage,
        """{
          "facet": "folder",
          "buckets": [{ "value": "/notes/rust", "count": 12 }],
          "total": 14, "missing": 2, "more_buckets": 0, "truncated": false
        }""",
        {},
    ),
    (StoreReceipt, '{ "id": "...", "replayed": false }', {}),
    (EngineHealth, '{ "state": "ok" }', {}),
    (EngineHealth, '{ "state": "degraded", "reason": "rate limited" }', {}),
    (EngineHealth, '{ "state": "down", "reason": "connection refused" }', {}),
]

# The wire samples of docs/spec/contract.md §12.
CONTRACT_REQUEST_EXAMPLES: list[tuple[type[BaseModel], str]] = [
    (
        FetchRequest,
        '{"query":"ownership","mode":"hybrid","filter":{"folder":"/notes/rust","kinds":["document"]},'
        '"limit":10,"cursor":"10"}',
    ),
    (
        Hit,
        '{"id":"9f2c1c6e0a8b4d3e7f5a1b2c3d4e5f6a7b8c9d0e","kind":"learning","text":"prefers tabs",'
        '"meta":{"namespace":"team:acme/agent:writer","source":{"kind":"agent"},"tags":["style"],'
        '"observed_at":"2026-10-04T09:30:00Z"},"score":0.0,"confidence":0.8}',
    ),
    (ForgetTarget, '{"ids":["9f2c1c6e0a8b4d3e7f5a1b2c3d4e5f6a7b8c9d0e"]}'),
    (ForgetTarget, '{"filter":{"workspace":"scratch"}}'),
    (
        ExplorePage,
        '{"facet":"folder","buckets":[{"value":"/notes/rust","count":12}],"total":14,"missing":2,'
        '"more_buckets":0,"truncated":false}',
    ),
    (
        EraseRequest,
        '{"reach":{"at":"source:notes","inherit":true,"descendants":true},"kinds":["document"],"whole_tree":false}',
    ),
]

# The item examples of docs/spec/contract.md §5.2 and the inputs of docs/spec/contract.md §6.4.
ITEM_EXAMPLES = [
    '{"type":"document","title":"Ownership","body":{"text":"Ownership moves values."},"mime":"text/markdown",'
    '"meta":{"file_path":"/notes/rust/ownership.md","language":"en","source":{"kind":"folder","id":"notes"}}}',
    '{"type":"conversation","turns":[{"role":"user","text":"Which port?","at":"2026-10-04T09:30:00Z"},'
    '{"role":"assistant","text":"8080.","tool_calls":[{"name":"read_config","id":"call_1"}]}],'
    '"meta":{"thread_id":"thread-42","source":{"kind":"conversation","id":"thread-42"}}}',
    '{"type":"learning","text":"prefers tabs over spaces","kind":"preference","confidence":0.8,'
    '"meta":{"source":{"kind":"agent"},"tags":["style"]}}',
]


@pytest.mark.parametrize(("model", "wire", "defaults"), SEED_API_EXAMPLES)
def test_seed_api_examples_round_trip(model: type[BaseModel], wire: str, defaults: dict[str, Any]) -> None:
    parsed = model.model_validate_json(wire)
    assert parsed.model_dump(mode="json") == {**json.loads(wire), **defaults}
    assert model.model_validate_json(parsed.model_dump_json()) == parsed


@pytest.mark.parametrize(("model", "wire"), CONTRACT_REQUEST_EXAMPLES)
def test_contract_samples_round_trip(model: type[BaseModel], wire: str) -> None:
    parsed = model.model_validate_json(wire)
    assert parsed.model_dump(mode="json") == json.loads(wire)


@pytest.mark.parametrize("wire", ITEM_EXAMPLES)
def test_item_examples_round_trip_and_keep_key_order(wire: str) -> None:
    item = parse_item(wire)
    # Key order matters here too: the tag first, then declaration order (docs/spec/contract.md §4 rules 7, 13).
    assert item.model_dump_json() == wire
    assert parse_item(json.loads(wire)) == item


def test_store_item_tag_picks_the_class() -> None:
    kinds = [type(parse_item(wire)) for wire in ITEM_EXAMPLES]
    assert kinds == [Document, Conversation, Learning]
    with pytest.raises(ValidationError):
        parse_item('{"type":"memo","text":"x"}')


def test_unknown_keys_are_ignored_and_missing_ones_take_defaults() -> None:
    item = parse_item('{"type":"learning","text":"t","kind":"fact","confidence":1,"extra":1}')
    assert isinstance(item, Learning)
    assert item.meta == MemoryMeta()
    assert item.meta.source.kind == "agent"
    assert item.meta.namespace == Namespace.ROOT


def test_meta_omits_root_namespace_empty_tags_and_none() -> None:
    assert MemoryMeta().model_dump(mode="json") == {"source": {"kind": "agent"}}
    placed = MemoryMeta(namespace=Namespace.parse("ws:acme"), tags=["a", "a"])
    assert placed.model_dump(mode="json") == {
        "namespace": "ws:acme",
        "source": {"kind": "agent"},
        "tags": ["a", "a"],
    }


def test_requests_always_write_their_filter() -> None:
    assert ListRequest(limit=5).model_dump(mode="json") == {"filter": {}, "limit": 5}
    recall = RecallRequest(question="q", limit=1)
    assert recall.model_dump(mode="json") == {"question": "q", "filter": {}, "limit": 1}


def test_reach_is_written_with_all_three_keys_and_root_as_root() -> None:
    assert Reach().model_dump(mode="json") == {"at": "root", "inherit": True, "descendants": False}
    assert Reach.model_validate({"at": "agent:x"}) == Reach.of(Namespace.parse("agent:x"))
    assert MetaFilter(reach=Reach.exact(Namespace.ROOT)).model_dump(mode="json") == {
        "reach": {"at": "root", "inherit": False, "descendants": False}
    }


def test_empty_lists_are_omitted_where_the_contract_says() -> None:
    assert Turn(role="user", text="hi").model_dump(mode="json") == {"role": "user", "text": "hi"}
    assert ExportPage().model_dump(mode="json") == {"items": []}
    assert EraseReport(erased_scopes=0).model_dump(mode="json") == {"erased_scopes": 0}
    erase = EraseRequest(reach=Reach())
    assert erase.model_dump(mode="json") == {
        "reach": {"at": "root", "inherit": True, "descendants": False},
        "whole_tree": False,
    }


def test_document_body_is_externally_tagged_with_exactly_one_key() -> None:
    assert DocumentBody.of_text("x").model_dump(mode="json") == {"text": "x"}
    assert DocumentBody.of_uri("https://a").model_dump(mode="json") == {"uri": "https://a"}
    for bad in ({}, {"text": "a", "uri": "b"}):
        with pytest.raises(ValidationError):
            DocumentBody.model_validate(bad)
    empty_text = DocumentBody.of_text("")
    assert empty_text.model_dump(mode="json") == {"text": ""}


def test_forget_target_refuses_both_or_neither() -> None:
    for bad in ({}, {"ids": ["a"], "filter": {}}):
        with pytest.raises(ValidationError):
            ForgetTarget.model_validate(bad)
    assert ForgetTarget.by_ids([]).model_dump(mode="json") == {"ids": []}


def test_health_needs_a_reason_unless_ok() -> None:
    with pytest.raises(ValidationError):
        EngineHealth(state="down")
    with pytest.raises(ValidationError):
        EngineHealth(state="ok", reason="fine")
    assert EngineHealth.ok().is_serving()
    assert EngineHealth.degraded("slow").is_serving()
    assert not EngineHealth.down("gone").is_serving()


def test_time_hint_writes_from_under_its_wire_name() -> None:
    hint = TimeHint.model_validate({"from": "2026-10-01", "to": "2026-10-04", "zone": "Europe/Paris"})
    assert hint.model_dump(mode="json") == {"from": "2026-10-01", "to": "2026-10-04", "zone": "Europe/Paris"}
    by_name = TimeHint.model_validate({"from_": "2026-10-01", "to": "2026-10-04"})
    assert by_name.from_ == hint.from_


def test_instants_are_normalised_to_utc_and_written_in_the_short_form() -> None:
    turn = Turn.model_validate({"role": "user", "text": "x", "at": "2026-10-04T11:30:00.250+02:00"})
    assert turn.model_dump(mode="json")["at"] == "2026-10-04T09:30:00.250Z"
    micro = Turn.model_validate({"role": "user", "text": "x", "at": "2026-10-04T09:30:00.000123Z"})
    assert micro.model_dump(mode="json")["at"] == "2026-10-04T09:30:00.000123Z"


def test_descriptor_writes_fetch_modes_and_omits_a_missing_endpoint() -> None:
    descriptor = EngineDescriptor(id="x", label="X", description="d", fetch_modes=(FetchMode.HYBRID,))
    assert descriptor.model_dump(mode="json") == {
        "id": "x",
        "label": "X",
        "description": "d",
        "hosted": False,
        "needs_endpoint": False,
        "needs_key": False,
        "fetch_modes": ["hybrid"],
    }


def test_lone_surrogates_are_refused_at_construction() -> None:
    with pytest.raises(ValidationError):
        Learning(text="bad \ud800", kind="fact", confidence=0.5)
    with pytest.raises(ValidationError):
        MemoryMeta(tags=["\udfff"])


def test_store_item_type_adapter_is_usable_by_hosts() -> None:
    adapter: TypeAdapter[Document | Conversation | Learning] = TypeAdapter(StoreItem)
    item = adapter.validate_python({"type": "document", "body": {"text": "x"}})
    assert isinstance(item, Document)
