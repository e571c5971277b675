"""The transport's protocol logic against `httpx.MockTransport`: URLs, headers, actor, credential, retries, caps."""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from engines.contract import (
    ConflictError,
    EngineError,
    Error,
    InvalidRequestError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
)
from engines.cortex import CortexWire, Timing, error_code, is_insufficient_credits
from engines.cortex.transport import Call, Transport, encode_query
from engines.settings import EngineCredential

FAKE_KEY = "sk-FAKE-0123456789-recognisable"
Handler = Callable[[httpx.Request], httpx.Response]


def _transport(handler: Handler, wire: CortexWire = CortexWire.DIRECT, **credential: object) -> Transport:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    cred = EngineCredential(**credential) if credential else EngineCredential.of(FAKE_KEY)  # type: ignore[arg-type]
    return Transport(wire, "http://127.0.0.1:8123/cx", cred, Timing.fast(), client)


def _json(status: int, body: object, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode(), headers=headers)


class Recorder:
    """A handler answering from a list (the last answer repeats) and keeping every request."""

    def __init__(self, *answers: httpx.Response) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.path.endswith("v1/auth/whoami"):
            return _json(404, {"error_code": "NOT_FOUND"})
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]

    def paths(self) -> list[str]:
        return [r.url.path for r in self.requests]


def test_query_values_are_encoded_byte_by_byte() -> None:
    assert encode_query([("scope", "app:tinymemory/app:x"), ("labels", "a,b c~é")]) == (
        "scope=app%3Atinymemory%2Fapp%3Ax&labels=a%2Cb%20c~%C3%A9"
    )


async def test_urls_keep_the_endpoint_path_and_headers_carry_the_key() -> None:
    recorder = Recorder(_json(200, {"ok": True}))
    transport = _transport(recorder)
    await transport.send(Call("GET", "v1/events", [("scope", "app:tinymemory/app:learnings")], read=True))
    await transport.send(Call("POST", "v1/forget", body={"é": 1}))
    get, post = [r for r in recorder.requests if "whoami" not in r.url.path]
    assert get.url.raw_path == b"/cx/v1/events?scope=app%3Atinymemory%2Fapp%3Alearnings"
    assert get.headers["authorization"] == f"Bearer {FAKE_KEY}" and get.headers["accept"] == "application/json"
    assert "content-type" not in get.headers and "idempotency-key" not in post.headers
    assert post.headers["content-type"] == "application/json" and post.content == '{"é":1}'.encode()


async def test_the_actor_is_learned_once_and_forgotten_after_a_refusal() -> None:
    calls: list[tuple[str, str | None]] = []
    refuse = [True]

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.url.path, request.headers.get("x-cortex-actor")))
        if request.url.path.endswith("whoami"):
            return _json(200, {"caller": "user:ana"})
        if request.url.path.endswith("v1/recall") and refuse[0]:
            refuse[0] = False
            return _json(401, {"error_code": "ACTOR_MISMATCH"})
        return _json(200, {})

    transport = _transport(handler)
    await transport.send(Call("GET", "v1/events", read=True))
    await transport.send(Call("GET", "v1/events", read=True))
    with pytest.raises(UnauthorizedError, match="check the API key"):
        await transport.send(Call("POST", "v1/recall", body={}))
    await transport.send(Call("GET", "v1/events", read=True))
    assert calls == [
        ("/cx/v1/auth/whoami", None),
        ("/cx/v1/events", "user:ana"),
        ("/cx/v1/events", "user:ana"),
        ("/cx/v1/recall", "user:ana"),
        ("/cx/v1/auth/whoami", None),
        ("/cx/v1/events", "user:ana"),
    ]


async def test_a_server_without_actors_is_never_asked_again_and_hosted_never_asks() -> None:
    recorder = Recorder(_json(200, {"success": True, "data": {}}))
    direct = _transport(recorder)
    for _ in range(3):
        await direct.send(Call("GET", "v1/events", read=True))
    assert recorder.paths().count("/cx/v1/auth/whoami") == 1
    hosted_recorder = Recorder(_json(200, {"success": True, "data": {"x": 1}}))
    hosted = _transport(hosted_recorder, CortexWire.TINYHUMANS)
    assert await hosted.send(Call("POST", "memory/forget", body={}, claim="tm-claim")) == {"x": 1}
    [request] = hosted_recorder.requests
    assert request.headers["idempotency-key"] == "tm-claim" and "x-cortex-actor" not in request.headers


