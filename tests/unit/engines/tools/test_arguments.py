"""Every argument rule of docs/spec/tools-and-context.md §4–5, with its exact message, refused before the engine is
called."""

from __future__ import annotations

from typing import Any

import pytest

from engines.contract import InvalidRequestError, ListPage, ListRequest, MetaFilter, Namespace
from engines.reference import ReferenceEngine
from engines.tools import MemoryTools

Q = {"question": "q"}
DAY = "2026-10-04"
LEARNING = {"learning": {"text": "prefers tabs"}}

# (tool, arguments, message), one or more per rule; the message is the error's, without its prefix.
DECODING: list[tuple[str, Any, str]] = [
    ("memory_list", "{not json", "memory_list: arguments are not valid JSON"),
    ("memory_list", "", "memory_list: arguments are not valid JSON"),
    ("memory_list", b"\xff\xfe{", "memory_list: arguments are not valid JSON"),
    ("memory_list", '{"limit": NaN}', "memory_list: arguments are not valid JSON"),
    ("memory_list", "[1]", "memory_list: arguments must be a JSON object"),
    ("memory_list", "null", "memory_list: arguments must be a JSON object"),
    ("memory_get", b'"ids"', "memory_get: arguments must be a JSON object"),
]

FIXED_KEYS: list[tuple[str, Any, str]] = [
    (
        "memory_recall",
        {**Q, "namespace": "agent:x"},
        "memory_recall: `namespace` is fixed by the host and cannot be set",
    ),
    (
        "memory_list",
        {"filter": {"reach": {"at": "agent:x"}}},
        "memory_list: `filter.reach` is fixed by the host and cannot be set",
    ),
    ("memory_list", {"reach": None}, "memory_list: `reach` is fixed by the host and cannot be set"),
    (
        "memory_store",
        {"conversation": {"turns": [{"role": "user", "text": "hi"}, {"role": "user", "text": "a", "namespace": "x"}]}},
        "memory_store: `conversation.turns[1].namespace` is fixed by the host and cannot be set",
    ),
    # Depth first in key order: the nested key of the first branch is found before a later top-level key.
    (
        "memory_fetch",
        {"filter": {"workspace": "w", "tags_any": [{"reach": 1}]}, "namespace": "x"},
        "memory_fetch: `filter.tags_any[0].reach` is fixed by the host and cannot be set",
    ),
    (
        "memory_get",
        {"ids": [["a", {"x": {"namespace": 1}}]]},
        "memory_get: `ids[0][1].x.namespace` is fixed by the host and cannot be set",
    ),
    # Before the unknown-key check, even inside an unknown key.
    (
        "memory_forget",
        {"bogus": {"namespace": 1}},
        "memory_forget: `bogus.namespace` is fixed by the host and cannot be set",
    ),
    (
        "memory_explore",
        {"facet": "kind", "reach": {}},
        "memory_explore: `reach` is fixed by the host and cannot be set",
    ),
]

UNKNOWN: list[tuple[str, Any, str]] = [
    ("memory_recall", {**Q, "colour": 1}, "memory_recall: unknown field `colour`"),
    ("memory_fetch", {"query": "q", "filter": {"source_id": "s"}}, "memory_fetch: unknown field `filter.source_id`"),
    ("memory_get", {"ids": ["a"], "limit": 5}, "memory_get: unknown field `limit`"),
    ("memory_store", {"learning": {"text": "t", "kind": "fact"}}, "memory_store: unknown field `learning.kind`"),
    (
        "memory_store",
        {"conversation": {"turns": [{"role": "user", "text": "hi", "at": "2026-10-04T09:30:00Z"}]}},
        "memory_store: unknown field `conversation.turns[0].at`",
    ),
    (
        "memory_recall",
        {**Q, "refers_to": {"from": DAY, "to": DAY, "zone": "UTC"}},
        "memory_recall: unknown field `refers_to.zone`",
    ),
    ("memory_store", {**LEARNING, "meta": {}}, "memory_store: unknown field `meta`"),
]

