"""The CortexDB double reproduces the server's behaviour and quirks the engine is shaped around
(docs/spec/cortexdb.md §13)."""

from __future__ import annotations

import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engines.contract import Document
from engines.cortex import Timing
from tests.fixtures.cortex_double import Served, served
from tinymemory_ingest.cortex_double import CortexDouble, DoubleConfig, ManualClock, serve
from tinymemory_ingest.cortex_double.log import EventLog, EventRecord, words
from tinymemory_ingest.cortex_double.packs import first_held, rank

AUTH = {"Authorization": "Bearer test-key"}
SCOPE = "app:tinymemory/app:learnings"


def body(text: str, key: str | None = None, labels: list[str] | None = None, scope: str = SCOPE) -> dict[str, Any]:
    out: dict[str, Any] = {
        "scope": scope,
        "modality": "observation",
        "content": {"kind": "message", "role": "user", "text": text},
        "context": {"labels": labels or []},
    }
    if key is not None:
        out["idempotency_key"] = key
    return out


@pytest.fixture
async def client(direct: Served) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=direct.url, headers=AUTH) as http:
        yield http


async def test_every_listed_event_comes_twice_and_cursors_are_offsets(client: httpx.AsyncClient) -> None:
    for n in range(3):
        assert (await client.post("/v1/experience", json=body(f"e{n}"))).status_code == 202
    page = (await client.get("/v1/events", params={"scope": SCOPE, "limit": 4})).json()
    assert [i["content"]["text"] for i in page["items"]] == ["e2", "e2", "e1", "e1"]
    assert (page["has_more"], page["next_cursor"]) == (True, "4")
    rest = (await client.get("/v1/events", params={"scope": SCOPE, "limit": 4, "cursor": "4"})).json()
    assert [i["content"]["text"] for i in rest["items"]] == ["e0", "e0"] and "next_cursor" not in rest
    # An unknown parameter is ignored: a misspelt cursor serves page one for ever.
    again = (await client.get("/v1/events", params={"scope": SCOPE, "limit": 4, "page": "4"})).json()
    assert again["items"] == page["items"]
    for params, code in (({"limit": 0}, "INVALID_BODY"), ({"cursor": "x"}, "INVALID_CURSOR"), ({}, "INVALID_BODY")):
        query = {"scope": SCOPE, **params} if params else {}
        refused = await client.get("/v1/events", params=query)
        assert (refused.status_code, refused.json()["error_code"]) == (422, code)


async def test_size_and_label_refusals(client: httpx.AsyncClient) -> None:
    cases = [
        (body("x" * (1_048_576 - len("[user] ")) + "x"), "INVALID_ENVELOPE"),
        (body("ok", labels=[f"l{n}" for n in range(65)]), "INVALID_BODY"),
        (body("ok", labels=["x" * 257]), "INVALID_BODY"),
        (body("ok", labels=["lang:en"]), "INVALID_BODY"),
        ({**body("ok"), "extra": 1}, "INVALID_BODY"),
        (body("ok", scope="bogus:x/app:learnings"), "UNREGISTERED_SCOPE_TYPE"),
        (body("ok", scope="not a scope"), "INVALID_BODY"),
    ]
    for sent, code in cases:
        answer = await client.post("/v1/experience", json=sent)
        assert (answer.status_code, answer.json()["error_code"]) == (422, code), code
    fits = body("x" * (1_048_576 - len("[user] ")), labels=[f"l{n}" for n in range(64)])
    assert (await client.post("/v1/experience", json=fits)).status_code == 202
    bulk = await client.post("/v1/experience/bulk", json={"items": [body("fine"), body("ok", labels=["lang:x"])]})
    assert (bulk.status_code, bulk.json()["details"]) == (422, {"index": 1})


async def test_body_keys_replay_equal_bodies_and_refuse_others(direct: Served, client: httpx.AsyncClient) -> None:
    first = (await client.post("/v1/experience", json=body("same", key="k1"))).json()
    reordered = dict(reversed(list(body("same", key="k1").items())))
    second = (await client.post("/v1/experience", json=reordered)).json()
    assert second == {**first, "replayed_from_idempotency": True}
    conflict = await client.post("/v1/experience", json=body("other", key="k1"))
    assert (conflict.status_code, conflict.json()["error_code"]) == (409, "IDEMPOTENCY_CONFLICT")
    assert len(direct.double.events()) == 1


