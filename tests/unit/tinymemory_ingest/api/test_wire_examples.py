"""The API's bodies against the wire examples of seed-api.md: the same keys, in the same order, the same values."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from engines.contract import Learning, LearningKind, MemoryMeta, Namespace, SourceKind, SourceRef
from tests.unit.tinymemory_ingest.api.conftest import Api

# seed-api.md, "A Hit" (its id is illustrative: an id is the item's fingerprint).
HIT_EXAMPLE = """{
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
}"""
FETCH_PAGE_TWO = (
    '{"query": "ownership", "mode": "hybrid", "filter": {"kinds": ["document"], "folder": "/notes/rust"}, '
    '"limit": 10, "cursor": "10"}'
)
EXPLORE_REQUEST = '{ "facet": "folder", "filter": { "kinds": ["document"] }, "limit": 20 }'
EXPLORE_PAGE_KEYS = ["facet", "buckets", "total", "missing", "more_buckets", "truncated"]


async def test_a_listed_hit_is_the_seeds_hit_key_for_key(api: Api) -> None:
    meta = MemoryMeta(
        namespace=Namespace.parse("team:acme/agent:writer"),
        source=SourceRef(kind=SourceKind.AGENT),
        tags=["style"],
        observed_at=datetime(2026, 10, 4, 9, 30, tzinfo=UTC),
    )
    receipt = await api.engine.store(
        Learning(text="prefers tabs", kind=LearningKind.PREFERENCE, confidence=0.8, meta=meta)
    )
    body = {"ids": [receipt.id], "reach": {"at": "team:acme/agent:writer"}}
    (hit,) = (await api.post("/v1/get", body)).json()
    expected = {**json.loads(HIT_EXAMPLE), "id": receipt.id}
    assert hit == expected
    assert list(hit) == list(expected) and list(hit["meta"]) == list(expected["meta"])


async def test_the_seeds_requests_are_taken_as_they_are(api: Api) -> None:
    explored = await api.client.post(
        "/v1/explore", content=EXPLORE_REQUEST, headers={"content-type": "application/json"}
    )
    assert explored.status_code == 200 and list(explored.json()) == EXPLORE_PAGE_KEYS
    json_body = {"content-type": "application/json"}
    # The contract's shape (not 422), but a cursor is the engine's own: the seed's "10" is not one of ours.
    page_two = await api.client.post("/v1/fetch", content=FETCH_PAGE_TWO, headers=json_body)
    assert page_two.status_code == 400 and page_two.json()["error"]["message"] == "unknown cursor `10`"
    first = {k: v for k, v in json.loads(FETCH_PAGE_TWO).items() if k != "cursor"}
    assert (await api.post("/v1/fetch", first)).json() == {"hits": []}
