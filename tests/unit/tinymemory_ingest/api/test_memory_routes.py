"""The contract's reads over HTTP against the local engine: bodies in and out are exactly the contract's JSON."""

from __future__ import annotations

import pytest

from engines.contract import FetchPage, Hit, ListPage, RecallAnswer
from tests.unit.tinymemory_ingest.api.conftest import Api


async def test_fetch_takes_the_contracts_request_and_answers_its_page(api: Api) -> None:
    # The seed-api example of a page-two request, with a filter the seeded items match.
    body = {"query": "zeolites", "mode": "keyword", "filter": {"kinds": ["document"]}, "limit": 2}
    first = await api.post("/v1/fetch", body)
    assert first.status_code == 200
    page = FetchPage.model_validate(first.json())
    assert len(page.hits) == 2 and page.next_cursor is not None
    assert first.json() == page.model_dump(mode="json")  # nothing beyond the wire form, no nulls
    assert "null" not in first.text
    second = await api.post("/v1/fetch", {**body, "cursor": page.next_cursor})
    ids = [h.id for h in page.hits] + [h["id"] for h in second.json()["hits"]]
    assert len(ids) == len(set(ids)) == 3


async def test_recall_answers_with_citations_in_the_wire_shape(api: Api) -> None:
    response = await api.post("/v1/recall", {"question": "who likes zeolites?", "limit": 3})
    answer = RecallAnswer.model_validate(response.json())
    assert response.status_code == 200 and answer.citations
    assert set(response.json()) <= {"answer", "citations", "model"}
    assert set(response.json()["citations"][0]) <= {"id", "kind", "snippet", "meta", "score"}


async def test_list_get_and_explore(api: Api) -> None:
    listed = ListPage.model_validate((await api.post("/v1/list", {"limit": 10})).json())
    assert len(listed.items) == 4  # no reach and no token: the root's whole subtree
    ids = [h.id for h in listed.items]
    got = await api.post("/v1/get", {"ids": [ids[0], "0" * 40]})
    assert [Hit.model_validate(h).id for h in got.json()] == [ids[0]]
    explored = await api.post("/v1/explore", {"facet": "kind", "limit": 5})
    assert explored.status_code == 200
    assert {b["value"] for b in explored.json()["buckets"]} <= {"document", "learning"}


@pytest.mark.parametrize(
    ("path", "body", "status", "kind", "message"),
    [
        ("/v1/fetch", {"query": " ", "mode": "keyword", "limit": 3}, 400, "invalid_request", "must not be empty"),
        ("/v1/recall", {"question": "x", "limit": 0}, 400, "invalid_request", "limit"),
        ("/v1/fetch", {"query": "x", "mode": "psychic", "limit": 3}, 422, "invalid_request", "`mode`"),
        ("/v1/list", {"limit": "ten"}, 422, "invalid_request", "`limit`"),
        ("/v1/list", ["not", "an", "object"], 422, "invalid_request", "JSON object"),
        ("/v1/get", {"ids": []}, 400, "invalid_request", "between 1 and 200"),
    ],
)
async def test_bad_requests_name_the_field(
    api: Api, path: str, body: object, status: int, kind: str, message: str
) -> None:
    response = await api.post(path, body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["kind"] == kind and message in error["message"]
    assert "Traceback" not in response.text


async def test_unknown_route_and_method(api: Api) -> None:
    missing = await api.client.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.json()["error"]["kind"] == "not_found"
    wrong = await api.client.get("/v1/fetch")
    assert wrong.status_code == 405


async def test_openapi_and_docs_are_served(api: Api) -> None:
    schema = (await api.client.get("/openapi.json")).json()
    assert {"/v1/recall", "/v1/fetch", "/v1/list", "/v1/get", "/v1/explore", "/healthz", "/readyz"} <= set(
        schema["paths"]
    )
    assert (await api.client.get("/docs")).status_code == 200