async def test_packs_expire_and_any_forget_or_erasure_drops_them() -> None:
    clock = ManualClock()
    with served("direct", clock=clock) as direct:
        async with httpx.AsyncClient(base_url=direct.url, headers=AUTH) as client:
            event = (await client.post("/v1/experience", json=body("packed fact"))).json()["event_id"]

            async def pack() -> str:
                answer = await client.post("/v1/recall", json={"scope": SCOPE, "query": "packed", "view": "granular"})
                return str(answer.json()["pack_id"])

            async def answer(pack_id: str, scope: str = SCOPE) -> httpx.Response:
                return await client.post("/v1/answer", json={"scope": scope, "question": "q", "use_pack_id": pack_id})

            assert (await answer(await pack())).json()["answer"] == "Based on memory: packed fact"
            stale = await pack()
            clock.advance(61)
            assert (await answer(stale)).json()["error_code"] == "PACK_NOT_FOUND"
            mismatched = await answer(await pack(), "app:tinymemory/agent:a/app:learnings")
            assert (mismatched.status_code, mismatched.json()["error_code"]) == (400, "PACK_SCOPE_MISMATCH")
            dropped = await pack()
            elsewhere = {"scope": "app:tinymemory/app:documents", "selector": {"memory_ids": ["evt_999"]}}
            assert (await client.post("/v1/forget", json=elsewhere)).status_code == 200
            assert (await answer(dropped)).status_code == 404
            assert event.startswith("evt_")


async def test_forget_needs_a_selector_and_keeps_events_by_default(direct: Served, client: httpx.AsyncClient) -> None:
    event = (await client.post("/v1/experience", json=body("forgettable", key="fk"))).json()["event_id"]
    for sent, status, code in (
        ({"scope": SCOPE}, 422, "EMPTY_SELECTOR_WITHOUT_CONFIRMATION"),
        ({"scope": SCOPE, "selector": {"other": 1}}, 422, "EMPTY_SELECTOR_WITHOUT_CONFIRMATION"),
        (
            {"scope": SCOPE, "selector": {"memory_ids": [event]}, "confirm_all": True},
            400,
            "AMBIGUOUS_SELECTOR_CONFIRM_ALL",
        ),
        ({"scope": SCOPE, "selector": {"memory_ids": [event]}, "cascade": "all"}, 400, "INVALID_CASCADE"),
        ({"selector": {"memory_ids": [event]}}, 422, "INVALID_BODY"),
    ):
        answer = await client.post("/v1/forget", json=sent)
        assert (answer.status_code, answer.json()["error_code"]) == (status, code)
    kept = (await client.post("/v1/forget", json={"scope": SCOPE, "selector": {"memory_ids": [event]}})).json()
    assert kept == {"deleted": {"events": 0}, "requested": 1, "matched": 1} and len(direct.double.events()) == 1
    named = {"scope": SCOPE, "selector": {"memory_ids": [event]}, "cascade": "redact_events"}
    assert (await client.post("/v1/forget", json=named)).json()["deleted"] == {"events": 1}
    # The removed event's key is released: the same body is a new event.
    again = (await client.post("/v1/experience", json=body("forgettable", key="fk"))).json()
    assert again["event_id"] != event and again["replayed_from_idempotency"] is False


async def test_waiting_for_the_index() -> None:
    with served("direct", listing_lag_s=0.1, wait_timeout_s=1.0) as direct:
        async with httpx.AsyncClient(base_url=direct.url, headers=AUTH) as client:
            assert (
                await client.post("/v1/experience", params={"wait": "indexed"}, json=body("lagged"))
            ).status_code == 202
            assert len((await client.get("/v1/events", params={"scope": SCOPE})).json()["items"]) == 2
            refused = await client.post("/v1/experience", params={"wait": "soon"}, json=body("x"))
            assert refused.status_code == 422 and "indexed" in refused.json()["message"]
    with served("direct", clock=ManualClock(), listing_lag_s=5) as manual:
        async with httpx.AsyncClient(base_url=manual.url, headers=AUTH) as client:
            timed_out = await client.post("/v1/experience", params={"wait": "indexed"}, json=body("later"))
            assert (timed_out.status_code, timed_out.json()["error_code"]) == (408, "WAIT_TIMEOUT")
            assert len(manual.double.events()) == 1  # durable, not yet indexed