REQUIRED: list[tuple[str, Any, str]] = [
    ("memory_recall", {}, "memory_recall: `question` is required"),
    ("memory_recall", {"question": None}, "memory_recall: `question` is required"),
    ("memory_fetch", {"mode": "keyword"}, "memory_fetch: `query` is required"),
    ("memory_get", {}, "memory_get: `ids` is required"),
    ("memory_explore", {"facet": None}, "memory_explore: `facet` is required"),
    ("memory_store", {"learning": {}}, "memory_store: `learning.text` is required"),
    ("memory_store", {"document": {"title": "t"}}, "memory_store: `document.text` is required"),
    ("memory_store", {"conversation": {}}, "memory_store: `conversation.turns` is required"),
    (
        "memory_store",
        {"conversation": {"turns": [{"text": "hi"}]}},
        "memory_store: `conversation.turns[0].role` is required",
    ),
    ("memory_recall", {**Q, "refers_to": {"from": DAY}}, "memory_recall: `refers_to.to` is required"),
    (
        "memory_fetch",
        {"query": "q", "refers_to": {"from": None, "to": DAY}},
        "memory_fetch: `refers_to.from` is required",
    ),
]

TYPES: list[tuple[str, Any, str]] = [
    ("memory_recall", {"question": 5}, "memory_recall: `question` must be a string"),
    ("memory_recall", {**Q, "limit": "5"}, "memory_recall: `limit` must be an integer"),
    ("memory_list", {"limit": True}, "memory_list: `limit` must be an integer"),
    ("memory_list", {"limit": 10.0}, "memory_list: `limit` must be an integer"),
    (
        "memory_store",
        {"learning": {"text": "t", "confidence": "high"}},
        "memory_store: `learning.confidence` must be a number",
    ),
    (
        "memory_store",
        {"learning": {"text": "t", "confidence": False}},
        "memory_store: `learning.confidence` must be a number",
    ),
    ("memory_get", {"ids": "abc"}, "memory_get: `ids` must be an array"),
    ("memory_recall", {**Q, "filter": []}, "memory_recall: `filter` must be an object"),
    ("memory_list", {"filter": {"kinds": ["document", 3]}}, "memory_list: `filter.kinds[1]` must be a string"),
    ("memory_store", {"conversation": {"turns": ["hi"]}}, "memory_store: `conversation.turns[0]` must be an object"),
    ("memory_get", {"ids": [None]}, "memory_get: `ids[0]` must be a string"),
    ("memory_store", {"learning": "prefers tabs"}, "memory_store: `learning` must be an object"),
    ("memory_recall", {"question": "\ud800"}, "memory_recall: `question` must be valid unicode text"),
]

RANGES: list[tuple[str, Any, str]] = [
    ("memory_recall", {**Q, "limit": 0}, "memory_recall: `limit` must be between 1 and 50"),
    ("memory_fetch", {"query": "q", "limit": 51}, "memory_fetch: `limit` must be between 1 and 50"),
    ("memory_list", {"limit": -1}, "memory_list: `limit` must be between 1 and 50"),
    ("memory_explore", {"facet": "kind", "limit": 10**20}, "memory_explore: `limit` must be between 1 and 50"),
    (
        "memory_store",
        {"learning": {"text": "t", "confidence": 1.5}},
        "memory_store: `learning.confidence` must be between 0 and 1",
    ),
    (
        "memory_store",
        {"learning": {"text": "t", "confidence": -0.01}},
        "memory_store: `learning.confidence` must be between 0 and 1",
    ),
    (
        "memory_store",
        {"learning": {"text": "t", "confidence": float("nan")}},
        "memory_store: `learning.confidence` must be between 0 and 1",
    ),
    ("memory_get", {"ids": []}, "memory_get: `ids` must hold between 1 and 200 ids"),
    ("memory_get", {"ids": [f"id{i}" for i in range(201)]}, "memory_get: `ids` must hold between 1 and 200 ids"),
    ("memory_forget", {"ids": []}, "memory_forget: `ids` must hold between 1 and 200 ids"),
]

