"""The one HTTP client of a CortexDB engine: URLs, auth, the actor header, caps, retries and pauses
(docs/spec/cortexdb.md §4).

`Transport.send` makes one logical call: it resolves the credential inside every attempt, waits out a rate-limit
pause, streams the answer under its cap and maps every failure to a contract error. Reads are retried after
`UnavailableError`; writes are sent exactly once, because a timeout leaves their outcome unknown. The hosted
wire's success envelope is unwrapped here, so callers see the same data on both wires.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from engines.contract import EngineError, Error, UnauthorizedError, UnavailableError
from engines.cortex.descriptor import CortexWire
from engines.cortex.failures import (
    AUTHORIZATION_STATE_CHANGED,
    error_code,
    http_failure,
    tagged,
    transport_failure,
)
from engines.cortex.pool import ClientPool
from engines.cortex.timing import Timing
from engines.settings import EngineCredential

logger = logging.getLogger(__name__)

SUCCESS_CAP = 64 * 1024 * 1024
ERROR_CAP = 64 * 1024
READ_ATTEMPTS = 3
AUTH_STATE_ATTEMPTS = 6
WHOAMI = "v1/auth/whoami"

Query = Sequence[tuple[str, str]]


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _quoted(value: str) -> str:
    if not value.isascii():
        return quote(value, safe="")
    # A lookup's query is 50 labels long but uses two reserved characters (`:` and `,`): one replace per
    # character used, `%` first so that no escape is escaped again.
    for char in sorted(set(value) - _UNRESERVED, key=lambda c: c != "%"):
        value = value.replace(char, f"%{ord(char):02X}")
    return value


def encode_query(query: Query) -> str:
    """Percent-encode every byte but `A-Z a-z 0-9 - . _ ~` (so `:` is `%3A`, `/` is `%2F`, `,` is `%2C`)."""
    return "&".join(f"{_quoted(key)}={_quoted(value)}" for key, value in query)


@dataclass(frozen=True)
class Encoded:
    """A JSON body serialised already (compact UTF-8): sent as it is, not encoded again."""

    data: bytes


@dataclass(frozen=True)
class Call:
    """One logical request: the route (no leading slash, no query), its query, its JSON body and its class."""

    method: str
    route: str
    query: Query = ()
    body: Any = None
    read: bool = False
    claim: str | None = None
    unwrapped: bool = False


class _Actor(Enum):
    UNKNOWN = "unknown"
    KNOWN = "known"
    ABSENT = "absent"


class Transport:
    """Sends calls for one engine on its wire; one connection pool per event loop, shared by every call."""

    def __init__(
        self,
        wire: CortexWire,
        endpoint: str,
        credential: EngineCredential,
        timing: Timing,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.wire = wire
        self._base = endpoint if endpoint.endswith("/") else endpoint + "/"
        parts = urlsplit(endpoint)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.host = parts.netloc
        self._credential = credential
        self._timing = timing
        self._pool = ClientPool(client)
        self._actor_state = _Actor.ABSENT if wire.hosted else _Actor.UNKNOWN
        self._actor: str | None = None
        self._paused_until = 0.0
        # Remembered once a server answers the bulk route with 404 or 405.
        self.bulk_missing = False

    # -- lifecycle ----------------------------------------------------------------------------------

    async def aclose(self) -> None:
        await self._pool.aclose()

    def close(self) -> None:
        self._pool.close()

    # -- calls --------------------------------------------------------------------------------------

    def where(self, route: str) -> str:
        return f"{route} on {self.host}"

    async def send(self, call: Call) -> Any:
        """The call's answer (hosted: its `data`), retried as a read when `call.read`; failures are contract errors."""
        attempt = 0
        while True:
            attempt += 1
            try:
                return await self._attempt(call)
            except UnavailableError as err:
                limit = AUTH_STATE_ATTEMPTS if error_code(err) == AUTHORIZATION_STATE_CHANGED else READ_ATTEMPTS
                if not call.read or attempt >= limit:
                    raise
                await asyncio.sleep(self._timing.retry_backoff * 2 ** (attempt - 1))

    async def _attempt(self, call: Call) -> Any:
        token = await self._token()
        await self._wait_out_pause()
        if self._actor_state is _Actor.UNKNOWN and call.route != WHOAMI:
            await self._learn_actor()
        headers = self._headers(token, call)
        content = _content(call.body)
        url = self._base + call.route + (f"?{encode_query(call.query)}" if call.query else "")
        where = self.where(call.route)
        started = time.perf_counter()
        client = self._pool.client()
        try:
            async with client.stream(call.method, url, headers=headers, content=content) as response:
                status = response.status_code
                ok = 200 <= status < 300
                body = await _read_capped(response, where) if ok else await _read_error_body(response)
        except httpx.HTTPError as err:
            raise transport_failure(err, where) from None
        logger.debug(
            "cortex %s %s: %s in %.1f ms", call.method, call.route, status, (time.perf_counter() - started) * 1e3
        )
        if not ok:
            raise self._failure(call, status, body, response.headers, token)
        return self._result(call, body, where)

    def _failure(self, call: Call, status: int, body: bytes, headers: httpx.Headers, token: str) -> Error:
        if status in (401, 403) and not self.wire.hosted:
            self._actor_state, self._actor = _Actor.UNKNOWN, None
        if status == 429:
            self._pause(headers)
        hosted = self.wire.hosted
        return http_failure(hosted=hosted, where=self.where(call.route), status=status, body=body, secret=token)

    def _result(self, call: Call, body: bytes, where: str) -> Any:
        if not body:
            if self.wire.hosted and not call.unwrapped:
                raise tagged(EngineError(f"{where} answered without the success envelope"), None, None)
            return None
        try:
            parsed = json.loads(body)
        except ValueError:
            raise tagged(EngineError(f"{where} answered with invalid JSON"), None, None) from None
        if not self.wire.hosted or call.unwrapped:
            return parsed
        return _unwrap(parsed, where)

    # -- credential, actor, pause --------------------------------------------------------------------

    async def _token(self) -> str:
        try:
            raw = await self._credential.resolve()
        except Exception:
            raise UnauthorizedError("the credential source failed; no request was sent") from None
        token = (raw or "").strip()
        if not token:
            raise UnauthorizedError("the engine has no key; no request was sent")
        if any(not (ch == "\t" or " " <= ch <= "~") for ch in token):
            raise UnauthorizedError("the key holds characters a header cannot carry; no request was sent")
        return token

    def _headers(self, token: str, call: Call) -> dict[str, str]:
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if call.body is not None:
            headers["Content-Type"] = "application/json"
        if self._actor_state is _Actor.KNOWN and self._actor is not None:
            headers["X-Cortex-Actor"] = self._actor
        if self.wire.hosted and call.claim is not None:
            headers["Idempotency-Key"] = call.claim
        return headers

    async def _learn_actor(self) -> None:
        async with self._pool.lock():
            if self._actor_state is not _Actor.UNKNOWN:
                return
            try:
                answer = await self.send(Call("GET", WHOAMI, read=True))
            except Error as err:
                if getattr(err, "status", None) in (404, 405):
                    self._actor_state = _Actor.ABSENT
                return
            caller = answer.get("caller") if isinstance(answer, dict) else None
            if isinstance(caller, str) and caller:
                self._actor_state, self._actor = _Actor.KNOWN, caller

    def _pause(self, headers: httpx.Headers) -> None:
        for name in ("Retry-After", "RateLimit-Reset"):
            value = headers.get(name)
            if value is not None and value.strip().isdigit():
                seconds = min(float(value.strip()), self._timing.pause_cap)
                self._paused_until = max(self._paused_until, time.monotonic() + seconds)
                return

    async def _wait_out_pause(self) -> None:
        # Re-read after waking: a later, longer pause holds this request too.
        while (left := self._paused_until - time.monotonic()) > 0:  # noqa: ASYNC110 - a pause is a deadline
            await asyncio.sleep(left)


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), check_circular=False)


