"""Who may read what: bearer tokens confine every read to their reach, and admin routes to admin tokens."""

from __future__ import annotations

import httpx
import pytest

from tests.unit.tinymemory_ingest.api.conftest import Api


def _texts(response_json: dict[str, list[dict[str, str]]], key: str = "items") -> set[str]:
    return {hit["text"].split("\n\n")[-1] for hit in response_json[key]}


async def test_without_tokens_every_request_is_the_roots(api: Api) -> None:
    assert (await api.post("/v1/list", {"limit": 10})).status_code == 200
    assert (await api.client.get("/v1/status")).status_code == 200


async def test_once_a_token_exists_a_missing_or_wrong_one_is_401(api: Api) -> None:
    api.token("alice", place="user:a")
    missing = await api.post("/v1/list", {"limit": 10})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"] == {
        "kind": "unauthorized",
        "message": "a bearer token is required: send `Authorization: Bearer <token>`",
    }
    wrong = await api.post("/v1/list", {"limit": 10}, {"Authorization": "Bearer tm_nope"})
    assert wrong.status_code == 401 and "not valid here" in wrong.json()["error"]["message"]
    assert "tm_nope" not in wrong.text


async def test_a_token_reads_its_place_and_above_never_a_sibling(api: Api) -> None:
    alice = api.token("alice", place="user:a")
    listed = await api.post("/v1/list", {"limit": 10}, alice)
    assert listed.status_code == 200
    assert _texts(listed.json()) == {
        "the root knows about zeolites",
        "alice likes zeolites",
        "prefers tabs over spaces",
    }
    fetched = await api.post("/v1/fetch", {"query": "zeolites", "mode": "keyword", "limit": 10}, alice)
    assert "bob likes zeolites" not in _texts(fetched.json(), "hits")
    recalled = await api.post("/v1/recall", {"question": "who likes zeolites?", "limit": 10}, alice)
    assert all("bob" not in c["snippet"] for c in recalled.json()["citations"])


async def test_get_of_a_siblings_id_is_missing(api: Api) -> None:
    every = (await api.post("/v1/list", {"limit": 10})).json()["items"]
    bobs = next(hit["id"] for hit in every if "bob" in hit["text"])
    alice = api.token("alice", place="user:a")
    assert (await api.post("/v1/get", {"ids": [bobs]}, alice)).json() == []


@pytest.mark.parametrize(
    ("reach", "allowed"),
    [
        ({"at": "user:a", "inherit": False}, True),  # narrower: exact
        ({"at": ""}, True),  # the root alone is within user:a's ancestors
        ({"at": "user:b"}, False),  # a sibling
        ({"at": "user:a", "inherit": False, "descendants": True}, False),  # wider: below user:a
        ({"at": "", "inherit": False, "descendants": True}, False),  # the whole tree
    ],
)
async def test_a_request_may_name_a_reach_only_within_its_tokens(
    api: Api, reach: dict[str, object], allowed: bool
) -> None:
    alice = api.token("alice", place="user:a")
    response = await api.post("/v1/list", {"limit": 10, "filter": {"reach": reach}}, alice)
    if allowed:
        assert response.status_code == 200
        return
    assert response.status_code == 403
    error = response.json()["error"]
    assert error["kind"] == "forbidden" and "is not within token 'alice'" in error["message"]


async def test_a_subtree_token_reads_below_its_place(api: Api) -> None:
    everyone = api.token("ops", place="", reach="subtree")
    listed = await api.post("/v1/list", {"limit": 10}, everyone)
    assert "bob likes zeolites" in _texts(listed.json())
    narrowed = await api.post(
        "/v1/list", {"limit": 10, "filter": {"reach": {"at": "user:b", "inherit": False}}}, everyone
    )
    assert _texts(narrowed.json()) == {"bob likes zeolites"}


async def test_admin_routes_need_an_admin_token(api: Api) -> None:
    alice = api.token("alice", place="user:a")
    admin = api.token("root", admin=True)
    for method, path in (("GET", "/v1/status"), ("GET", "/v1/sources"), ("GET", "/v1/dlq")):
        refused = await api.client.request(method, path, headers=alice)
        assert refused.status_code == 403 and "needs an admin token" in refused.json()["error"]["message"]
        assert (await api.client.request(method, path, headers=admin)).status_code == 200


async def test_a_revoked_token_is_refused_at_once(api: Api) -> None:
    alice = api.token("alice", place="user:a")
    api.token("other")
    assert (await api.post("/v1/list", {"limit": 1}, alice)).status_code == 200
    api.tokens.revoke("alice")
    assert (await api.post("/v1/list", {"limit": 1}, alice)).status_code == 401


async def test_without_tokens_only_requests_addressed_to_loopback_are_answered(api: Api) -> None:
    # A page that rebinds its own name to 127.0.0.1 sends that name as the Host.
    rebound = await api.post("/v1/list", {"limit": 1}, {"Host": "evil.example"})
    assert rebound.status_code == 403 and "addressed to loopback" in rebound.json()["error"]["message"]
    for host in ("localhost:8765", "127.0.0.1", "[::1]:8765"):
        assert (await api.post("/v1/list", {"limit": 1}, {"Host": host})).status_code == 200
    token = api.token("remote")
    assert (await api.post("/v1/list", {"limit": 1}, {"Host": "memory.example", **token})).status_code == 200


async def test_without_tokens_a_remote_peer_is_refused_whatever_host_it_names(api: Api) -> None:
    # A server bound beyond loopback whose last token was revoked: a remote client writing `Host: 127.0.0.1`.
    app = api.client._transport.app  # type: ignore[attr-defined]
    remote = httpx.ASGITransport(app=app, client=("203.0.113.7", 40000))
    async with httpx.AsyncClient(transport=remote, base_url="http://127.0.0.1") as client:
        refused = await client.post("/v1/list", json={"limit": 1})
        assert refused.status_code == 403 and "from loopback" in refused.json()["error"]["message"]
        token = api.token("remote")
        assert (await client.post("/v1/list", json={"limit": 1}, headers=token)).status_code == 200
    local = httpx.ASGITransport(app=app, client=("::1", 40000))
    async with httpx.AsyncClient(transport=local, base_url="http://[::1]") as client:
        api.tokens.revoke("remote")
        assert (await client.post("/v1/list", json={"limit": 1})).status_code == 200
