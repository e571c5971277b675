"""Turning what went wrong on the wire into the contract's errors (docs/spec/cortexdb.md §6).

Every error raised for an HTTP failure carries `status` and `code` attributes, set after construction so that
they take no part in the error's equality. A message names the route (never its query) and the endpoint host,
then, after a spaced em dash, at most 300 characters of what the server said; no message carries a credential.
"""

from __future__ import annotations

import json
import re
import socket
import ssl

import httpx

from engines.contract import (
    ConflictError,
    EngineError,
    Error,
    InvalidRequestError,
    NotFoundError,
    UnauthorizedError,
    UnavailableError,
)

SERVER_WORDS = 300
"""Characters of the server's own text a message keeps."""

DASH = " — "
"""What separates the engine's words from the server's in a message."""

INSUFFICIENT_CREDITS = "USER_INSUFFICIENT_CREDITS"
AUTHORIZATION_STATE_CHANGED = "AUTHORIZATION_STATE_CHANGED"
CONFLICT_CODE = "CONFLICT"

_TRANSIENT = frozenset({408, 429, 500, 502, 503, 504})
_INVALID = frozenset({400, 413, 422})
_CODE_CHARS = re.compile(r"[^A-Z0-9_]")


def error_code(err: Error) -> str | None:
    """The server's error code an engine error carries, if any."""
    code = getattr(err, "code", None)
    return code if isinstance(code, str) else None


def error_status(err: Error) -> int | None:
    status = getattr(err, "status", None)
    return status if isinstance(status, int) else None


def is_insufficient_credits(err: Error) -> bool:
    """True when the hosted account ran out of credits: offer a top-up, not a sign-in."""
    return isinstance(err, EngineError) and error_code(err) == INSUFFICIENT_CREDITS


def tagged(err: Error, status: int | None, code: str | None) -> Error:
    """`err` with its `status` and `code` attributes set."""
    setattr(err, "status", status)  # noqa: B010 - attributes outside the contract's error fields
    setattr(err, "code", code)  # noqa: B010
    return err


def http_failure(*, hosted: bool, where: str, status: int, body: bytes, secret: str | None) -> Error:
    """The contract error for a non-2xx answer of `where` (`route on host`)."""
    parsed = _json_object(body)
    code = _hosted_code(parsed, status) if hosted else _direct_code(parsed)
    words = _server_words(parsed, body, secret)
    said = f"{DASH}{words}" if words else ""
    if status in (401, 403):
        remedy = "sign in again" if hosted else "check the API key"
        return tagged(UnauthorizedError(f"{where} refused the credential ({status}); {remedy}{said}"), status, code)
    if status == 402:
        return tagged(EngineError(f"{where} answered 402: the account has no credits left{said}"), status, code)
    if status == 404:
        return tagged(NotFoundError(f"{where} answered 404{said}"), status, code)
    if status == 409 or (hosted and status == 400 and code == CONFLICT_CODE):
        return tagged(
            ConflictError(f"{where} answered {status}: the write conflicts with held state{said}"), status, code
        )
    if status in _INVALID:
        return tagged(InvalidRequestError(f"{where} refused the request ({status}){said}"), status, code)
    if status in _TRANSIENT:
        return tagged(UnavailableError(f"{where} answered {status}; try again later{said}"), status, code)
    if 300 <= status < 400:
        return tagged(EngineError(f"{where} answered {status}, a redirect, which is not followed"), status, code)
    return tagged(EngineError(f"{where} answered {status}{said}"), status, code)


def transport_failure(err: httpx.HTTPError, where: str) -> Error:
    """The contract error for a request that got no usable answer; the library's own text is never kept."""
    if isinstance(err, httpx.TimeoutException):
        return tagged(UnavailableError(f"{where}: the request timed out"), None, None)
    if isinstance(err, httpx.ConnectError):
        return tagged(UnavailableError(f"{where}: {_connect_problem(err)}"), None, None)
    if isinstance(err, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError | httpx.CloseError):
        return tagged(UnavailableError(f"{where}: the connection was cut off before the answer was whole"), None, None)
    if isinstance(err, httpx.TransportError) and not isinstance(err, httpx.UnsupportedProtocol | httpx.ProxyError):
        return tagged(UnavailableError(f"{where}: the connection failed"), None, None)
    return tagged(EngineError(f"{where}: the request could not be built"), None, None)


def _connect_problem(err: BaseException) -> str:
    cause: BaseException | None = err
    while cause is not None:
        if isinstance(cause, ssl.SSLError):
            return "TLS failed"
        if isinstance(cause, socket.gaierror):
            return "the host could not be resolved; check the URL"
        if isinstance(cause, ConnectionRefusedError):
            return "the connection was refused"
        cause = cause.__cause__ or cause.__context__
    text = str(err).lower()
    if "ssl" in text or "certificate" in text:
        return "TLS failed"
    if "name or service" in text or "nodename" in text or "resolve" in text:
        return "the host could not be resolved; check the URL"
    if "refused" in text:
        return "the connection was refused"
    return "the connection failed"


def _json_object(body: bytes) -> dict[str, object] | None:
    try:
        parsed = json.loads(body.decode("utf-8", "replace")) if body else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _direct_code(parsed: dict[str, object] | None) -> str | None:
    code = parsed.get("error_code") if parsed else None
    return code if isinstance(code, str) and code else None


def _hosted_code(parsed: dict[str, object] | None, status: int) -> str:
    raw = None
    if parsed:
        raw = parsed.get("errorCode") or parsed.get("error_code")
    if isinstance(raw, str) and raw.strip():
        cleaned = _CODE_CHARS.sub("", raw.upper())[:64]
        if cleaned:
            return cleaned
    if status in (401, 403):
        return "UNAUTHORIZED"
    if status == 402:
        return INSUFFICIENT_CREDITS
    if status == 429:
        return "RATE_LIMITED"
    return f"HTTP_{status}"


def _server_words(parsed: dict[str, object] | None, body: bytes, secret: str | None) -> str:
    text = _said(parsed) if parsed is not None else None
    if text is None:
        text = body.decode("utf-8", "replace")
    text = " ".join(text.split())
    if secret:
        # A proxy may echo the header it refused; the credential must not reach a message.
        text = text.replace(secret, "<redacted>")
    return text[:SERVER_WORDS]


def _said(parsed: dict[str, object]) -> str | None:
    for key in ("message", "error"):
        value = parsed.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, dict) and isinstance(value.get("message"), str):
            return str(value["message"])
    return None