BLANKS: list[tuple[str, Any, str]] = [
    ("memory_recall", {"question": "  \n"}, "memory_recall: `question` must not be empty"),
    ("memory_fetch", {"query": ""}, "memory_fetch: `query` must not be empty"),
    ("memory_fetch", {"query": "q", "cursor": ""}, "memory_fetch: `cursor` must not be empty"),
    ("memory_list", {"cursor": " "}, "memory_list: `cursor` must not be empty"),
    ("memory_list", {"filter": {"workspace": " "}}, "memory_list: `filter.workspace` must not be empty"),
    ("memory_recall", {**Q, "filter": {"folder": ""}}, "memory_recall: `filter.folder` must not be empty"),
    (
        "memory_explore",
        {"facet": "tag", "filter": {"observed_after": ""}},
        "memory_explore: `filter.observed_after` must not be empty",
    ),
    ("memory_list", {"filter": {"tags_any": ["a", " "]}}, "memory_list: `filter.tags_any[1]` must not be empty"),
    ("memory_forget", {"filter": {"thread_id": ""}}, "memory_forget: `filter.thread_id` must not be empty"),
    ("memory_get", {"ids": ["a", " "]}, "memory_get: `ids[1]` must not be empty"),
    ("memory_forget", {"ids": [""]}, "memory_forget: `ids[0]` must not be empty"),
    ("memory_store", {**LEARNING, "tags": ["style", ""]}, "memory_store: `tags[1]` must not be empty"),
]

CHOICES: list[tuple[str, Any, str]] = [
    (
        "memory_list",
        {"filter": {"kinds": ["document", "note"]}},
        "memory_list: `filter.kinds[1]` `note` is not an item kind",
    ),
    (
        "memory_recall",
        {**Q, "filter": {"sources": ["web"]}},
        "memory_recall: `filter.sources[0]` `web` is not a source kind",
    ),
    ("memory_forget", {"filter": {"sources": [""]}}, "memory_forget: `filter.sources[0]` `` is not a source kind"),
    ("memory_explore", {"facet": "namespace"}, "memory_explore: `facet` `namespace` is not a facet"),
    ("memory_explore", {"facet": "colour"}, "memory_explore: `facet` `colour` is not a facet"),
    (
        "memory_fetch",
        {"query": "q", "mode": "semantic"},
        "memory_fetch: `mode` `semantic` is not a fetch mode this memory offers",
    ),
    (
        "memory_store",
        {"conversation": {"turns": [{"role": "user", "text": "a"}, {"role": "robot", "text": "b"}]}},
        "memory_store: `conversation.turns[1].role` `robot` is not a role",
    ),
    (
        "memory_store",
        {"learning": {"text": "t", "learning_kind": "opinion"}},
        "memory_store: `learning.learning_kind` `opinion` is not a learning kind",
    ),
]

TIMES: list[tuple[str, Any, str]] = [
    (
        "memory_list",
        {"filter": {"observed_after": DAY}},
        "memory_list: `filter.observed_after` must be an RFC 3339 time",
    ),
    (
        "memory_list",
        {"filter": {"observed_after": "2026-10-04T09:30:00"}},
        "memory_list: `filter.observed_after` must be an RFC 3339 time",
    ),
    (
        "memory_recall",
        {**Q, "filter": {"observed_before": "yesterday"}},
        "memory_recall: `filter.observed_before` must be an RFC 3339 time",
    ),
    (
        "memory_fetch",
        {"query": "q", "filter": {"observed_before": "2026-13-04T09:30:00Z"}},
        "memory_fetch: `filter.observed_before` must be an RFC 3339 time",
    ),
    (
        "memory_forget",
        {"filter": {"observed_after": "2026-10-04T09:30:00+0200"}},
        "memory_forget: `filter.observed_after` must be an RFC 3339 time",
    ),
    (
        "memory_recall",
        {**Q, "refers_to": {"from": "04/10/2026", "to": DAY}},
        "memory_recall: `refers_to.from` must be a date written YYYY-MM-DD",
    ),
    (
        "memory_recall",
        {**Q, "refers_to": {"from": DAY, "to": "2026-02-30"}},
        "memory_recall: `refers_to.to` must be a date written YYYY-MM-DD",
    ),
    (
        "memory_fetch",
        {"query": "q", "refers_to": {"from": "2026-10-04T00:00:00Z", "to": DAY}},
        "memory_fetch: `refers_to.from` must be a date written YYYY-MM-DD",
    ),
    (
        "memory_fetch",
        {"query": "q", "refers_to": {"from": "2026-10-05", "to": DAY}},
        "memory_fetch: `refers_to.from` is after `refers_to.to`",
    ),
]

