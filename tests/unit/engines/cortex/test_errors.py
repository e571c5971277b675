"""Failures over real HTTP: every status of the spec's table on both wires, health, and a key that never leaks."""

from __future__ import annotations

import logging

import pytest

from engines.contract import (
    ConflictError,
    Document,
    EngineError,
    Error,
    FetchMode,
    FetchRequest,
    InvalidRequestError,
    ListRequest,
    NotFoundError,
    RecallRequest,
    UnauthorizedError,
    UnavailableError,
)
from engines.cortex import CortexEngine, CortexWire, Timing, error_code, is_insufficient_credits
from engines.settings import EngineCredential
from tests.fixtures.cortex_double import Served, served

FAKE_KEY = "sk-FAKE-0123456789-recognisable"

TABLE: list[tuple[int, type[Error]]] = [
    (400, InvalidRequestError),
    (401, UnauthorizedError),
    (402, EngineError),
    (403, UnauthorizedError),
    (404, NotFoundError),
    (408, UnavailableError),
    (409, ConflictError),
    (413, InvalidRequestError),
    (422, InvalidRequestError),
    (429, UnavailableError),
    (500, UnavailableError),
    (502, UnavailableError),
    (503, UnavailableError),
    (504, UnavailableError),
    (418, EngineError),
]


@pytest.mark.parametrize(("status", "kind"), TABLE)
async def test_each_status_becomes_its_error_kind(either: Served, status: int, kind: type[Error]) -> None:
    route = "memory/answer" if either.wire.hosted else "v1/answer"
    async with either.engine(FAKE_KEY) as engine:
        await engine.store(Document.from_text("something to answer from"))
        # More failures than any retry: a 404 from the answer route is a pack gone, rebuilt twice before it counts.
        either.double.faults.fail_next(5, status=status, code="SOME_CODE", match=route)
        with pytest.raises(kind) as caught:
            await engine.recall(RecallRequest(question="something", limit=2))
    err = caught.value
    assert type(err) is kind and f"{route} on 127.0.0.1:" in err.message and FAKE_KEY not in str(err)
    if status == 404:
        assert "the pack was gone 3 times" in err.message
        return
    assert getattr(err, "status", None) == status
    if either.wire.hosted and status == 429:
        assert error_code(err) == "RATE_LIMITED"  # the limiter's body carries no code
    else:
        assert error_code(err) == "SOME_CODE"


async def test_the_hosted_wire_tells_credits_apart_and_refuses_a_stranger(hosted: Served) -> None:
    hosted.double.faults.insufficient_credits(1)
    async with hosted.engine() as engine:
        with pytest.raises(EngineError) as caught:
            await engine.list(ListRequest(limit=1))
        assert is_insufficient_credits(caught.value)
    with served("hosted", api_key="the-right-key") as locked:
        async with locked.engine(FAKE_KEY) as engine:
            with pytest.raises(UnauthorizedError, match="sign in again") as refused:
                await engine.list(ListRequest(limit=1))
            assert FAKE_KEY not in str(refused.value) and error_code(refused.value) == "UNAUTHORIZED"


async def test_a_wrong_key_on_direct_says_to_check_it() -> None:
    with served("direct", api_key="the-right-key", require_actor=True) as locked:
        async with locked.engine(FAKE_KEY) as engine:
            with pytest.raises(UnauthorizedError, match="check the API key") as caught:
                await engine.fetch(FetchRequest(query="x", mode=FetchMode.HYBRID, limit=1))
            assert error_code(caught.value) == "INVALID_TOKEN_SIGNATURE"
        # With the right key the actor is learned from whoami and every request names it.
        mark = locked.mark()
        async with locked.engine("the-right-key") as engine:
            await engine.store(Document.from_text("with an actor"))
        sent = locked.double.requests[mark:]
        assert sent[0].path == "v1/auth/whoami"
        assert {r.headers.get("x-cortex-actor") for r in sent[1:]} == {"user:local"}
        assert {r.status for r in sent} <= {200, 202}


async def test_the_key_never_reaches_an_error_or_a_log_line(either: Served, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    faults = either.double.faults
    messages: list[str] = []
    async with either.engine(FAKE_KEY) as engine:
        await engine.store(Document.from_text("logged"))
        for status in (401, 403, 422, 500, 503):
            faults.fail_next(3, status=status, match="*scopes*")
            try:
                await engine.list(ListRequest(limit=1))
            except Error as err:
                messages.append(repr(err) + str(err))
            faults.clear()
        faults.drop_connection(3)
        with pytest.raises(UnavailableError) as dropped:
            await engine.list(ListRequest(limit=1))
        messages.append(str(dropped.value))
        faults.truncate_body(3)
        with pytest.raises(UnavailableError, match="cut off") as cut:
            await engine.list(ListRequest(limit=1))
        messages.append(str(cut.value))
    assert len(messages) == 7 and all(FAKE_KEY not in message for message in messages)
    assert caplog.records and all(FAKE_KEY not in record.getMessage() for record in caplog.records)
    assert FAKE_KEY not in repr(engine) and "127.0.0.1" in repr(engine)


async def test_nothing_listening_is_unavailable_and_health_says_so() -> None:
    engine = CortexEngine(CortexWire.DIRECT, "http://127.0.0.1:9", EngineCredential.of(FAKE_KEY), timing=Timing.fast())
    async with engine:
        with pytest.raises(UnavailableError, match="connection was refused"):
            await engine.list(ListRequest(limit=1))
        health = await engine.health()
    assert health.state == "degraded" and "refused" in (health.reason or "")


async def test_health_on_both_wires(either: Served) -> None:
    async with either.engine() as engine:
        assert (await engine.health()).state == "ok"
        either.double.faults.fail_next(1, status=401)
        down = await engine.health()
    assert down.state == "down" and " — " not in (down.reason or "")
    probe = "memory/scopes" if either.wire.hosted else "v1/admin/health"
    assert [r.path for r in either.double.requests if r.path == probe]