@pytest.mark.parametrize("token", ["", "   ", "key\r\nX-Evil: 1", "key\nmore", "clé"])
async def test_a_bad_key_sends_nothing(token: str) -> None:
    recorder = Recorder(_json(200, {}))
    with pytest.raises(UnauthorizedError) as caught:
        await _transport(recorder, static=token).send(Call("GET", "v1/events", read=True))
    assert recorder.requests == [] and "no request was sent" in caught.value.message
    assert token.strip() == "" or token not in str(caught.value)


async def test_the_key_source_is_asked_on_every_attempt_and_its_failure_sends_nothing() -> None:
    asked: list[int] = []

    class Source:
        async def bearer(self) -> str:
            asked.append(1)
            return f" token-{len(asked)} "

    recorder = Recorder(_json(503, {}), _json(200, {}))
    transport = _transport(recorder, source=Source())
    await transport.send(Call("GET", "v1/events", read=True))
    # The first read, the actor lookup it triggered, and the retry each asked the source (and trimmed its answer).
    sent = sorted(r.headers["authorization"] for r in recorder.requests)
    assert sent == ["Bearer token-1", "Bearer token-2", "Bearer token-3"]

    class Broken:
        async def bearer(self) -> str:
            raise RuntimeError(FAKE_KEY)

    silent = Recorder(_json(200, {}))
    with pytest.raises(UnauthorizedError) as caught:
        await _transport(silent, source=Broken()).send(Call("GET", "v1/events", read=True))
    assert silent.requests == [] and FAKE_KEY not in str(caught.value)


async def test_reads_retry_503_and_writes_are_sent_once() -> None:
    recorder = Recorder(_json(503, {}), _json(503, {}), _json(200, {"items": []}))
    assert await _transport(recorder).send(Call("GET", "v1/events", read=True)) == {"items": []}
    assert recorder.paths().count("/cx/v1/events") == 3
    always = Recorder(_json(503, {"error_code": "UPSTREAM_UNAVAILABLE"}))
    with pytest.raises(UnavailableError):
        await _transport(always).send(Call("GET", "v1/events", read=True))
    assert always.paths().count("/cx/v1/events") == 3
    write = Recorder(_json(503, {}))
    with pytest.raises(UnavailableError):
        await _transport(write).send(Call("POST", "v1/experience", body={}))
    assert write.paths().count("/cx/v1/experience") == 1
    changing = Recorder(_json(503, {"error_code": "AUTHORIZATION_STATE_CHANGED"}))
    with pytest.raises(UnavailableError):
        await _transport(changing).send(Call("GET", "v1/events", read=True))
    assert changing.paths().count("/cx/v1/events") == 6


async def test_a_429_pauses_every_request_for_its_retry_after() -> None:
    recorder = Recorder(_json(429, {}, {"Retry-After": "1"}), _json(200, {}))
    transport = _transport(recorder)  # pause_cap 0.05 s in the fast timing
    with pytest.raises(UnavailableError):
        await transport.send(Call("POST", "v1/answer", body={}))
    started = time.monotonic()
    await transport.send(Call("POST", "v1/answer", body={}))
    assert time.monotonic() - started >= 0.04
    dated = Recorder(_json(429, {}, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), _json(200, {}))
    plain = _transport(dated)
    with pytest.raises(UnavailableError):
        await plain.send(Call("POST", "v1/answer", body={}))
    started = time.monotonic()
    await plain.send(Call("POST", "v1/answer", body={}))
    assert time.monotonic() - started < 0.04


class _Huge(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunk = b" " * (1 << 20)
        for _ in range(65):
            yield chunk


async def test_answers_are_capped_and_must_be_json() -> None:
    declared = Recorder(httpx.Response(200, headers={"Content-Length": str(65 << 20)}, content=b"{}"))
    with pytest.raises(EngineError, match="more than 64 MiB"):
        await _transport(declared).send(Call("GET", "v1/events", read=True))
    streamed = Recorder(httpx.Response(200, stream=_Huge()))
    with pytest.raises(EngineError, match="more than 64 MiB"):
        await _transport(streamed).send(Call("GET", "v1/events", read=True))
    with pytest.raises(EngineError, match="invalid JSON"):
        await _transport(Recorder(httpx.Response(200, content=b"{not json"))).send(Call("GET", "v1/x", read=True))
    assert await _transport(Recorder(httpx.Response(200, content=b""))).send(Call("GET", "v1/x", read=True)) is None


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (httpx.Response(200, content=b""), "without the success envelope"),
        (_json(200, {"data": {}}), "without the success envelope"),
        (_json(200, {"success": True}), "without the envelope's data"),
        (_json(200, {"success": False, "error": "nope", "errorCode": "X_FAILED"}), "reported a failure — nope"),
    ],
)
async def test_the_hosted_envelope_is_required(answer: httpx.Response, message: str) -> None:
    with pytest.raises(EngineError, match=message) as caught:
        await _transport(Recorder(answer), CortexWire.TINYHUMANS).send(Call("GET", "memory/events", read=True))
    assert error_code(caught.value) in (None, "X_FAILED")