async def test_authentication_and_the_actor() -> None:
    with served("direct", api_key="right", require_actor=True) as direct:
        async with httpx.AsyncClient(base_url=direct.url) as client:
            assert (await client.get("/v1/health")).json() == {"status": "healthy", "version": "v0.10.5"}
            assert (await client.get("/v1/events")).json()["error_code"] == "MISSING_TOKEN"
            wrong = {"Authorization": "Bearer wrong"}
            assert (await client.get("/v1/events", headers=wrong)).json()["error_code"] == "INVALID_TOKEN_SIGNATURE"
            right = {"Authorization": "Bearer right"}
            assert (await client.get("/v1/events", headers=right)).json()["error_code"] == "ACTOR_MISMATCH"
            who = (await client.get("/v1/auth/whoami", headers=right)).json()
            assert who == {"caller": "user:local", "tenant_id": "tenant-1", "deployment_preset": "dev_local"}
            actor = {**right, "X-Cortex-Actor": "user:local"}
            assert (await client.get("/v1/events", headers=actor, params={"scope": SCOPE})).status_code == 200
            assert (await client.get("/v1/nowhere", headers=actor)).status_code == 404
        assert all("authorization" not in r.headers for r in direct.double.requests)


async def test_the_hosted_wire(hosted: Served) -> None:
    async with httpx.AsyncClient(base_url=hosted.url, headers=AUTH) as client:
        write = await client.post("/memory/experience", json=body("hosted", key="k"), headers={"Idempotency-Key": "c1"})
        assert write.status_code == 200 and write.json()["success"] is True and "event_id" in write.json()["data"]
        claimed = await client.post(
            "/memory/experience", json=body("hosted", key="k"), headers={"Idempotency-Key": "c1"}
        )
        assert (claimed.status_code, claimed.json()["errorCode"]) == (409, "CONFLICT")
        missing = await client.post("/memory/experience", json=body("no key"))
        assert missing.json()["errorCode"] == "MISSING_IDEMPOTENCY_KEY"
        assert hosted.double.scopes() == [f"org:tenant-1/{SCOPE}"]
        listed = (await client.get("/memory/events", params={"scope": SCOPE})).json()["data"]
        assert len(listed["items"]) == 2 and listed["items"][0]["scope"] == f"org:tenant-1/{SCOPE}"
        twice = await client.get("/memory/events", params=[("scope", SCOPE), ("labels", "a"), ("labels", "b")])
        assert twice.status_code == 400
        scopes = (await client.get("/memory/scopes", params={"prefix": "app:tinymemory/"})).json()["data"]
        assert scopes == {"scopes": [f"org:tenant-1/{SCOPE}"]}
        pack = (await client.post("/memory/recall", json={"scope": SCOPE, "query": "hosted"})).json()["data"]
        strict = {"scope": SCOPE, "question": "q", "use_pack_id": pack["pack_id"]}
        for extra in ({"view": "granular"}, {"answer_instructions": None}):
            refused = await client.post("/memory/answer", json={**strict, **extra})
            assert (refused.status_code, refused.json()["errorCode"]) == (400, "VALIDATION_ERROR")
        assert (await client.post("/memory/answer", json=strict)).json()["data"]["answer"].startswith("Based on")
        erased = (await client.post("/memory/v1/erasures", json={"scope": "app:tinymemory"})).json()
        assert erased["erased"] is True and erased["scopes"] == 1 and len(erased["erasure_ids"]) == 1
        root = await client.post("/memory/v1/erasures", json={"scope": "org:tenant-1"})
        assert (root.status_code, root.json()["error_code"]) == (422, "ROOT_ERASURE_REFUSED")
        unknown = await client.post("/memory/v1/erasures", json={"scope": SCOPE, "confirm_all": True})
        assert unknown.json()["error_code"] == "UNKNOWN_FIELD"
        assert (await client.get("/memory/nowhere")).json() == {
            "success": False,
            "error": "no route GET /memory/nowhere",
            "errorCode": "NOT_FOUND",
        }
        assert (await client.get("/memory/events", headers={"Authorization": ""})).status_code == 401


async def test_the_hosted_rate_limit() -> None:
    with served("hosted", rate_limit_per_minute=3, clock=ManualClock()) as hosted:
        async with httpx.AsyncClient(base_url=hosted.url, headers=AUTH) as client:
            for _ in range(3):
                assert (await client.get("/memory/scopes")).status_code == 200
            limited = await client.get("/memory/scopes")
            assert limited.status_code == 429 and limited.headers["Retry-After"] == "60"
            assert limited.json() == {
                "error": {
                    "message": "Rate limit exceeded. Please retry after a brief wait.",
                    "type": "rate_limit_error",
                }
            }
            hosted.double.advance(61)
            assert (await client.get("/memory/scopes")).status_code == 200