EXACTLY_ONE: list[tuple[str, Any, str]] = [
    ("memory_store", {}, "memory_store: give exactly one of `learning`, `document` or `conversation`"),
    ("memory_store", {"tags": ["x"]}, "memory_store: give exactly one of `learning`, `document` or `conversation`"),
    (
        "memory_store",
        {**LEARNING, "document": {"text": "d"}},
        "memory_store: give exactly one of `learning`, `document` or `conversation`",
    ),
    (
        "memory_store",
        {**LEARNING, "document": {"text": "d"}, "conversation": {"turns": []}},
        "memory_store: give exactly one of `learning`, `document` or `conversation`",
    ),
    ("memory_forget", {}, "memory_forget: give exactly one of `ids` or `filter`"),
    ("memory_forget", {"ids": ["a"], "filter": {"url": "u"}}, "memory_forget: give exactly one of `ids` or `filter`"),
    ("memory_forget", {"ids": None, "filter": None}, "memory_forget: give exactly one of `ids` or `filter`"),
    ("memory_forget", {"filter": {}}, "memory_forget: `filter` must set at least one field"),
    ("memory_forget", {"filter": {"kinds": [], "tags_any": []}}, "memory_forget: `filter` must set at least one field"),
    ("memory_forget", {"filter": {"workspace": None}}, "memory_forget: `filter` must set at least one field"),
]

VECTORS = DECODING + FIXED_KEYS + UNKNOWN + REQUIRED + TYPES + RANGES + BLANKS + CHOICES + TIMES + EXACTLY_ONE


@pytest.mark.parametrize(("tool", "args", "message"), VECTORS)
async def test_each_rule_refuses_with_its_message(tool: str, args: Any, message: str) -> None:
    engine = ReferenceEngine()
    with pytest.raises(InvalidRequestError) as caught:
        await MemoryTools(engine).call(tool, args)
    assert caught.value.message == message
    # Refused before the engine is called: nothing was stored or forgotten.
    assert (await engine.list(ListRequest(limit=1))).items == []


@pytest.mark.parametrize(("tool", "args", "message"), FIXED_KEYS)
async def test_fixed_keys_are_refused_under_a_placed_scope_too(tool: str, args: Any, message: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        await MemoryTools(ReferenceEngine()).placed_at(Namespace.parse("agent:writer")).call(tool, args)
    assert caught.value.message == message


@pytest.mark.parametrize(
    "args",
    [
        None,
        {},
        "{}",
        b"{}",
        {"filter": None, "limit": None, "cursor": None},
        {"filter": {"kinds": [], "sources": [], "tags_any": []}},
        '{"filter": {"workspace": "w", "observed_after": "2026-10-04t09:30:00z"}, "limit": 50}',
    ],
)
async def test_valid_list_arguments_are_accepted(args: Any) -> None:
    assert await MemoryTools(ReferenceEngine()).call("memory_list", args) == '{"items":[]}'


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-10-04T09:30:00Z", "2026-10-04T09:30:00Z"),
        ("2026-10-04t11:30:00+02:00", "2026-10-04T09:30:00Z"),
        ("2026-10-04 04:30:00.25-05:00", "2026-10-04T09:30:00.250Z"),
        ("2026-10-04T09:30:00.123456789z", "2026-10-04T09:30:00.123456Z"),
    ],
)
async def test_rfc3339_times_with_any_offset_are_read_as_utc(text: str, utc: str) -> None:
    seen: list[MetaFilter] = []

    class Spy(ReferenceEngine):
        async def list(self, req: ListRequest) -> ListPage:
            seen.append(req.filter)
            return await super().list(req)

    await MemoryTools(Spy()).call("memory_list", {"filter": {"observed_after": text, "observed_before": text}})
    assert seen[0].model_dump(mode="json") == {"observed_after": utc, "observed_before": utc}