STATUS_TABLE: list[tuple[int, type[Error]]] = [
    (400, InvalidRequestError),
    (401, UnauthorizedError),
    (402, EngineError),
    (403, UnauthorizedError),
    (404, NotFoundError),
    (405, EngineError),
    (408, UnavailableError),
    (409, ConflictError),
    (413, InvalidRequestError),
    (418, EngineError),
    (422, InvalidRequestError),
    (429, UnavailableError),
    (500, UnavailableError),
    (501, EngineError),
    (502, UnavailableError),
    (503, UnavailableError),
    (504, UnavailableError),
    (302, EngineError),
]


@pytest.mark.parametrize(("status", "kind"), STATUS_TABLE)
@pytest.mark.parametrize("wire", list(CortexWire))
async def test_every_status_maps_to_its_error_kind(status: int, kind: type[Error], wire: CortexWire) -> None:
    body = (
        {"success": False, "error": f"server says {FAKE_KEY}", "errorCode": "some_code!"}
        if wire.hosted
        else {"error_code": "SOME_CODE", "message": f"server says {FAKE_KEY}"}
    )
    route = "memory/forget" if wire.hosted else "v1/forget"
    with pytest.raises(kind) as caught:
        await _transport(Recorder(_json(status, body, {"Location": "http://elsewhere/"})), wire).send(
            Call("POST", route, body={})
        )
    err = caught.value
    assert type(err) is kind and err.message.startswith(f"{route} on 127.0.0.1:8123")
    assert FAKE_KEY not in str(err) and getattr(err, "status", None) == status
    assert error_code(err) == "SOME_CODE"
    if 300 <= status < 400:
        assert "not followed" in err.message
    else:
        assert err.message.endswith("— server says <redacted>")


async def test_hosted_codes_default_by_status_and_credits_are_told_apart() -> None:
    for status, code in (
        (401, "UNAUTHORIZED"),
        (402, "USER_INSUFFICIENT_CREDITS"),
        (429, "RATE_LIMITED"),
        (500, "HTTP_500"),
    ):
        limiter = {"error": {"message": "Rate limit exceeded.", "type": "rate_limit_error"}}
        with pytest.raises(Error) as caught:
            await _transport(Recorder(_json(status, limiter)), CortexWire.TINYHUMANS).send(
                Call("POST", "memory/answer", body={})
            )
        assert error_code(caught.value) == code
        assert is_insufficient_credits(caught.value) == (status == 402)
    with pytest.raises(ConflictError):  # older backends answered a claimed key with 400 CONFLICT
        await _transport(Recorder(_json(400, {"success": False, "errorCode": "conflict"})), CortexWire.TINYHUMANS).send(
            Call("POST", "memory/experience", body={})
        )
    with pytest.raises(UnauthorizedError, match="sign in again"):
        await _transport(Recorder(_json(401, {})), CortexWire.TINYHUMANS).send(Call("POST", "memory/answer", body={}))


async def test_server_words_are_cut_to_300_characters() -> None:
    with pytest.raises(InvalidRequestError) as caught:
        await _transport(Recorder(httpx.Response(422, content=b"x" * 5000))).send(Call("POST", "v1/forget", body={}))
    assert caught.value.message.endswith("— " + "x" * 300)


@pytest.mark.parametrize(
    ("raised", "message"),
    [
        (httpx.ConnectError("boom", request=None), "the connection failed"),
        (httpx.ReadTimeout("slow"), "the request timed out"),
        (httpx.RemoteProtocolError("cut"), "cut off before the answer was whole"),
    ],
)
async def test_transport_failures_are_unavailable(raised: httpx.HTTPError, message: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise raised

    with pytest.raises(UnavailableError, match=message):
        await _transport(handler).send(Call("POST", "v1/experience", body={}))


@pytest.mark.parametrize(
    ("cause", "message"),
    [
        (ConnectionRefusedError(111, "refused"), "the connection was refused"),
        (socket.gaierror(-2, "Name or service not known"), "the host could not be resolved; check the URL"),
        (ssl.SSLCertVerificationError("bad cert"), "TLS failed"),
    ],
)
async def test_connect_failures_name_their_class(cause: BaseException, message: str) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        try:
            raise cause
        except BaseException as inner:
            raise httpx.ConnectError(f"{inner} with {FAKE_KEY}") from inner

    with pytest.raises(UnavailableError) as caught:
        await _transport(handler).send(Call("POST", "v1/experience", body={}))
    assert caught.value.message.endswith(message) and FAKE_KEY not in str(caught.value)
