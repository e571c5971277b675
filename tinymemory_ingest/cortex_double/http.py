"""The double's bare-ASGI plumbing: a parsed request, a response, and sending it (whole, cut short or not at all)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

NOT_JSON = object()
"""The body of a request whose body is not JSON."""


@dataclass(frozen=True)
class Request:
    """A request: method, path without the leading slash, query as a multi-dict, headers, and the JSON body."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any

    @classmethod
    def of(cls, scope: dict[str, Any], raw: bytes) -> Request:
        query: dict[str, list[str]] = {}
        for key, value in parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True):
            query.setdefault(key, []).append(value)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = NOT_JSON
        return cls(scope["method"].upper(), scope["path"].lstrip("/"), query, headers, body)

    def bearer(self) -> str | None:
        value = self.headers.get("authorization", "")
        scheme, _, token = value.partition(" ")
        return token.strip() or None if scheme.lower() == "bearer" else None

    def one(self, name: str) -> str | None:
        values = self.query.get(name)
        return values[-1] if values else None


@dataclass
class Response:
    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    truncate: bool = False

    def payload(self) -> bytes:
        if self.body is None:
            return b""
        return json.dumps(self.body, ensure_ascii=False).encode("utf-8")


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def send_response(send: Send, response: Response) -> None:
    """Send `response`; a dropped one sends its head and no body, a cut one half its body (both then close)."""
    payload = response.payload()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload) or 1).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in response.headers.items()]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    if response.drop:
        return
    if response.truncate:
        await send({"type": "http.response.body", "body": payload[: len(payload) // 2], "more_body": True})
        return
    await send({"type": "http.response.body", "body": payload or b" "})
