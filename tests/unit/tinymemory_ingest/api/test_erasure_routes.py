"""`POST /v1/erasures` and `GET /v1/erasures/{id}`: admin only, answered at once, the receipt names the token."""

from __future__ import annotations

import asyncio
from typing import Any

from tests.unit.tinymemory_ingest.api.conftest import Api


async def _finished(api: Api, erasure_id: str, headers: dict[str, str] | None = None) -> dict[str, Any]:
    for _ in range(200):
        response = await api.client.get(f"/v1/erasures/{erasure_id}", headers=headers)
        assert response.status_code == 200
        body: dict[str, Any] = response.json()
        if body["status"] in ("completed", "failed"):
            return body
        await asyncio.sleep(0.02)
    raise AssertionError(f"erasure {erasure_id} did not finish")


def _texts(api_json: dict[str, Any]) -> set[str]:
    return {hit["text"].split("\n\n")[-1] for hit in api_json["items"]}


async def test_an_account_is_erased_through_the_api(api: Api) -> None:
    admin = api.token("ops", admin=True, reach="subtree")
    asked = await api.post("/v1/erasures", {"namespace": "user:a"}, admin)
    assert asked.status_code == 202
    receipt = asked.json()
    assert receipt["status"] == "queued" and asked.headers["location"] == f"/v1/erasures/{receipt['id']}"
    done = await _finished(api, receipt["id"], admin)
    assert (done["status"], done["requested_by"], done["method"]) == ("completed", "ops", "erase")
    assert done["verification"]["passed"] is True and done["target"]["namespace"] == "user:a"
    left = await api.post("/v1/list", {"limit": 10}, admin)
    assert _texts(left.json()) == {"the root knows about zeolites", "bob likes zeolites"}
    again = await api.post("/v1/erasures", {"namespace": "user:a"}, admin)
    assert again.status_code == 202 and again.json()["id"] == receipt["id"]


async def test_only_some_kinds_of_an_account(api: Api) -> None:
    asked = await api.post("/v1/erasures", {"namespace": "user:a", "kinds": ["learning"]})
    done = await _finished(api, asked.json()["id"])
    assert done["status"] == "completed" and done["target"]["kinds"] == ["learning"]
    left = await api.post("/v1/list", {"limit": 10})
    assert "prefers tabs over spaces" not in _texts(left.json()) and "alice likes zeolites" in _texts(left.json())


async def test_refusals_follow_the_error_table(api: Api) -> None:
    assert (await api.post("/v1/erasures", {"source_id": "nope"})).status_code == 404
    assert (await api.client.get("/v1/erasures/nope")).json()["error"]["kind"] == "not_found"
    for shapeless in ({}, {"source_id": "a", "namespace": "user:a"}, {"namespace": "root"}, {"namespace": "x:y"}):
        response = await api.post("/v1/erasures", shapeless)
        assert response.status_code == 422, shapeless
    assert "root namespace" in (await api.post("/v1/erasures", {"namespace": "root"})).json()["error"]["message"]
    reader = api.token("reader", place="user:a")
    forbidden = await api.post("/v1/erasures", {"namespace": "user:a"}, reader)
    assert forbidden.status_code == 403 and "admin token" in forbidden.json()["error"]["message"]
    assert (await api.client.get("/v1/erasures/nope", headers=reader)).status_code == 403
    assert (await api.post("/v1/erasures", {"namespace": "user:a"})).status_code == 401  # tokens exist now


async def test_without_tokens_the_receipt_says_loopback(api: Api) -> None:
    asked = await api.post("/v1/erasures", {"namespace": "user:b"})
    assert (await _finished(api, asked.json()["id"]))["requested_by"] == "loopback"