def _content(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, Encoded):
        return body.data
    return _COMPACT.encode(body).encode("utf-8")


async def _read_capped(response: httpx.Response, where: str) -> bytes:
    declared = response.headers.get("Content-Length")
    if declared is not None and declared.isdigit() and int(declared) > SUCCESS_CAP:
        raise tagged(EngineError(f"{where} answered more than 64 MiB"), response.status_code, None)
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > SUCCESS_CAP:
            raise tagged(EngineError(f"{where} answered more than 64 MiB"), response.status_code, None)
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


async def _read_error_body(response: httpx.Response) -> bytes:
    """At most 64 KiB of a failure's body; a body that breaks off is kept as far as it came."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in response.aiter_bytes():
            chunks.append(chunk[: ERROR_CAP - size])
            size += len(chunks[-1])
            if size >= ERROR_CAP:
                break
    except httpx.HTTPError:
        pass
    return b"".join(chunks)


def _unwrap(parsed: Any, where: str) -> Any:
    if not isinstance(parsed, dict) or "success" not in parsed:
        raise tagged(EngineError(f"{where} answered without the success envelope"), None, None)
    if parsed.get("success") is not True:
        code = parsed.get("errorCode")
        said = parsed.get("error")
        detail = f" — {' '.join(str(said).split())[:300]}" if isinstance(said, str) and said else ""
        raise tagged(EngineError(f"{where} reported a failure{detail}"), None, code if isinstance(code, str) else None)
    if "data" not in parsed:
        raise tagged(EngineError(f"{where} answered without the envelope's data"), None, None)
    return parsed["data"]