async def test_faults_over_http_and_the_request_log(direct: Served, client: httpx.AsyncClient) -> None:
    control = await client.post(
        "/__double__/faults", json={"knob": "fail_next", "n": 1, "status": 502, "match": "v1/events*"}
    )
    assert control.json() == {"ok": True}
    assert (await client.get("/v1/events", params={"scope": SCOPE})).status_code == 502
    assert (await client.get("/v1/events", params={"scope": SCOPE})).status_code == 200
    assert (await client.post("/__double__/faults", json={"knob": "nonsense"})).status_code == 400
    log = (await client.get("/__double__/requests")).json()["requests"]
    assert [(r["path"], r["status"]) for r in log] == [("v1/events", 502), ("v1/events", 200)]
    assert direct.double.requests[0].query == {"scope": [SCOPE]}


async def test_a_restarted_double_keeps_its_log(tmp_path: Path) -> None:
    data = tmp_path / "double.jsonl"
    first = CortexDouble(DoubleConfig(), data=data)
    with serve(first) as url:
        async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
            kept = (await client.post("/v1/experience", json=body("kept", key="kk"))).json()["event_id"]
            gone = (await client.post("/v1/experience", json=body("gone"))).json()["event_id"]
            forget = {"scope": SCOPE, "selector": {"memory_ids": [gone]}, "cascade": "redact_events"}
            await client.post("/v1/forget", json=forget)
    second = CortexDouble(DoubleConfig(), data=data)
    with serve(second) as url:
        async with httpx.AsyncClient(base_url=url, headers=AUTH) as client:
            items = (await client.get("/v1/events", params={"scope": SCOPE})).json()["items"]
            assert [i["id"] for i in items] == [kept, kept]
            replay = (await client.post("/v1/experience", json=body("kept", key="kk"))).json()
            assert replay == {"event_id": kept, "status": "captured", "replayed_from_idempotency": True}
            fresh = (await client.post("/v1/experience", json=body("new"))).json()["event_id"]
            assert fresh == "evt_3"


async def test_hidden_events_list_once_their_window_passes(direct: Served) -> None:
    direct.double.faults.hide_events(0.3)
    started = time.monotonic()
    async with direct.engine(timing=Timing(visibility=5, poll=0.01, settle=0.2)) as engine:
        await engine.store(Document.from_text("hidden for a while"))
    assert time.monotonic() - started >= 0.3


async def test_expired_packs_and_the_switches_of_older_servers() -> None:
    with served("direct", recall_role_prefix=True, default_cascade="redact_events", caller=None) as direct:
        async with httpx.AsyncClient(base_url=direct.url, headers=AUTH) as client:
            event = (await client.post("/v1/experience", json=body("older server"))).json()["event_id"]
            pack = (await client.post("/v1/recall", json={"scope": SCOPE, "query": "older"})).json()
            assert pack["layers"]["events"][0]["content"]["text"] == "[user] older server"
            direct.double.faults.expire_packs()
            answer = await client.post(
                "/v1/answer", json={"scope": SCOPE, "question": "q", "use_pack_id": pack["pack_id"]}
            )
            assert answer.json()["error_code"] == "PACK_NOT_FOUND"
            forgot = await client.post("/v1/forget", json={"scope": SCOPE, "selector": {"memory_ids": [event]}})
            assert forgot.json()["deleted"] == {"events": 1}  # this server's default cascade removes events
            assert (await client.get("/v1/auth/whoami")).status_code == 404


def test_ranking_stops_early_yet_keeps_the_exact_order() -> None:
    # The walk stops once nothing older can rank higher; it must give what sorting every event would.
    rng = random.Random(5)
    vocabulary = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "ab", "tok9", "x1y"]
    for _ in range(300):
        log = EventLog()
        for seq in range(1, rng.randrange(0, 40) + 1):
            text = " ".join(rng.choice(vocabulary) for _ in range(rng.randrange(0, 6)))
            content = {"kind": "message", "role": "user", "text": text}
            scope = rng.choice(["app:a", "app:b"])
            log.add(EventRecord(f"evt_{seq}", seq, scope, "m", content, [], None, "", None, None, 0, 0, 0, {}), 1)
        scopes = ["app:a", "app:b"][: rng.randrange(1, 3)]
        query = " ".join(rng.choice(vocabulary) for _ in range(rng.randrange(0, 5)))
        size = rng.randrange(0, 12)
        newest_first = sorted((r for s in scopes for r in log.by_scope.get(s, [])), key=lambda r: -r.seq)
        wanted = words(query)
        expected = sorted(newest_first, key=lambda r: (-len(wanted & r.words()), -r.seq))[:size]
        ranked = rank(iter(newest_first), query, size, first_held([log.vocabulary(s) for s in scopes]))
        assert [r.id for r in ranked] == [r.id for r in expected]
